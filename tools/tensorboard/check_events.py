"""Reads a run's TensorBoard event files with TensorBoard's own EventAccumulator and checks them against the run's
metrics JSONL: every step line's loss, grad_norm, lr and tok_s, and every eval_loss, at its step (as 32-bit floats),
and nothing else at a step of those tags (a resumed run's files hold each step once).

    python3 -m venv /tmp/tb && /tmp/tb/bin/pip install tensorboard
    /tmp/tb/bin/python tools/tensorboard/check_events.py RUN_DIR/tensorboard RUN_DIR/metrics.jsonl

Prints the tags and how many points each has; exits 1 naming the first difference.
"""
import json
import math
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

logdir, metrics = sys.argv[1], sys.argv[2]
acc = EventAccumulator(logdir, size_guidance={"scalars": 0})  # 0: keep every point
acc.Reload()
tags = acc.Tags()["scalars"]
for tag in sorted(tags):
    print(f"{tag}: {len(acc.Scalars(tag))} points")

expected = {}  # tag -> {step: value}
for line in open(metrics):
    record = json.loads(line)
    if "step" not in record:
        continue
    for key in ("loss", "grad_norm", "lr", "tok_s"):
        if record.get(key) is not None:
            expected.setdefault("train/" + key, {})[record["step"]] = record[key]
    if record.get("eval_loss") is not None:
        expected.setdefault("eval/loss", {})[record["step"]] = record["eval_loss"]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


failed = False
for tag, points in expected.items():
    if tag not in tags:
        print(f"missing tag {tag}")
        failed = True
        continue
    got = {}
    for e in acc.Scalars(tag):
        if e.step in got:
            print(f"{tag}: step {e.step} twice")
            failed = True
        got[e.step] = e.value
    if sorted(got) != sorted(points):
        print(f"{tag}: steps {sorted(got)} in the event files, {sorted(points)} in {metrics}")
        failed = True
        continue
    for step, value in points.items():
        want = f32(value)
        if not (got[step] == want or (math.isnan(want) and math.isnan(got[step]))):
            print(f"{tag} at step {step}: {got[step]} in the event files, {want} in {metrics}")
            failed = True
if failed:
    sys.exit(1)
print(f"ok: {sum(len(p) for p in expected.values())} values of {len(expected)} tags match {metrics}")
