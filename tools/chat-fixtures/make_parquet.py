"""Writes the Parquet fixtures of src/test/resources/parquet with pyarrow, and what pyarrow reads back from each
(NAME.expected.jsonl, one row a line, as Table.to_pylist gives it); dev tool, `pip install pyarrow`.

conversations-{snappy,zstd}.parquet: the conversations of chat/conversations.jsonl (messages as a list of structs,
tools dropped: pyarrow would union their schemas), in row groups of 2 rows, dictionary-encoded strings, data pages v1.
columns-{snappy,zstd,v2}.parquet: flat columns (text, prompt, completion, a nullable string, int64, double, bool).
"""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "src", "test", "resources")
OUT = os.path.join(ROOT, "parquet")


def write(table, name, **kwargs):
    path = os.path.join(OUT, name + ".parquet")
    pq.write_table(table, path, **kwargs)
    rows = pq.read_table(path).to_pylist()
    with open(os.path.join(OUT, name + ".expected.jsonl"), "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


conversations = []
for line in open(os.path.join(ROOT, "chat", "conversations.jsonl"), encoding="utf-8"):
    record = json.loads(line)
    conversations.append({"messages": [{"role": m["role"], "content": m["content"]} for m in record["messages"]]})
table = pa.Table.from_pylist(conversations)
for codec in ("snappy", "zstd"):
    write(table, "conversations-" + codec, compression=codec, row_group_size=2)

rows = []
for i in range(300):
    rows.append({"text": "row %d %s" % (i, "é" * (i % 5)), "prompt": "Q%d?" % (i % 7), "completion": " A%d." % i,
                 "note": None if i % 3 == 0 else "n%d" % (i % 4), "n": i * 1000003, "x": i / 8.0, "flag": i % 2 == 0})
flat = pa.Table.from_pylist(rows)
write(flat, "columns-snappy", compression="snappy", row_group_size=128)
write(flat, "columns-zstd", compression="zstd", row_group_size=128, use_dictionary=False)
write(flat, "columns-v2", compression="zstd", row_group_size=100, data_page_version="2.0")
