"""Checks an fsdp4j export against Hugging Face transformers (run on the GPU machine, where transformers is).

Usage: python3 tools/golden/check_export.py DIR
DIR holds `model/` (written by `fsdp4j export`), `batch.json` ({"input_ids": [[...]]}) and `fsdp4j_logits.safetensors`
(tensor `logits` (B, T, V), written by `fsdp4j score --logits-out`). transformers loads the export in float32 with
eager attention, computes the logits of the batch on the CPU, and the largest difference relative to the largest
logit must be under 1e-4. Prints one JSON line and exits non-zero on a mismatch.
"""
import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def main(root):
    model = AutoModelForCausalLM.from_pretrained(f"{root}/model", dtype=torch.float32, attn_implementation="eager")
    model.eval()
    ids = torch.tensor(json.load(open(f"{root}/batch.json"))["input_ids"])
    with torch.no_grad():
        theirs = model(input_ids=ids).logits.float()
    ours = load_file(f"{root}/fsdp4j_logits.safetensors")["logits"].reshape(theirs.shape)
    rel = float((ours - theirs).abs().max() / theirs.abs().max())
    result = {"check": "export-vs-transformers", "model": type(model).__name__, "shape": list(theirs.shape),
              "max_rel_diff": rel, "ok": rel < 1e-4}
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
