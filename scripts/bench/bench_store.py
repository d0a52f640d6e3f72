"""The store issue's workload written through the store, for the code before and this tree in
one run (issue 30): bytes a point, writer CPU a point, and reading one key back.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py                    # 100k steps
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py --steps 20000 --before b57fe1f
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py --postgres         # both backends
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_store.py --steps 3000 --postgres \
        --competitors tensorboard,mlflow,trackio,wandb          # beside the other trackers

The workload is scripts/bench/bench_codec.py's (1 run: 20 training keys every step at 0.3 s a
step, and 12 NVML fields x 8 GPUs every second, values as real loops produce them). It is
written the way reslog's writer writes it: one transaction a second of training (the writer's
flush interval), holding that second's training rows as one logging group and its NVML sample
as another, through schema.store.rollup_writer.RollupWriter (rollups folded in, as always); then the
run is finished (this tree seals its head chunks there). Each variant runs in a fresh process
with its own tree on sys.path: "before" is `git archive` of --before.

Printed per variant and backend: bytes a point (SQLite: the file after a checkpoint; PostgreSQL:
pg_total_relation_size of every table), the GB a 3-week 8-GPU host run would take (199M points
of this mix), writer CPU a point (process time of the inserts, rollups included), and reading
`train/loss` back: `reslog.open().scan()` (DataFrames) and `StoreReader.scan`'s rows, ns a point.
With --competitors, the same points through each other tracker's own API and back through its
own reader (scripts/bench/competitors.py --workload; bytes: every file it left).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import run_text
from trees import tree_of

ROOT = Path(__file__).resolve().parents[2]
HOST_RUN_POINTS = 199_000_000  # a 3-week 8-GPU host run of this mix (the table)

CHILD = r"""
import json, os, sys, time
bench_dir, store, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
no_reclaim = sys.argv[4] == "1"
sys.path.insert(1, bench_dir)
import numpy as np
import bench_codec
import reslog
from schema.store.rollup_writer import RollupWriter
from schema.store.connect import open_store
from schema.store.writes import resolve_keys

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
    chunks = getattr(writer, "chunks", None)
    if getattr(chunks, "reclaim_due", False) and not no_reclaim:
        with engine.connect() as conn:  # what reslog's writer does after a commit that sealed
            chunks.reclaim(conn)
    cpu += time.process_time() - c
c = time.process_time()
if hasattr(writer, "seal_all"):
    with engine.begin() as conn:
        writer.seal_all(conn, alone=True)
    writer.accept(None)
    if hasattr(writer.chunks, "reclaim") and not no_reclaim:
        with engine.connect() as conn:
            writer.chunks.reclaim(conn)
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
    parts = (
        "SELECT c.relname, pg_relation_size(c.oid), pg_total_relation_size(c.reltoastrelid),"
        " pg_indexes_size(c.oid), s.n_dead_tup, s.n_live_tup, s.autovacuum_count"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid"
        " WHERE n.nspname = 'public' AND c.relkind = 'r'"
        " ORDER BY pg_total_relation_size(c.oid) DESC"
    )
    with engine.connect() as conn:
        size = conn.exec_driver_sql(total).scalar()
        for row in conn.exec_driver_sql(parts).all()[:4]:
            print("  table %s: heap %s toast %s indexes %s dead %s live %s autovacuums %s"
                  % tuple(row), file=sys.stderr)
    # What stays once (auto)vacuum has taken the dead rows: sealed heads, updated rollups.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM FULL")
        vacuumed = conn.exec_driver_sql(total).scalar()
    engine.dispose()

from schema.store.reader import StoreReader
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


def measure(tree: Path, store: str, steps: int, no_reclaim: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    argv = [str(ROOT / "scripts" / "bench"), store, str(steps), "1" if no_reclaim else "0"]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {out.stderr[-2000:]}")
    for line in out.stderr.splitlines():
        if line.startswith("  table "):
            print(line, file=sys.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


BENCH_VENV = ROOT / ".bench-venv" / "bin" / "python"  # scripts/bench/setup_competitors.sh


def write_workload(path: Path, steps: int) -> None:
    """The same points the store variants write (seed 1), for the other trackers."""
    import bench_codec
    import numpy as np

    rng = np.random.default_rng(1)
    t_steps, t_walls, t_keys = bench_codec.training(steps, rng)
    n_steps, n_walls, n_keys = bench_codec.nvml(steps, rng)
    np.savez(
        path,
        t_steps=t_steps,
        t_walls=t_walls,
        t_names=np.array(list(t_keys)),
        t_values=np.array(list(t_keys.values())),
        n_steps=n_steps,
        n_walls=n_walls,
        n_names=np.array(list(n_keys)),
        n_values=np.array(list(n_keys.values())),
    )


def competitor(name: str, workload: Path, tmp: Path) -> dict:
    """One tracker in its own process under .bench-venv (competitors.py --workload)."""
    out = tmp / f"{name}.json"
    work = tmp / name
    if not BENCH_VENV.exists():
        return {"name": name, "unavailable": "no .bench-venv (run setup_competitors.sh)"}
    script = ROOT / "scripts" / "bench" / "competitors.py"
    argv = [BENCH_VENV, script, name, "--workload", workload, "--workdir", work, "--out", out]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = run_text(argv, cwd=tmp, env=env)
    if not out.exists():
        return {"name": name, "unavailable": f"exit {proc.returncode}: {proc.stderr[-300:]}"}
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--before", default="b57fe1f", help="git revision of the code before")
    ap.add_argument("--postgres", action="store_true", help="also into a PostgreSQL on loopback")
    ap.add_argument(
        "--variants",
        default="before,after",
        help="which to run: before (--before's tree), after (this tree), noreclaim (this tree "
        "without the VACUUM after a sealing: PostgreSQL only)",
    )
    ap.add_argument("--backends", default="SQLite,PostgreSQL", help="which backends to run")
    ap.add_argument(
        "--competitors",
        default="",
        help="also these trackers, under .bench-venv: tensorboard,mlflow,trackio,wandb",
    )
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
            variants = (("before", before), ("noreclaim", ROOT), ("after", ROOT))
            for name, tree in variants:
                if name not in args.variants.split(","):
                    continue
                stores = [("SQLite", str(Path(tmp) / f"{name}.db"))]
                if server is not None:
                    stores.append(("PostgreSQL", fresh_database(server.url)))
                for backend, store in stores:
                    if backend not in args.backends.split(","):
                        continue
                    if name == "noreclaim" and backend != "PostgreSQL":
                        continue
                    r = measure(tree, store, args.steps, no_reclaim=name == "noreclaim")
                    r.update(variant=name, backend=backend)
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    results.append(r)
            others = []
            if args.competitors:
                workload = Path(tmp) / "workload.npz"
                write_workload(workload, args.steps)
                for name in args.competitors.split(","):
                    r = competitor(name, workload, Path(tmp))
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    others.append(r)
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
            f"{bpp * HOST_RUN_POINTS / 1e9:.2f} | "
            f"{r['cpu_s'] / r['points'] * 1e9:,.0f} | {r['scan_s'] / r['key_points'] * 1e9:,.0f} | "
            f"{r['rows_s'] / r['key_points'] * 1e9:,.0f} |"
        )
    for r in others:
        if "unavailable" in r:
            print(f"| {r['name']} | | unavailable: {r['unavailable']} | | | | | |")
            continue
        bpp = r["bytes"] / r["points"]
        print(
            f"| {r['name']} {r['version']} | its own files | {bpp:.2f} | | "
            f"{bpp * HOST_RUN_POINTS / 1e9:.2f} | {r['cpu_s'] / r['points'] * 1e9:,.0f} | "
            f"{r['read_s'] / max(1, r['key_points']) * 1e9:,.0f} ({r['key_points']:,} read) | |"
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
