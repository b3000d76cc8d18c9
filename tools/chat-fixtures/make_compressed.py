"""Writes the compressed twins of src/test/resources/chat/conversations.jsonl (.gz by Python's gzip, .zst by the
zstandard package, as the Hugging Face Hub's files are made) and sharegpt.jsonl, its first four conversations in
ShareGPT's form (dev tool; `pip install zstandard`)."""
import gzip
import json
import os

import zstandard

CHAT = os.path.join(os.path.dirname(__file__), "..", "..", "src", "test", "resources", "chat")
data = open(os.path.join(CHAT, "conversations.jsonl"), "rb").read()
with gzip.open(os.path.join(CHAT, "conversations.jsonl.gz"), "wb") as f:
    f.write(data)
with open(os.path.join(CHAT, "conversations.jsonl.zst"), "wb") as f:
    f.write(zstandard.ZstdCompressor(level=19).compress(data))
speaker = {"user": "human", "assistant": "gpt", "system": "system", "tool": "tool"}
with open(os.path.join(CHAT, "sharegpt.jsonl"), "w", encoding="utf-8") as f:
    for line in data.decode("utf-8").splitlines()[:4]:
        messages = json.loads(line)["messages"]
        row = {"conversations": [{"from": speaker[m["role"]], "value": m["content"]} for m in messages]}
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
