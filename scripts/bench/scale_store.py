"""The store scripts/bench/scale.py measures: one week of 8-GPU pretraining, written through
reslog's public API (reslog.init / run.log / run.finish), with every point checked stored.

    .venv/bin/python scripts/bench/scale_store.py /tmp/reslog-scale/34M.db --steps 100000

Shape (issue 8): `runs` runs × `steps` steps; 20 metric keys every step and 90 GPU/host keys
(8 GPUs × 10 NVML fields + 10 host fields) every 4th step, as the system sampler would log
them; a sparse valid/loss every 1000 steps. Run r's train/loss has a one-step spike to 50 at
SPIKE + 1000 r and a one-step dip to -1 at DIP + r (for 100,000 steps; proportionally for
other lengths). Two processes log at once (the machine's
two cores), four runs each. A marker file beside the store records the shape once complete;
a rerun with the same shape reuses it.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from logged_keys import GPU_SUFFIXES, TRAIN_STEP  # noqa: E402 (the bench folder is on the path)

TRAIN = [
    *TRAIN_STEP,
    "time/step",
    "time/data",
    "time/forward",
    "time/backward",
    "time/optimizer",
    "train/loss_scale",
    "train/clip_frac",
    "train/param_norm",
    "train/update_ratio",
    "train/lm_loss",
    "train/z_loss",
    "train/seq_len",
    "train/batch_tokens",
    "train/epoch",
]
# reslog's GPU fields and one more (the memory clock), 10 a GPU as issue 8's shape has them
GPU_FIELDS = [*GPU_SUFFIXES, "mem_clock_mhz"]
HOST = [
    "sys/cpu_pct",
    "sys/ram_pct",
    "sys/ram_used_gib",
    "sys/disk_read_mb_s",
    "sys/disk_write_mb_s",
    "sys/net_recv_mb_s",
    "sys/net_sent_mb_s",
    "sys/load1",
    "sys/proc_rss_gib",
    "sys/proc_threads",
]
SYSTEM = [f"sys/gpu{g}/{f}" for g in range(8) for f in GPU_FIELDS] + HOST
SPIKE, DIP = 31_337, 71_717
BACKLOG = 400_000  # points the writer may be behind before the loop waits for it


def points_of(runs: int, steps: int) -> int:
    return runs * (steps * len(TRAIN) + ((steps + 3) // 4) * len(SYSTEM) + (steps + 999) // 1000)


def log_run(store: str, r: int, steps: int) -> int:
    import reslog

    rng = random.Random(r)
    run = reslog.init(
        project="scale",
        name=f"run{r}",
        store=store,
        system=False,
        config={"lr": 3e-4 * (1 + r), "seed": r},
    )
    writer = run._writer  # the backlog, so the loop never outruns the bounded buffer
    spike = SPIKE * steps // 100_000 + r * (steps // 100)
    dip = DIP * steps // 100_000 + r
    n = 0
    for s in range(steps):
        loss = 2.0 + 3.0 * math.exp(-s / 20_000) + 0.02 * rng.random()
        if s == spike:
            loss = 50.0
        elif s == dip:
            loss = -1.0
        m = {name: 0.5 + 0.001 * (s % 997) for name in TRAIN}
        m["train/loss"] = loss
        m["train/lr"] = 3e-4 * min(1.0, s / 2000)
        m["train/tokens"] = float(s * 524_288)
        m["time/step"] = 0.4 + 0.01 * rng.random()
        if s % 4 == 0:
            for g in range(8):
                m[f"sys/gpu{g}/util"] = 97.0 + rng.random()
                m[f"sys/gpu{g}/temp_c"] = 70.0 + (s % 400) / 40
                m[f"sys/gpu{g}/throttle"] = 4.0 if s % 5000 < 20 else 0.0
                for f in GPU_FIELDS[1:]:
                    m.setdefault(f"sys/gpu{g}/{f}", 100.0 + g)
            for h in HOST:
                m[h] = 10.0
        if s % 1000 == 0:
            m["valid/loss"] = loss
        run.log(m, step=s)
        n += len(m)
        if s % 256 == 0:
            while writer.pending_points() > BACKLOG:
                time.sleep(0.005)
    if not run.finish(timeout=600):
        raise SystemExit(f"run{r}: finish gave up")
    return n


def _worker(store: str, rs: list[int], steps: int, out) -> None:
    out.put(sum(log_run(store, r, steps) for r in rs))


def made_by() -> dict[str, str]:
    """What a built store depends on besides its shape: one built with other bucket widths
    holds other rollups, one of another schema revision would be refused. A marker that
    differs makes the store be built again."""
    from schema.store import buckets
    from schema.store.revision import HEAD_REVISION

    return {"widths": f"{buckets.FIRST_SHIFT}/{buckets.LEVEL_SHIFT}", "schema": HEAD_REVISION}


def cached(path: Path, shape: dict, make: Callable[[Path], None]) -> None:
    """`make(path)`, unless the marker beside `path` says a store of this `shape` (and of this
    made_by()) is complete there: a benchmark's store, built once."""
    marker = path.with_name(path.name + ".built.json")
    want = {**shape, **made_by()}
    if path.exists() and marker.exists() and json.loads(marker.read_text()) == want:
        return
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    make(path)
    marker.write_text(json.dumps(want))


def build(path: Path, runs: int = 8, steps: int = 100_000, procs: int = 2) -> dict:
    """The store at `path` (reused when its marker says it is complete with this shape)."""
    marker = path.with_name(path.name + ".built.json")
    want = {"runs": runs, "steps": steps, "points": points_of(runs, steps), **made_by()}
    if path.exists() and marker.exists():
        done = json.loads(marker.read_text())
        if {k: done.get(k) for k in want} == want:
            return done
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    from schema.store.connect import open_store

    open_store(str(path), create=True).dispose()  # the schema, before two writers race for it
    t0 = time.perf_counter()
    queue: multiprocessing.Queue = multiprocessing.Queue()
    workers = [
        multiprocessing.Process(
            target=_worker, args=(str(path), list(range(i, runs, procs)), steps, queue)
        )
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    logged = sum(queue.get() for _ in workers)
    for w in workers:
        w.join()
        if w.exitcode:
            raise SystemExit(f"a logging process failed ({w.exitcode})")
    seconds = time.perf_counter() - t0
    import sqlite3

    from schema.store.sqlite_file import readonly_uri

    con = sqlite3.connect(readonly_uri(path), uri=True)
    from schema.store import points_by_id

    stored = points_by_id.point_count(con.cursor(), "?")
    con.close()
    if stored != logged or logged != want["points"]:
        raise SystemExit(f"{path}: logged {logged:,}, stored {stored:,}, wanted {want['points']:,}")
    done = {**want, "seconds": round(seconds, 1), "bytes": path.stat().st_size}
    marker.write_text(json.dumps(done))
    return done


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=Path)
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--steps", type=int, default=100_000)
    args = p.parse_args()
    done = build(args.path, args.runs, args.steps)
    print(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
