"""Checks an fsdp4j export against Hugging Face transformers (on a CPU too, where torch and transformers are installed).

Usage: python3 tools/golden/check_export.py EXPORT_DIR IDS_JSONL FSDP4J_LOGITS

EXPORT_DIR is a directory written by `fsdp4j export` (model.safetensors, config.json); IDS_JSONL holds sequences of
one length, one {"input_ids": [...]} a line; FSDP4J_LOGITS is the safetensors file that
`fsdp4j score --model EXPORT_DIR --data IDS_JSONL --logits-out FSDP4J_LOGITS` wrote (tensor `logits` (B, T, V),
fp32, computed by fsdp4j's CPU backend). transformers loads the export in float32 with eager attention, on the GPU
when there is one (TF32 off, so that matrix products stay fp32), and computes the logits of the same ids. The
largest absolute difference, relative to the largest logit, must be under 1e-4. The files are checked too: a
sharded export's model.safetensors.index.json lists every tensor of the shards once, in the shard that holds it, and
config.json's "torch_dtype" (and "dtype" where present) name the one dtype the tensors are stored in. Prints one
JSON line and exits non-zero on a mismatch (or when the export does not load).
"""
import json
import os
import sys

from safetensors import safe_open

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

TOLERANCE = 1e-4


TORCH_NAMES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}


def check_files(export_dir):
    """The problems of the export's files as transformers writes them (empty when none)."""
    problems = []
    index_file = os.path.join(export_dir, "model.safetensors.index.json")
    if os.path.exists(index_file):
        with open(index_file) as f:
            weight_map = json.load(f)["weight_map"]
        files = sorted(set(weight_map.values()))
    else:
        weight_map, files = None, ["model.safetensors"]
    seen, dtypes = {}, set()
    for name in files:
        with safe_open(os.path.join(export_dir, name), "pt") as f:
            for key in f.keys():
                if key in seen:
                    problems.append(f"{key} is in {seen[key]} and {name}")
                seen[key] = name
                dtypes.add(f.get_slice(key).get_dtype())
    if weight_map is not None and weight_map != seen:
        problems.append("the index's weight_map does not match the tensors of the shards")
    with open(os.path.join(export_dir, "config.json")) as f:
        config = json.load(f)
    named = {config.get("torch_dtype"), config.get("dtype", config.get("torch_dtype"))}
    if len(dtypes) != 1 or named != {TORCH_NAMES.get(next(iter(dtypes)))}:
        problems.append(f"tensors stored as {sorted(dtypes)}, config.json names {sorted(map(str, named))}")
    return problems


def main(export_dir, ids_jsonl, logits_file):
    problems = check_files(export_dir)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(export_dir, dtype=torch.float32, attn_implementation="eager")
    model.to(device).eval()
    with open(ids_jsonl) as f:
        rows = [json.loads(line)["input_ids"] for line in f if line.strip()]
    ids = torch.tensor(rows, device=device)
    with torch.no_grad():
        theirs = model(input_ids=ids).logits.float().cpu()
    ours = load_file(logits_file)["logits"]
    if tuple(ours.shape) != tuple(theirs.shape):
        print(json.dumps({"check": "export-vs-transformers", "export": export_dir, "ok": False,
                          "error": f"fsdp4j logits {list(ours.shape)}, transformers {list(theirs.shape)}"}))
        return 1
    max_abs = float((ours - theirs).abs().max())
    scale = float(theirs.abs().max())
    rel = max_abs / scale
    same_argmax = float((ours.argmax(-1) == theirs.argmax(-1)).float().mean())
    result = {"check": "export-vs-transformers", "export": export_dir, "model": type(model).__name__,
              "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "shape": list(theirs.shape),
              "max_abs_diff": max_abs, "max_abs_logit": scale, "max_rel_diff": rel,
              "same_argmax": same_argmax, "tolerance": TOLERANCE, "file_problems": problems,
              "ok": rel < TOLERANCE and not problems}
    print(json.dumps(result), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
