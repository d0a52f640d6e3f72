"""One tracker per process, the same 8-scalar logging loop, results as JSON.

    python scripts/bench/competitors.py NAME --steps 20000 --workdir DIR --out result.json
    python scripts/bench/competitors.py NAME --workload W.npz --workdir DIR --out result.json

NAME: append (the floor), sqlite (raw executemany into the store's tables: the storage limit),
reslog, wandb, tensorboard, mlflow, trackio. bench_log.py runs append, sqlite and reslog under
the project's venv and the others under .bench-venv (setup_competitors.sh), each in a fresh
process so that one tracker's threads, imports and caches never touch another's numbers.
This file imports nothing from the project at module level, so .bench-venv can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEYS = (
    "train/loss",
    "train/lr",
    "train/grad_norm",
    "train/tokens_per_s",
    "train/mfu",
    "train/tokens",
    "time/data",
    "time/step",
)

LogFn = Callable[[dict[str, float], int], None]
CloseFn = Callable[[], None]


def payloads(steps: int) -> list[dict[str, float]]:
    """One fresh dict per step, built before the clock starts (trackers may keep the dict)."""
    out = []
    for step in range(steps):
        x = float(step)
        out.append(
            {
                "train/loss": 3.5 / (1.0 + x * 1e-4) + (step % 7) * 1e-3,
                "train/lr": 3e-4 * min(1.0, x / 2000.0),
                "train/grad_norm": 0.5 + (step % 13) * 0.01,
                "train/tokens_per_s": 150_000.0 + (step % 17),
                "train/mfu": 0.41 + (step % 5) * 1e-3,
                "train/tokens": x * 524_288.0,
                "time/data": 0.001 + (step % 3) * 1e-4,
                "time/step": 0.35 + (step % 11) * 1e-3,
            }
        )
    return out


# -- adapters: each returns (log, close, stored_points or None) -----------------------------------


def setup_append(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    rows: list[tuple[dict[str, float], int]] = []

    def log(metrics: dict[str, float], step: int) -> None:
        rows.append((metrics, step))

    return log, lambda: None, lambda: len(rows) * len(KEYS)


def setup_sqlite(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    import sqlite3

    from schema.store.connect import open_store

    path = work / "raw.db"
    open_store(str(path), create=True).dispose()  # the real tables and indexes, via Alembic
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    now = time.time()
    cur = conn.execute(
        "INSERT INTO runs (uid, project, name, status, created_at, heartbeat_at) "
        "VALUES ('bench', 'bench', 'raw', 'running', ?, ?)",
        (now, now),
    )
    run_id = cur.lastrowid
    key_ids = {}
    for key in KEYS:
        key_ids[key] = conn.execute("INSERT INTO keys (name) VALUES (?)", (key,)).lastrowid
    rows: list[tuple[int, int, int, float, float]] = []
    append = rows.append

    def log(metrics: dict[str, float], step: int) -> None:
        wall = time.time()
        for key, value in metrics.items():
            append((run_id, key_ids[key], step, wall, value))

    def close() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)", rows
        )
        conn.execute("COMMIT")

    def stored() -> int:
        return conn.execute("SELECT count(*) FROM points").fetchone()[0]

    return log, close, stored


def setup_reslog(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    import sqlite3

    import reslog

    path = work / "reslog.db"
    run = reslog.init(project="bench", name="loop", store=str(path), system=False)

    def log(metrics: dict[str, float], step: int) -> None:
        run.log(metrics, step=step)

    def stored() -> int:
        from schema.store import points_by_id

        with sqlite3.connect(path) as conn:
            return points_by_id.point_count(conn.cursor(), "?")

    return log, run.finish, stored


def setup_wandb(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=str(work), WANDB_SILENT="true")
    os.environ.setdefault("WANDB_CONSOLE", "off")
    import wandb

    run = wandb.init(project="bench", name="loop", dir=str(work))

    def log(metrics: dict[str, float], step: int) -> None:
        run.log(metrics, step=step)

    return log, run.finish, lambda: None


def setup_tensorboard(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(work / "tb"))

    def log(metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            writer.add_scalar(key, value, step)

    return log, writer.close, lambda: None


def setup_mlflow(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    import logging

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{work / 'mlflow.db'}")
    mlflow.set_experiment("bench")
    mlflow.start_run(run_name="loop")

    def log(metrics: dict[str, float], step: int) -> None:
        mlflow.log_metrics(metrics, step=step)

    return log, mlflow.end_run, lambda: None


def setup_trackio(work: Path) -> tuple[LogFn, CloseFn, Callable[[], int | None]]:
    os.environ.setdefault("TRACKIO_DIR", str(work / "trackio"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import trackio

    trackio.init(project="bench", name="loop")

    def log(metrics: dict[str, float], step: int) -> None:
        trackio.log(metrics, step=step)

    return log, trackio.finish, lambda: None


ADAPTERS: dict[str, Callable[[Path], tuple[LogFn, CloseFn, Callable[[], int | None]]]] = {
    "append": setup_append,
    "sqlite": setup_sqlite,
    "reslog": setup_reslog,
    "wandb": setup_wandb,
    "tensorboard": setup_tensorboard,
    "mlflow": setup_mlflow,
    "trackio": setup_trackio,
}
# Which interpreter runs which adapter (bench_log.py reads this).
PROJECT_VENV = ("append", "sqlite", "reslog")
BENCH_VENV = ("wandb", "tensorboard", "mlflow", "trackio")


# -- measurement ---------------------------------------------------------------------------------


def helper_cpu_s(seen: dict[int, float]) -> float:
    """CPU of child processes a tracker started (wandb's service), by last observation."""
    try:
        import psutil
    except ImportError:
        return 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
            seen[child.pid] = t.user + t.system
        except psutil.Error:
            pass
    return sum(seen.values())


def version_of(name: str) -> str:
    import importlib.metadata
    import sqlite3

    if name in ("append", "sqlite"):
        return f"SQLite {sqlite3.sqlite_version}" if name == "sqlite" else ""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def percentile(sorted_ns: list[int], q: float) -> float:
    i = min(len(sorted_ns) - 1, max(0, round(q * (len(sorted_ns) - 1))))
    return sorted_ns[i] / 1000.0


def measure(name: str, steps: int, budget_s: float, work: Path) -> dict[str, Any]:
    data = payloads(steps)
    t_init = time.perf_counter()
    log, close, stored = ADAPTERS[name](work)
    init_s = time.perf_counter() - t_init
    seen: dict[int, float] = {}
    helper_cpu_s(seen)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    lat: list[int] = []
    clock = time.perf_counter_ns
    cpu0, wall0 = time.process_time(), time.perf_counter()
    deadline = wall0 + budget_s
    done = 0
    for step, metrics in enumerate(data):
        t0 = clock()
        log(metrics, step)
        lat.append(clock() - t0)
        done = step + 1
        if not done & 63 and time.perf_counter() > deadline:
            break
    loop_s = time.perf_counter() - wall0
    helper_cpu_s(seen)  # children still alive before close
    t_close = time.perf_counter()
    close()
    close_s = time.perf_counter() - t_close
    cpu_self = time.process_time() - cpu0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    helpers = max(helper_cpu_s(seen), reaped)
    lat.sort()
    n_points = stored()
    return {
        "name": name,
        "version": version_of(name),
        "steps": done,
        "capped": done < steps,
        "init_s": init_s,
        "loop_s": loop_s,
        "close_s": close_s,
        "caller_median_us": percentile(lat, 0.5),
        "caller_p99_us": percentile(lat, 0.99),
        "caller_mean_us": sum(lat) / len(lat) / 1000.0,
        "cpu_per_step_us": cpu_self / done * 1e6,
        "helper_cpu_per_step_us": helpers / done * 1e6,
        "stored_points": n_points,
        "logged_points": done * len(KEYS),
    }


# -- the store issue's workload (issue 30): bytes a point, writer CPU, one key read back ---------
#
# scripts/bench/bench_store.py --competitors writes the workload (bench_codec.py's training keys
# every step and NVML fields every second) to an .npz file and runs `competitors.py NAME
# --workload FILE` under .bench-venv for each tracker: every record logged through the tracker's
# own API in wall order, an NVML sample at the last training step logged before it (W&B refuses
# a step that goes back, and folds the records of one step into one row), then closed; then one
# key read back through the tracker's own reader. Bytes: every file it left in its directory.


def workload_records(path: Path) -> list[tuple[int, float, dict[str, float]]]:
    import numpy as np

    data = np.load(path, allow_pickle=False)
    out = []
    for prefix in ("t", "n"):
        names = [str(x) for x in data[f"{prefix}_names"]]
        values = data[f"{prefix}_values"]
        steps, walls = data[f"{prefix}_steps"].tolist(), data[f"{prefix}_walls"].tolist()
        for i, (step, wall) in enumerate(zip(steps, walls, strict=True)):
            row = dict(zip(names, values[:, i].tolist(), strict=True))
            out.append((wall, step, prefix == "t", row))
    out.sort(key=lambda r: r[0])
    last = 0
    records = []
    for wall, step, training, metrics in out:
        # An NVML sample goes with the last training step logged: never ahead of it (W&B
        # would then fold the next training steps into one row, keeping the last of each key).
        last = step if training else last
        records.append((last, wall, metrics))
    return records


def _write_tensorboard(work: Path, records) -> Callable[[str], int]:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(work / "tb"))
    for step, wall, metrics in records:
        for key, value in metrics.items():
            writer.add_scalar(key, value, step, walltime=wall)
    writer.close()

    def read(key: str) -> int:
        from tensorboard.backend.event_processing import event_accumulator

        acc = event_accumulator.EventAccumulator(str(work / "tb"), size_guidance={"scalars": 0})
        acc.Reload()
        return len([e.value for e in acc.Scalars(key)])

    return read


def _write_mlflow(work: Path, records) -> Callable[[str], int]:
    import logging

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    logging.getLogger("alembic").setLevel(logging.ERROR)
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{work / 'mlflow.db'}")
    mlflow.set_experiment("bench")
    run = mlflow.start_run(run_name="store")
    for step, wall, metrics in records:
        mlflow.log_metrics(metrics, step=step, timestamp=int(wall * 1000))
    mlflow.end_run()
    run_id = run.info.run_id

    def read(key: str) -> int:
        return len([m.value for m in mlflow.MlflowClient().get_metric_history(run_id, key)])

    return read


def _write_trackio(work: Path, records) -> Callable[[str], int]:
    os.environ.setdefault("TRACKIO_DIR", str(work / "trackio"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import trackio

    trackio.init(project="bench", name="store")
    for step, _wall, metrics in records:
        trackio.log(metrics, step=step)
    trackio.finish()

    def read(key: str) -> int:
        from trackio.sqlite_storage import SQLiteStorage

        return len(SQLiteStorage.get_metric_values("bench", "store", key))

    return read


def _write_wandb(work: Path, records) -> Callable[[str], int]:
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=str(work), WANDB_SILENT="true")
    os.environ.setdefault("WANDB_CONSOLE", "off")
    import wandb

    run = wandb.init(project="bench", name="store", dir=str(work))
    for step, _wall, metrics in records:
        run.log(metrics, step=step)
    run.finish()

    def read(key: str) -> int:
        """The offline run's .wandb file (LevelDB's log format: 32 KiB blocks of records, each a
        CRC, a length and a type, after a 7-byte W&B header), its history records parsed."""
        from wandb.proto import wandb_internal_pb2

        (path,) = list(work.rglob("*.wandb"))
        data = path.read_bytes()
        pos, parts, values = 7, [], []
        while pos + 7 <= len(data):
            room = 32768 - pos % 32768
            if room < 7:
                pos += room
                continue
            length = int.from_bytes(data[pos + 4 : pos + 6], "little")
            kind = data[pos + 6]
            if length == 0 and kind == 0:  # zero padding
                pos += room
                continue
            parts.append(data[pos + 7 : pos + 7 + length])
            pos += 7 + length
            if kind in (1, 4):  # a whole record, or its last fragment
                rec = wandb_internal_pb2.Record()
                rec.ParseFromString(b"".join(parts))
                parts = []
                if rec.WhichOneof("record_type") == "history":
                    for item in rec.history.item:
                        name = item.key or "/".join(item.nested_key)
                        if name == key:
                            values.append(json.loads(item.value_json))
        return len(values)

    return read


WORKLOAD = {
    "tensorboard": _write_tensorboard,
    "mlflow": _write_mlflow,
    "trackio": _write_trackio,
    "wandb": _write_wandb,
}


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def measure_workload(name: str, data: Path, work: Path, key: str = "train/loss") -> dict:
    records = workload_records(data)
    points = sum(len(m) for _s, _w, m in records)
    seen: dict[int, float] = {}
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    read = WORKLOAD[name](work, records)
    write_s = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    helpers = max(helper_cpu_s(seen), reaped)
    size = dir_bytes(work)
    best, n, spent = None, 0, 0.0
    for _ in range(3):  # best of 3, or of fewer where one read takes over 10 s (TensorBoard)
        t = time.perf_counter()
        n = read(key)
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
        spent += took
        if spent > 10.0:
            break
    return {
        "name": name,
        "version": version_of(name),
        "points": points,
        "bytes": size,
        "cpu_s": cpu + helpers,
        "helper_cpu_s": helpers,
        "write_s": write_s,
        "read_s": best,
        "key_points": n,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=sorted(ADAPTERS))
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--budget-s", type=float, default=20.0, help="stop a slow tracker's loop early")
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workload", type=Path, help="the store issue's workload (.npz) instead")
    args = p.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.workload is not None:
            result = measure_workload(args.name, args.workload, args.workdir)
        else:
            result = measure(args.name, args.steps, args.budget_s, args.workdir)
    except ImportError as exc:
        result = {"name": args.name, "unavailable": f"not installed ({exc.name or exc})"}
    except Exception as exc:  # a tracker that cannot run here is a row, not a crash
        result = {"name": args.name, "unavailable": f"{type(exc).__name__}: {exc}"[:300]}
    args.out.write_text(json.dumps(result))
    # Some trackers leave non-daemon threads or atexit work behind; the numbers are written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
