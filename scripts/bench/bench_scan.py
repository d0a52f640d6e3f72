"""`reslog.open().scan()` of one key: DataFrames from decoded chunk columns (today's path,
StoreReader.scan(columns=True)) against DataFrames built from the row tuples of StoreReader.scan
(the path before issue 30 item 4), measured in the same run on the same store.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_scan.py [--steps 100000] [--keys 10]
        [--repeats 7]

The store: one run written through reslog, `--keys` keys logged together every step (one
keyset: a reader of one key reads the group's chunks' directories and only its own streams),
random values. Printed: process CPU ns a point for each path, `--repeats` repeats each, best
and median, the ratio, and the page faults of each columns path call (fresh memory touched
first); the two paths' frames are checked equal first. Process CPU time
still moves with the machine's load (caches, memory bandwidth shared with other processes):
compare the two paths of one run, and quote best and median. The code before a change is
measured by running its own copy of this script (`git archive REV`, PYTHONPATH on it) right
before or after this one, alternated (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd

import reslog
from schema.store import chunk_codec, chunk_layout

TARGET_NS = 100  # issue 30: scan() of a 100k-point key <= 100 ns a point


def rows_path(st, run_id: int, key_id: int, key: str) -> pd.DataFrame:
    frames = []
    for chunk in st._store.scan(run_id, key_id, None, None, 100_000):
        steps, walls, values = zip(*chunk, strict=True)
        frames.append(
            pd.DataFrame(
                {
                    "key": pd.Series([key] * len(chunk), dtype=object),
                    "step": pd.Series(steps, dtype="int64"),
                    "wall": pd.Series(walls, dtype="float64"),
                    "value": pd.Series(values, dtype="float64"),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def columns_path(st, key: str) -> pd.DataFrame:
    return pd.concat(list(st.scan("scan", key)), ignore_index=True)


def cpu(fn) -> tuple[float, int]:
    """Process CPU seconds of fn() and the minor page faults it took (new memory's first
    touch: ~4 us each on this VM, the largest cost a scan's fresh columns have here)."""
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = time.process_time()
    fn()
    took = time.process_time() - t
    return took, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    path = Path(tempfile.mkdtemp()) / "scan.db"
    run = reslog.init(project="bench", name="scan", store=path, system=False)
    rng = random.Random(0)
    for s in range(args.steps):
        run.log({f"train/k{j}": rng.random() for j in range(args.keys)}, step=s)
    assert run.finish(timeout=600)
    key = "train/k0"
    with reslog.open(path) as st:
        run_id, key_ids = st._series("scan", key)
        with st._engine.connect() as conn:
            chunks = conn.exec_driver_sql("SELECT n, data FROM chunks").all()
        versions = sorted({chunk_codec.describe(blob)["version"] for _n, blob in chunks})
        want = rows_path(st, run_id, key_ids[key], key)
        got = columns_path(st, key)
        pd.testing.assert_frame_equal(got, want)
        n = len(got)
        print(
            f"scan() of {key}: {n:,} points ({args.keys} keys a keyset, {len(chunks)} chunks,"
            f" format version {'/'.join(map(str, versions))}; inflating with"
            f" {chunk_layout._reading_zlib.__name__});"
            " load average"
            f" {os.getloadavg()[0]:.1f} at the start"
        )
        print("| repeat | rows path ns/pt | columns path ns/pt | ratio | page faults |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        olds, news = [], []
        for rep in range(args.repeats):
            old, _ = cpu(lambda: rows_path(st, run_id, key_ids[key], key))
            new, faults = cpu(lambda: columns_path(st, key))
            old, new = old / n * 1e9, new / n * 1e9
            olds.append(old)
            news.append(new)
            print(f"| {rep + 1} | {old:,.0f} | {new:,.0f} | {old / new:.1f}x | {faults:,} |")
        best_old, best_new = min(olds), min(news)
        med_old, med_new = statistics.median(olds), statistics.median(news)
        print(f"| best | {best_old:,.0f} | {best_new:,.0f} | {best_old / best_new:.1f}x | |")
        print(f"| median | {med_old:,.0f} | {med_new:,.0f} | {med_old / med_new:.1f}x | |")
        verdict = "met" if med_new <= TARGET_NS else "not met"
        if verdict != "met" and best_new <= TARGET_NS:
            verdict = "met by the best repeat only"
        print(
            f"target <= {TARGET_NS} ns a point: best {best_new:.0f}, median {med_new:.0f}"
            f" ({verdict}); load average {os.getloadavg()[0]:.1f} at the end"
        )


if __name__ == "__main__":
    main()
