"""Writes tests/assets/store_0004.db: a store as reslog wrote it at schema revision 0004, whose
rollups were cut into 64-step first-level buckets (4x between levels). Run with the code of that
revision (commit 6e2ea10, `git worktree add /tmp/r4 6e2ea10`), from its root:

    python /path/to/tests/assets/make_store_0004.py OUT.db

tests/schema/test_rollup_widths.py upgrades a copy and checks that the rollups are rebuilt at
today's widths from the points, which the upgrade leaves as they were.
"""

from __future__ import annotations

import math
import sqlite3
import sys

import reslog

out = sys.argv[1]
# Every 32nd step up to 17,568: at 64-step buckets the series spans 64 level-2 buckets, so the
# old store keeps two levels; NaN, +inf and a spike in the loss; an integer flags key.
first = reslog.init(project="old", name="before-0005", store=out, system=False, config={"lr": 3e-4})
for i in range(550):
    step = 32 * i
    loss = 4.0 * math.exp(-i / 200) + 0.01 * (i % 7)
    loss = {150: float("nan"), 151: float("inf"), 350: 50.0}.get(i, loss)
    metrics = {"train/loss": loss, "train/lr": 3e-4}
    if i % 4 == 0:
        metrics["sys/gpu0/throttle"] = float(1 << (i % 5))
    first.log(metrics, step=step)
first.finish()
# Resumed from an older checkpoint: the loss series starts over at step 12,000 (a take).
again = reslog.init(project="old", store=out, system=False, resume=first.uid)
for step in range(12_000, 14_000, 32):
    again.log({"train/loss": 1.0 + step * 1e-5}, step=step)
again.finish()
# A plain file for the repository: no WAL beside it.
with sqlite3.connect(out) as conn:
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
