"""`reslog.open().scan()` of one key: DataFrames from decoded chunk columns (today's path,
StoreReader.scan_columns) against DataFrames built from the row tuples of StoreReader.scan
(the path before issue 30 item 4), measured in the same run on the same store.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_scan.py [--steps 100000] [--keys 10]

The store: one run written through reslog, `--keys` keys logged together every step (one
keyset: a reader of one key reads the group's chunks and inflates only its column), random
values. Printed: process CPU ns a point for each path, three repeats, and the ratio; the two
paths' frames are checked equal first.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import pandas as pd

import reslog


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=10)
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
        want = rows_path(st, run_id, key_ids[key], key)
        got = pd.concat(list(st.scan("scan", key)), ignore_index=True)
        pd.testing.assert_frame_equal(got, want)
        print(f"scan() of {key}: {len(got):,} points ({args.keys} keys a keyset)")
        print("| repeat | rows path ns/pt | columns path ns/pt | ratio |")
        print("| ---: | ---: | ---: | ---: |")
        for rep in range(3):
            t = time.process_time()
            rows_path(st, run_id, key_ids[key], key)
            old = time.process_time() - t
            t = time.process_time()
            pd.concat(list(st.scan("scan", key)), ignore_index=True)
            new = time.process_time() - t
            n = len(got)
            print(f"| {rep + 1} | {old / n * 1e9:,.0f} | {new / n * 1e9:,.0f} | {old / new:.1f}x |")


if __name__ == "__main__":
    main()
