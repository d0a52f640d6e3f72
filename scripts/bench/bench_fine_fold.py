"""The agent's fine tiles from chunks: numpy's fold of decoded columns against the builtins'
fold of row tuples (the way a host without numpy still goes), in one run (issue 30, item 4).

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_fine_fold.py [--runs 8] [--steps 20000]

A store of --runs runs x --steps steps x 5 keys (written through the writer's RollupWriter,
one transaction per 100 steps, sealed), then every fine tile of level -3 (8-step buckets) of
every series read through envelope.packed_fine, as the agent serves a training page's first
view in the fine range: best of --repeat, process CPU, ns a point.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from reslog.agent.wire import BUCKET_ROW  # noqa: E402
from schema.store import buckets, chunk_read, envelope  # noqa: E402
from schema.store.connect import open_store  # noqa: E402
from schema.store.rollup_writer import RollupWriter  # noqa: E402
from tests.fixtures.stores import key_id, make_run  # noqa: E402

KEYS = ("loss", "lr", "grad_norm", "tokens_per_s", "mfu")


def build(path: Path, runs: int, steps: int) -> list[tuple[int, int]]:
    engine = open_store(path, create=True)
    ids = [key_id(engine, k) for k in KEYS]
    series = []
    for r in range(runs):
        run = make_run(engine, name=f"r{r}")
        writer = RollupWriter(engine.dialect, run.id)
        for a in range(0, steps, 100):
            st = list(range(a, min(steps, a + 100)))
            wa = [1.7e9 + 0.3 * s for s in st]
            cols = {
                k: [math.sin(s / 300 + j) + 1e-3 * (s % 7) for s in st] for j, k in enumerate(ids)
            }
            rows = [
                (run.id, k, s, w, v)
                for k, vs in cols.items()
                for s, w, v in zip(st, wa, vs, strict=True)
            ]
            with engine.begin() as conn:
                pending = writer.insert(conn, rows, [(st, wa, cols)])
            writer.accept(pending)
        with engine.begin() as conn:
            writer.seal_all(conn, alone=True)
        writer.accept(None)
        series += [(run.id, k) for k in ids]
    engine.dispose()
    return series


def tiles(path: Path, series: list, steps: int, numpy: bool) -> tuple[float, int]:
    level = -3
    count = steps // buckets.tile_range(level, 0)[1] + 1
    engine = open_store(path, readonly=True)
    saved = chunk_read.numpy_modules
    if not numpy:
        chunk_read.numpy_modules = lambda: (None, None)  # type: ignore[assignment]
    try:
        with engine.connect() as conn:
            cur = conn.connection.dbapi_connection.cursor()
            t = time.process_time()
            size = 0
            for run_id, kid in series:
                for index in range(count):
                    lo = index * buckets.TILE_BUCKETS
                    size += len(
                        envelope.packed_fine(
                            chunk_read.Series(cur, "?", run_id, kid, False),
                            level,
                            lo,
                            lo + buckets.TILE_BUCKETS - 1,
                            BUCKET_ROW,
                        )
                    )
            took = time.process_time() - t
    finally:
        chunk_read.numpy_modules = saved  # type: ignore[assignment]
        engine.dispose()
    return took, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="bench-fold-") as tmp:
        path = Path(tmp) / "fold.db"
        series = build(path, args.runs, args.steps)
        points = len(series) * args.steps
        best = {"builtins": math.inf, "numpy": math.inf}
        sizes = {}
        for _ in range(args.repeat):
            for name in best:
                took, size = tiles(path, series, args.steps, name == "numpy")
                best[name] = min(best[name], took)
                sizes[name] = size
        assert sizes["builtins"] == sizes["numpy"], sizes
    print(f"\n{len(series)} series x {args.steps:,} steps = {points:,} points, level -3 tiles")
    print("| fold | CPU s | ns a point |")
    print("| --- | ---: | ---: |")
    for name, took in best.items():
        print(f"| {name} | {took:.3f} | {took / points * 1e9:,.0f} |")
    print(f"numpy / builtins: {best['builtins'] / best['numpy']:.1f}x quicker")
    return 0


if __name__ == "__main__":
    sys.exit(main())
