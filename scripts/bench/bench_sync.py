"""`resplot sync` throughput: a full first copy, an idle re-sync and an incremental one, against
copying the store file whole with SQLite's backup API (the baseline: what `cp` of a consistent
snapshot costs, without rollups rebuilt and without being incremental).

    .venv/bin/python scripts/bench/bench_sync.py [--points 100000] [--keys 5] [--runs 2]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from resplot.sources.spec import parse_spec
from resplot.sync import Mirror
from schema.store import open_store
from tests.fixtures.sshd import bulk_store
from tests.fixtures.stores import add_points


def backup(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000, help="per series")
    ap.add_argument("--keys", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    src = work / "src.db"
    total = bulk_store(src, runs=args.runs, keys=args.keys, points=args.points)
    rows = []

    t0 = time.perf_counter()
    backup(src, work / "copy.db")
    base = time.perf_counter() - t0
    rows.append(("backup API copy of the file (baseline)", total, base))

    t0 = time.perf_counter()
    with Mirror(work / "mirror.db") as m:
        first = m.sync(parse_spec(str(src)))
    rows.append(("resplot sync, first (full) copy", first.points, time.perf_counter() - t0))

    t0 = time.perf_counter()
    with Mirror(work / "mirror.db") as m:
        idle = m.sync(parse_spec(str(src)))
    rows.append(("resplot sync, nothing new", idle.points, time.perf_counter() - t0))

    engine = open_store(src)
    new = max(1, total // 100)
    add_points(engine, 1, {"train/k0": [(args.points + s, 0.5) for s in range(new)]})
    engine.dispose()
    t0 = time.perf_counter()
    with Mirror(work / "mirror.db") as m:
        more = m.sync(parse_spec(str(src)))
    rows.append(("resplot sync, 1% new points", more.points, time.perf_counter() - t0))

    t0 = time.perf_counter()
    backup(src, work / "copy2.db")
    rows.append(("backup API copy again (baseline)", total + new, time.perf_counter() - t0))

    print(f"{total:,} points ({args.runs} runs x {args.keys} keys x {args.points:,}); "
          f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    print("| what | points copied | seconds | points/s | x baseline time |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for what, n, s in rows:
        print(f"| {what} | {n:,} | {s:.3f} | {n / s:,.0f} | {s / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
