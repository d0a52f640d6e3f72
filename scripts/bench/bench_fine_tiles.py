"""The agent's fine tiles of a training page: what the host does for a first view in the fine range.

    .venv/bin/python scripts/bench/bench_fine_tiles.py [--store PATH] [--repeat 7]
        [--workers 0,1]

The store is scale.py's 6.8M (8 runs x 20,000 steps, built through reslog's public API by
scale_store.py when missing). Timed: the agent's `Store._tiles` over the tiles a 1,400-pixel
window's training page asks for (5 keys x 8 runs, level -3: buckets of 8 steps, folded from
every raw point: 0.8M), in one read transaction, with 0 and 1 forked worker processes; median
and best of `--repeat`, the two ways alternated in one process:

  baseline   every fine bucket through fold() and packed from its aggregate, with Python's
             cyclic GC on during the reads (the code before pack_folded and tile_workers'
             gc.disable: both patched back in here)
  this tree  pack_folded (equal chunks folded column-wise) with the GC off during the reads
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "train/mfu")
LEVEL = -3  # what a training-page chart of a 1,400-pixel window asks for at 20,000 steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--store", type=Path, default=Path(tempfile.gettempdir()) / "reslog-scale" / "6.8M.db"
    )
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--workers", default="0,1")
    args = p.parse_args()
    import os

    import scale_store

    from reslog.agent import store as agent_store
    from reslog.agent import tile_workers
    from schema.store import envelope, folding, points_by_id

    scale_store.build(args.store, 8, 20_000)
    st = agent_store.Store(str(args.store))
    conn = st._connect()
    cur = conn.cursor()
    ids = dict(cur.execute("SELECT name, id FROM keys").fetchall())
    runs = [r for (r,) in cur.execute("SELECT id FROM runs ORDER BY id")]
    ranges = [[run, ids[key], LEVEL, 0, 3] for run in runs for key in KEYS]
    points = sum(points_by_id.point_count(cur, "?", run, ids[key]) for run in runs for key in KEYS)

    ways = {
        "baseline": (
            lambda rows, start, width, row: folding.pack_each(
                folding.fold_each(rows, start, width), row
            ),
            tile_workers._read_all,
        ),
        "this tree": (envelope.pack_folded, tile_workers.read_all),
    }
    timed: dict[tuple[str, int], list[float]] = {}
    for workers in [int(w) for w in args.workers.split(",")]:
        os.environ["RESLOG_AGENT_WORKERS"] = str(workers)
        for _ in range(args.repeat):
            for name, (pack, read_all) in ways.items():
                envelope.pack_folded, tile_workers.read_all = pack, read_all
                gc.collect()
                cur.execute("BEGIN")
                high = agent_store._high(cur)
                t0 = time.perf_counter()
                st._tiles(cur, ranges, agent_store.Sections(), high)
                timed.setdefault((name, workers), []).append(time.perf_counter() - t0)
                cur.execute("COMMIT")
    conn.close()
    print(
        f"{len(ranges)} series, {points:,} raw points, level {LEVEL}; median (best) of "
        f"{args.repeat}"
    )
    print("| workers | baseline | this tree | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for workers in [int(w) for w in args.workers.split(",")]:
        a, b = timed[("baseline", workers)], timed[("this tree", workers)]
        print(
            f"| {workers} | {statistics.median(a) * 1e3:.0f} ms ({min(a) * 1e3:.0f}) | "
            f"{statistics.median(b) * 1e3:.0f} ms ({min(b) * 1e3:.0f}) | "
            f"{statistics.median(a) / statistics.median(b):.2f}x |"
        )


if __name__ == "__main__":
    main()
