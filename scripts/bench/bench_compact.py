"""Compaction after `reslog upgrade` (issue 30; docs/store.md "Compaction").

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_compact.py                 # 20,000 steps
    PYTHONPATH=. .venv/bin/python scripts/bench/bench_compact.py --steps 5000    # quick

The issue's workload as a 0005 store (a `points` row a point): 20 training keys every step
(0.3 s a step) and 12 NVML fields x 8 GPUs every second (every 3rd step), its rows inserted in
one of two orders: step by step (every key of a step, then the next step: ids line up across
the keys of a step) or flush by flush as reslog's writer before 0006 did (a flush of 10 steps,
its points key by key). Each is converted to chunks (schema.store.chunk_convert, one series a chunk)
and then compacted (schema.store.chunk_compact); printed: the chunks' bytes a point (blobs only, and
the whole file after VACUUM) and the wall and process CPU seconds of each step.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from alembic import command
from bench_convert import row_store

from schema.store import chunk_compact, chunk_convert, migrate
from schema.store.connect import make_engine, open_store, resolve_store

TRAIN, GPUS, FIELDS, FLUSH = 20, 8, 12, 10


def build(path: Path, steps: int, order: str) -> int:
    row_store(path)
    rng = random.Random(1)
    names = [f"train/k{j}" for j in range(TRAIN)]
    names += [f"sys/gpu{g}/f{f}" for g in range(GPUS) for f in range(FIELDS)]
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO keys (name) VALUES (?)", [(k,) for k in names])
        conn.execute(
            "INSERT INTO runs (uid, project, name, status, created_at, heartbeat_at,"
            " heartbeat_interval, host, pid, rank, world_size, command, config, summary,"
            " tags, notes, run_group) VALUES (?, 'p', 'r', 'finished', 1.7e9, 1.7e9, 1, 'h',"
            " 1, 0, 1, 'x', '{}', '{}', '[]', '', '')",
            ("0" * 32,),
        )
        records = []  # (step, wall, {key id: value}) a log() call
        wall, loss = 1.7e9, 4.0
        for s in range(steps):
            wall += 0.3 + rng.random() * 1e-3
            loss = loss * 0.9999 + rng.gauss(0, 1e-3)
            vals = {1: loss, 2: 3e-4 * min(1, s / 2000), 3: abs(rng.gauss(1, 0.1))}
            for j in range(3, TRAIN):
                vals[j + 1] = rng.random() if j < 8 else float(s * 1024 + j)
            records.append((s, wall, vals))
            if s % 3 == 0:
                gpu = {
                    TRAIN + 1 + i: float(rng.randrange(1000)) / (10 if i % FIELDS == 0 else 1)
                    for i in range(GPUS * FIELDS)
                }
                records.append((s, wall + 0.01, gpu))
        rows = []
        if order == "steps":
            for s, w, vals in records:
                rows += [(1, k, s, w, v) for k, v in vals.items()]
        else:  # flush by flush, key by key inside a flush (the writer before 0006)
            for at in range(0, len(records), FLUSH * 2):
                flush = records[at : at + FLUSH * 2]
                keys = sorted({k for _s, _w, vals in flush for k in vals})
                for k in keys:
                    rows += [(1, k, s, w, vals[k]) for s, w, vals in flush if k in vals]
        conn.executemany(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)", rows
        )
        conn.commit()
    return len(rows)


def blob_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT coalesce(sum(length(data)), 0) FROM chunks").fetchone()[0])


def file_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def show(path: Path, label: str, n: int, step: str, ws: float, cs: float) -> float:
    with sqlite3.connect(path) as conn:
        chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    blobs = blob_bytes(path)
    size = file_bytes(path)
    print(
        f"{label:<22} {n:>10,} {step:<10} {chunks:>7,} {blobs / n:>10.2f}"
        f" {size / n:>10.2f} {ws:>7.2f} {cs:>7.2f}"
    )
    return blobs / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20_000)
    args = ap.parse_args()
    print(
        f"{'rows inserted':<22} {'points':>10} {'step':<10} {'chunks':>7} {'blob B/pt':>10}"
        f" {'file B/pt':>10} {'wall s':>7} {'CPU s':>7}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for order in ("steps", "flushes"):
            path = Path(tmp) / f"{order}.db"
            n = build(path, args.steps, order)
            engine = make_engine(resolve_store(path))
            cfg = migrate.alembic_config(engine)
            with engine.begin() as conn:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
            conv = timed(lambda engine=engine: chunk_convert.convert(engine))
            engine.dispose()
            label = "step by step" if order == "steps" else "flush by flush (old)"
            done = []

            def compacted(done=done, path=path) -> None:
                engine = open_store(path)
                done.append(chunk_compact.compact(engine))
                engine.dispose()

            before = show(path, label, n, "converted", *conv)
            took = timed(compacted)
            after = show(path, label, n, "compacted", *took)
            print(f"{'':<22} {done[0].line()}")
            print(
                f"{'':<22} blob bytes a point {after / before:.2f}x the converted store's;"
                f" compaction CPU {took[1] / conv[1]:.2f}x the conversion's"
            )


if __name__ == "__main__":
    main()
