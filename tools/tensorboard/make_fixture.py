"""Writes src/test/resources/tensorboard/: event files of PyTorch's SummaryWriter for the scalars that
TensorBoardEventsTest writes with fsdp4j's writer, so that the test compares the two record by record.

    python3 -m venv /tmp/tb && /tmp/tb/bin/pip install torch tensorboard
    /tmp/tb/bin/python tools/tensorboard/make_fixture.py

fresh.tfevents: a run from step 1 (one scalar of 0.0, a negative one, a NaN among them);
resumed.tfevents: the file a run resumed after step 2 starts (SummaryWriter(purge_step=3)) and one scalar.
The scalars here and in the test must stay the same; the wall times differ and the test skips them.
"""
import glob
import math
import os
import shutil
import tempfile

from torch.utils.tensorboard import SummaryWriter

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "src", "test", "resources", "tensorboard")

# (tag, step, value): the same list as TensorBoardEventsTest.SCALARS
SCALARS = [
    ("train/loss", 1, 5.5554962158203125),
    ("train/lr", 1, 3e-3),
    ("train/grad_norm", 1, 0.0),
    ("train/loss", 2, -1.25),
    ("train/tok_s", 2, 123456.789),
    ("train/loss", 300, math.nan),
    ("eval/loss", 300, 4.5),
]


def write(name, scalars, purge_step=None):
    d = tempfile.mkdtemp()
    w = SummaryWriter(log_dir=d, purge_step=purge_step)
    for tag, step, value in scalars:
        w.add_scalar(tag, value, step)
    w.close()
    (f,) = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    shutil.copy(f, os.path.join(OUT, name))
    shutil.rmtree(d)


os.makedirs(OUT, exist_ok=True)
write("fresh.tfevents", SCALARS)
write("resumed.tfevents", [("train/loss", 3, 2.0)], purge_step=3)
print("wrote", OUT)
