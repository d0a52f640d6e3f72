"""The store issue's workload written through the store, for the code before and this tree in
one run (issue 30): bytes a point, writer CPU a point, and reading one key back.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py                    # 100k steps
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py --steps 20000 --before b57fe1f
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py --postgres         # both backends

The workload is scripts/bench/bench_codec.py's (1 run: 20 training keys every step at 0.3 s a
step, and 12 NVML fields x 8 GPUs every second, values as real loops produce them). It is
written the way reslog's writer writes it: one transaction a second of training (the writer's
flush interval), holding that second's training rows as one logging group and its NVML sample
as another, through schema.rollup_writer.RollupWriter (rollups folded in, as always); then the
run is finished (this tree seals its head chunks there). Each variant runs in a fresh process
with its own tree on sys.path: "before" is `git archive` of --before.

Printed per variant and backend: bytes a point (SQLite: the file after a checkpoint; PostgreSQL:
pg_total_relation_size of every table), the GB a 3-week 8-GPU host run would take (199M points
of this mix), writer CPU a point (process time of the inserts, rollups included), and reading
`train/loss` back: `reslog.open().scan()` (DataFrames) and `StoreReader.scan`'s rows, ns a point.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from trees import tree_of

ROOT = Path(__file__).resolve().parents[2]
HOST_RUN_POINTS = 199_000_000  # a 3-week 8-GPU host run of this mix (the table)

CHILD = r"""
import json, os, sys, time
bench_dir, store, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(1, bench_dir)
import numpy as np
import bench_codec
import reslog
from schema.rollup_writer import RollupWriter
from schema.store import open_store
from schema.writes import resolve_keys

rng = np.random.default_rng(1)
t_steps, t_walls, t_keys = bench_codec.training(steps, rng)
n_steps, n_walls, n_keys = bench_codec.nvml(steps, rng)
points = steps * len(t_keys) + len(n_steps) * len(n_keys)
run = reslog.init("bench", name="store", store=store, system=False)
run_id = run._writer.run_id
run.finish()
engine = open_store(store)
with engine.begin() as conn:
    ids = resolve_keys(conn, [*t_keys, *n_keys])
t_cols = {ids[k]: v.tolist() for k, v in t_keys.items()}
n_cols = {ids[k]: v.tolist() for k, v in n_keys.items()}
t_steps, t_walls = t_steps.tolist(), t_walls.tolist()
n_steps, n_walls = n_steps.tolist(), n_walls.tolist()
writer = RollupWriter(engine.dialect, run_id)

def group(steps, walls, cols, a, b):
    if a == b:
        return None
    return (steps[a:b], walls[a:b], {k: v[a:b] for k, v in cols.items()})

ti = ni = 0
t0 = t_walls[0]
cpu = 0.0
second = 1
while ti < len(t_steps) or ni < len(n_steps):
    edge = t0 + second
    tj = ti
    while tj < len(t_steps) and t_walls[tj] < edge:
        tj += 1
    nj = ni
    while nj < len(n_steps) and n_walls[nj] < edge:
        nj += 1
    groups = [g for g in (group(t_steps, t_walls, t_cols, ti, tj),
                          group(n_steps, n_walls, n_cols, ni, nj)) if g]
    ti, ni, second = tj, nj, second + 1
    if not groups:
        continue
    rows = [(run_id, k, s, w, v) for st, wa, cols in groups for k, vs in cols.items()
            for s, w, v in zip(st, wa, vs)]
    c = time.process_time()
    with engine.begin() as conn:
        pending = writer.insert(conn, rows, groups)
    writer.accept(pending)
    cpu += time.process_time() - c
c = time.process_time()
if hasattr(writer, "seal_all"):
    with engine.begin() as conn:
        writer.seal_all(conn, alone=True)
    writer.accept(None)
cpu += time.process_time() - c
if engine.dialect.name == "sqlite":
    import sqlite3
    engine.dispose()
    db = sqlite3.connect(store)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    size = os.path.getsize(store)
else:
    total = (
        "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
    )
    with engine.connect() as conn:
        size = conn.exec_driver_sql(total).scalar()
    # What stays once (auto)vacuum has taken the dead rows: sealed heads, updated rollups.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM FULL")
        vacuumed = conn.exec_driver_sql(total).scalar()
    engine.dispose()

from schema.store_reader import StoreReader
reader = reslog.open(store)
list(reader.scan("store", "train/lr"))
best = []
for _ in range(3):
    t = time.perf_counter()
    got = sum(len(f) for f in reader.scan("store", "train/loss"))
    best.append(time.perf_counter() - t)
assert got == steps, (got, steps)
engine = open_store(store, readonly=True)
sr = StoreReader(engine, store=str(store))
row_id, _ = sr.find("store")
key_id = ids["train/loss"]
rows_best = []
for _ in range(3):
    t = time.perf_counter()
    n = sum(len(b) for b in sr.scan(row_id, key_id))
    rows_best.append(time.perf_counter() - t)
if engine.dialect.name == "sqlite":
    vacuumed = size
print(json.dumps({"points": points, "bytes": int(size), "vacuumed": int(vacuumed), "cpu_s": cpu,
                  "scan_s": min(best), "rows_s": min(rows_best), "key_points": steps}))
"""


def measure(tree: Path, store: str, steps: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "scripts" / "bench"), store, str(steps)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--before", default="b57fe1f", help="git revision of the code before")
    ap.add_argument("--postgres", action="store_true", help="also into a PostgreSQL on loopback")
    ap.add_argument("--variants", default="before,after", help="which trees to run")
    ap.add_argument("--backends", default="SQLite,PostgreSQL", help="which backends to run")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    print(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    results = []
    server = None
    if args.postgres:
        from bench_pg_writers import fresh_database

        from tests.fixtures.postgres import postgres_server

        server = postgres_server()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
            before = tree_of(args.before, Path(tmp) / "before")
            for name, tree in (("before", before), ("after", ROOT)):
                if name not in args.variants.split(","):
                    continue
                stores = [("SQLite", str(Path(tmp) / f"{name}.db"))]
                if server is not None:
                    stores.append(("PostgreSQL", fresh_database(server.url)))
                for backend, store in stores:
                    if backend not in args.backends.split(","):
                        continue
                    r = measure(tree, store, args.steps)
                    r.update(variant=name, backend=backend)
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    results.append(r)
    finally:
        if server is not None:
            server.remove()
    n = results[0]["points"]
    print(f"\n{args.steps:,} steps: {n:,} points; before = {args.before}")
    print(
        "| variant | backend | bytes a point | after VACUUM FULL | 3-week host run GB "
        "| writer CPU ns a point | scan() ns a point | rows ns a point |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        bpp = r["bytes"] / r["points"]
        vac = r["vacuumed"] / r["points"]
        print(
            f"| {r['variant']} | {r['backend']} | {bpp:.2f} | {vac:.2f} | "
            f"{min(bpp, vac) * HOST_RUN_POINTS / 1e9:.2f} | "
            f"{r['cpu_s'] / r['points'] * 1e9:,.0f} | {r['scan_s'] / r['key_points'] * 1e9:,.0f} | "
            f"{r['rows_s'] / r['key_points'] * 1e9:,.0f} |"
        )
    by = {(r["variant"], r["backend"]): r for r in results}
    for backend in ("SQLite", "PostgreSQL"):
        b, a = by.get(("before", backend)), by.get(("after", backend))
        if a and b:
            print(
                f"{backend}: bytes {b['bytes'] / a['bytes']:.1f}x smaller, writer CPU "
                f"{a['cpu_s'] / b['cpu_s']:.2f}x, scan() {b['scan_s'] / a['scan_s']:.1f}x quicker"
            )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
