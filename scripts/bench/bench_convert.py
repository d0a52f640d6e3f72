"""`reslog upgrade` from rows to chunks (issue 30, step 6; docs/store.md "Versions and upgrades").

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_convert.py               # 2 runs, 1.9M points
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_convert.py --steps 5000  # quick

A 0005 store (a `points` row a point) of --runs runs shaped like the scale benchmark: 20
training keys every step, 30 GPU keys every 4th step, for --steps steps, its rows inserted
straight into SQLite (rollups left out: the conversion does not read them). Printed, for the
conversion alone (schema.store.chunk_convert.convert on a fresh copy) and for the whole command
(`reslog upgrade --no-backup`: migration, conversion, VACUUM): wall and process CPU seconds,
points per second of each, and the file's bytes before and after; and the baseline measured in
the same run on another copy: reading every row back by id (the floor of any conversion) and
the ratio of the conversion's CPU to it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from alembic import command

from schema.store import chunk_convert, migrate
from schema.store.connect import make_engine, open_store, resolve_store

ROOT = Path(__file__).resolve().parents[2]


def row_store(path: Path) -> None:
    """An empty store at revision 0005: points as rows, as before chunks."""
    engine = open_store(path, create=True)
    cfg = migrate.alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    engine.dispose()


def build(path: Path, runs: int, steps: int) -> int:
    row_store(path)
    rng = random.Random(1)
    names = [f"train/k{j}" for j in range(20)] + [f"sys/gpu{j % 8}/f{j}" for j in range(30)]
    n = 0
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO keys (name) VALUES (?)", [(k,) for k in names])
        for r in range(runs):
            conn.execute(
                "INSERT INTO runs (uid, project, name, status, created_at, heartbeat_at,"
                " heartbeat_interval, host, pid, rank, world_size, command, config, summary,"
                " tags, notes, run_group) VALUES (?, 'p', ?, 'finished', 1.7e9, 1.7e9, 1, 'h',"
                " 1, 0, 1, 'x', '{}', '{}', '[]', '', '')",
                (f"{r:032x}", f"r{r}"),
            )
            rows = []
            wall = 1.7e9
            for s in range(steps):
                wall += 0.3 + rng.random() * 1e-3
                for j in range(20):
                    v = (
                        rng.random()
                        if j < 5
                        else (3e-4 * min(1, s / 2000) if j == 5 else s * 1024.0)
                    )
                    rows.append((r + 1, j + 1, s, wall, v))
                if s % 4 == 0:
                    rows += [(r + 1, 21 + j, s, wall, rng.randrange(10000) / 10) for j in range(30)]
            conn.executemany(
                "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            n += len(rows)
        conn.commit()
        conn.execute("VACUUM")
    return n


def read_all(path: Path) -> tuple[float, float]:
    with sqlite3.connect(path) as conn:
        w, c = time.perf_counter(), time.process_time()
        last = -1
        while True:
            rows = conn.execute(
                "SELECT id, key_id, step, wall, value FROM points WHERE id > ? ORDER BY id"
                " LIMIT 50000",
                (last,),
            ).fetchall()
            if not rows:
                break
            last = rows[-1][0]
        return time.perf_counter() - w, time.process_time() - c


def convert_only(path: Path) -> tuple[float, float]:
    engine = make_engine(resolve_store(path))
    cfg = migrate.alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    w, c = time.perf_counter(), time.process_time()
    chunk_convert.convert(engine)
    out = time.perf_counter() - w, time.process_time() - c
    engine.dispose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "rows.db"
        n = build(src, args.runs, args.steps)
        size = src.stat().st_size
        base = Path(tmp) / "base.db"
        shutil.copyfile(src, base)
        read_w, read_c = read_all(base)
        conv = Path(tmp) / "conv.db"
        shutil.copyfile(src, conv)
        conv_w, conv_c = convert_only(conv)
        whole = Path(tmp) / "whole.db"
        shutil.copyfile(src, whole)
        cmd = [sys.executable, "-m", "reslog.tools.cli", "upgrade", str(whole), "--no-backup"]
        w = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
        whole_w = time.perf_counter() - w
        import resource

        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        whole_c = kids.ru_utime + kids.ru_stime
        after = whole.stat().st_size
    print(f"{n:,} points, {args.runs} runs, 50 keys; file {size / 2**20:.1f} MiB as rows")
    print(f"{'what':<40} {'wall s':>8} {'CPU s':>8} {'points/s wall':>14} {'points/CPU-s':>13}")
    for what, ws, cs in (
        ("baseline: read every row back by id", read_w, read_c),
        ("conversion (schema.store.chunk_convert)", conv_w, conv_c),
        ("reslog upgrade --no-backup (all of it)", whole_w, whole_c),
    ):
        print(f"{what:<40} {ws:>8.2f} {cs:>8.2f} {n / ws:>14,.0f} {n / cs:>13,.0f}")
    print(f"conversion CPU / reading the rows: {conv_c / read_c:.2f}x")
    print(
        f"file: {size:,} bytes as rows ({size / n:.1f} a point) -> {after:,} as chunks "
        f"({after / n:.2f} a point, rollups left out), {size / after:.1f}x smaller"
    )
    print(done.stdout.strip())


if __name__ == "__main__":
    main()
