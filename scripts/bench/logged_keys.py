"""The key names reslog and the trainer write, for benchmarks that log as they do.

The GPU fields come from reslog's own sampler (reslog/training/system.py), so a benchmark
measures the keys reslog really writes; a benchmark that adds fields of another tracker names
them itself, after these. The trainer builds its metrics inline (trainer/train.py), so its
names are written here once.
"""

from __future__ import annotations

from reslog.training.system import GPU_FIELDS

# sys/gpu{i}/<suffix>, in the order reslog's sampler reads them
GPU_SUFFIXES = tuple(s for _, suffixes in GPU_FIELDS.values() for s in suffixes)
# what trainer/train.py logs every step besides its time/* keys (mfu on a GPU only)
TRAIN_STEP = (
    "train/loss",
    "train/lr",
    "train/grad_norm",
    "train/tokens",
    "train/tokens_per_s",
    "train/mfu",
)
# what it logs at each evaluation
VALID = ("valid/loss", "valid/ppl")
