"""Checks that transformers uses an fsdp4j export of a byte-vocabulary model (the tiny preset, the demo) without
help: AutoTokenizer loads its tokenizer.json and encodes text as the model's UTF-8 bytes, EOS is id 0 (and text that
holds U+0100, the character GPT-2's byte-level mapping gives byte 0, is not read as EOS), and generate() knows EOS.

    python3 -m venv /tmp/hf && /tmp/hf/bin/pip install torch transformers
    bin/fsdp4j train                                   # the demo: runs/demo-<time>/export
    /tmp/hf/bin/python tools/golden/check_byte_export.py runs/demo-<time>/export

Prints one line per check and exits 1 at the first that fails.
"""
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

export = sys.argv[1]
tok = AutoTokenizer.from_pretrained(export)
texts = ["hi", "Reverse: abc", "ünïcödé 你好 🙂\t  two  spaces", bytes(range(1, 128)).decode(), "Ā Āb Ġ"]
for text in texts:
    ids = tok(text)["input_ids"]
    if ids != list(text.encode("utf-8")):
        sys.exit(f"{text!r}: AutoTokenizer gives {ids[:16]}, the model's bytes are {list(text.encode())[:16]}")
    if tok.decode(ids) != text:
        sys.exit(f"{text!r}: decodes as {tok.decode(ids)!r}")
print(f"ok: {len(texts)} texts encode as their UTF-8 bytes and decode back")
if tok.eos_token_id != 0 or tok.decode([104, 105, 0], skip_special_tokens=True) != "hi":
    sys.exit(f"EOS: {tok.eos_token!r} is id {tok.eos_token_id}, expected 0")
print(f"ok: EOS {tok.eos_token!r} is id 0")
model = AutoModelForCausalLM.from_pretrained(export)
if model.generation_config.eos_token_id != 0 or model.config.eos_token_id != 0:
    sys.exit(f"generation_config eos_token_id {model.generation_config.eos_token_id}, config {model.config.eos_token_id}")
prompt = tok("Echo the number.", return_tensors="pt")["input_ids"]
out = model.generate(prompt, max_new_tokens=8, do_sample=False)
print(f"ok: generate() knows EOS 0; {out.shape[1] - prompt.shape[1]} new tokens: {tok.decode(out[0, prompt.shape[1]:])!r}")
