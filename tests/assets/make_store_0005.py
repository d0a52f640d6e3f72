"""Writes tests/assets/store_0005.db: a store as reslog wrote it at schema revision 0005, the last
one keeping a `points` row a point. Run with the code of that revision (commit b57fe1f:
`git archive b57fe1f | tar -x -C /tmp/r5`), from its root:

    PYTHONPATH=/tmp/r5 python /path/to/tests/assets/make_store_0005.py OUT.db

Three runs: several keys logged together and apart, NaN, ±inf and -0.0 values (the rows keep
NaN as NULL and give -0.0 back as 0.0), a run resumed from an older checkpoint (a take),
events; 3,840 points in 290 KB. tests/schema/test_store_0005.py upgrades a copy to
chunks and checks that every point comes out as it went in.
"""

from __future__ import annotations

import math
import sqlite3
import sys

import reslog

out = sys.argv[1]
NAN, INF = float("nan"), float("inf")
first = reslog.init(project="old", name="rows-a", store=out, system=False, config={"lr": 3e-4})
for step in range(0, 2_000):
    metrics = {"train/loss": 4.0 * math.exp(-step / 400) + 0.001 * (step % 13)}
    if step % 10 == 0:
        metrics["train/lr"] = 3e-4 * min(1.0, step / 500)
        metrics["train/grad_norm"] = {100: NAN, 110: INF, 120: -INF, 130: -0.0}.get(step, 0.25)
    if step % 50 == 0:
        metrics["sys/gpu0/power_w"] = 250.0 + (step % 7) * 0.1
    first.log(metrics, step=step)
    if step == 1_200:
        first.event("checkpoint", "step 1200", body="ckpt/1200.pt")
first.alert("loss spike", text="grad_norm was inf at step 110")
first.finish()
# Resumed from the checkpoint at step 1,200: the loss series starts over there (a take).
again = reslog.init(project="old", store=out, system=False, resume=first.uid)
for step in range(1_200, 1_500):
    again.log({"train/loss": 1.0 + step * 1e-4, "train/lr": NAN}, step=step)
again.event("note", "resumed from step 1200")
again.finish()
other = reslog.init(project="old", name="rows-b", store=out, system=False)
for step in range(0, 300):
    other.log(
        {"eval/ppl": 30.0 - step * 0.05, "eval/acc": -0.0 if step == 0 else step / 300},
        step=step * 5,
    )
other.finish()
third = reslog.init(project="other", name="rows-c", store=out, system=False)
for step in range(100):
    third.log({"x": float(step) if step % 3 else -float(step), "y": 2.0**-1074}, step=step)
third.finish()
# A plain file for the repository: no WAL beside it.
with sqlite3.connect(out) as conn:
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
