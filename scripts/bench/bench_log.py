"""reslog's logging benchmark: the issue's targets, side by side with other trackers, in one run.

    .venv/bin/python scripts/bench/bench_log.py                  # everything, ~2-4 min
    .venv/bin/python scripts/bench/bench_log.py --steps 5000 --parts caller,readback
    .venv/bin/python scripts/bench/bench_log.py --markdown out.md   # also write the tables

Parts (each in fresh subprocesses, one at a time, so nothing shares a process or a core):
  caller    8 scalars per step for --steps steps: reslog, a bare list append (the floor), raw
            sqlite3 executemany into the store's tables (the storage limit), and wandb offline,
            TensorBoard, MLflow (sqlite), trackio from .bench-venv (setup_competitors.sh).
  ingest    reslog points/s, first log() to finish() returned, every point stored.
  gil       wait share (wall − thread CPU) of a 1 ms pure-Python step, with and without reslog.
  readback  160,000 points (the caller part's reslog store) through schema.store.read.
  kill      SIGKILL a process logging at a known rate; points lost, in flush intervals.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import random
import signal
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BENCH_PY = Path(os.environ.get("BENCH_VENV", ROOT / ".bench-venv")) / "bin" / "python"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from competitors import BENCH_VENV, KEYS, PROJECT_VENV, payloads, setup_sqlite  # noqa: E402
from log_report import report  # noqa: E402

from schema.store import points_by_id  # noqa: E402

PARTS = ("caller", "ingest", "gil", "readback", "kill")


def child_env() -> dict[str, str]:
    # The project's packages by path: a subprocess's sys.path[0] is this folder, not the root.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def run_json(cmd: list[str], out: Path, timeout: float) -> dict[str, Any]:
    """Run a measuring subprocess that writes its JSON result to `out`."""
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=child_env(), cwd=out.parent
        )
    except subprocess.TimeoutExpired:
        return {"unavailable": f"timed out after {timeout:.0f} s"}
    if out.exists():
        return json.loads(out.read_text())
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"unavailable": f"exit {proc.returncode}: {tail[0][:200]}"}


def probe(name: str, work: Path, timeout: float, *extra: str) -> dict[str, Any]:
    out = work / f"{name}.json"
    cmd = [sys.executable, __file__, "--probe", name, "--workdir", str(work), "--out", str(out)]
    return run_json([*cmd, *extra], out, timeout)


# -- caller cost: every tracker ------------------------------------------------------------------


def part_caller(args, work: Path) -> list[dict[str, Any]]:
    rows = []
    for name in (*PROJECT_VENV, *BENCH_VENV):
        python = sys.executable if name in PROJECT_VENV else str(BENCH_PY)
        if not Path(python).exists():
            rows.append({"name": name, "unavailable": "no .bench-venv (setup_competitors.sh)"})
            continue
        out = work / f"caller-{name}.json"
        cmd = [python, str(HERE / "competitors.py"), name, "--steps", str(args.steps)]
        cmd += ["--budget-s", str(args.budget_s), "--workdir", str(work / name), "--out", str(out)]
        print(f"  caller: {name} ...", file=sys.stderr, flush=True)
        row = run_json(cmd, out, timeout=args.budget_s + 120)
        row["name"] = name
        rows.append(row)
    return rows


# -- probes (run as `bench_log.py --probe NAME` in their own process) -----------------------------


def probe_ingest(work: Path, steps: int) -> dict[str, Any]:
    import reslog

    data = payloads(steps)
    run = reslog.init(project="bench", name="ingest", store=str(work / "ingest.db"), system=False)
    t0, c0 = time.perf_counter(), time.process_time()
    for step, metrics in enumerate(data):
        run.log(metrics, step=step)
    logged_s = time.perf_counter() - t0
    run.finish()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    with sqlite3.connect(work / "ingest.db") as conn:
        stored = points_by_id.point_count(conn.cursor(), "?")
    # The same points by raw executemany, right after, so both see the same machine load.
    raw_dir = work / "ingest-raw"
    raw_dir.mkdir(exist_ok=True)
    log, close, raw_stored = setup_sqlite(raw_dir)
    t0, c0 = time.perf_counter(), time.process_time()
    for step, metrics in enumerate(data):
        log(metrics, step)
    close()
    raw_wall, raw_cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "points": steps * len(KEYS),
        "stored": stored,
        "wall_s": wall,
        "cpu_s": cpu,
        "log_s": logged_s,
        "raw_wall_s": raw_wall,
        "raw_cpu_s": raw_cpu,
        "raw_stored": raw_stored(),
    }


def busy(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def calibrate_busy(target_s: float = 1e-3) -> int:
    n = 20_000
    for _ in range(5):
        samples = []
        for _ in range(20):
            t = time.thread_time()
            busy(n)
            samples.append(time.thread_time() - t)
        n = max(1000, int(n * target_s / statistics.median(samples)))
    return n


def schedstat() -> tuple[float, float]:
    """(CPU time, time runnable but waiting for a CPU) of the calling thread, in seconds."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            cpu_ns, runq_ns, _ = f.read().split()
        return int(cpu_ns) / 1e9, int(runq_ns) / 1e9
    except (OSError, ValueError):  # no schedstats: count no run-queue wait
        return time.thread_time(), 0.0


def wait_share(n: int, steps: int, run=None, data=None) -> dict[str, float]:
    """Wall, CPU and run-queue wait of the busy thread over `steps` busy steps.

    wall − CPU is the issue's measure of waiting. On a shared machine most of it is waiting
    for a core (other processes), which the kernel counts as run-queue time; what is left,
    wall − CPU − run queue, is time the thread slept: here that can only be waiting for the GIL.
    """
    w0 = time.perf_counter()
    c0, q0 = schedstat()
    for step in range(steps):
        busy(n)
        if run is not None:
            run.log(data[step], step=step)
    wall = time.perf_counter() - w0
    c1, q1 = schedstat()
    cpu, runq = c1 - c0, q1 - q0
    return {
        "wait": (wall - cpu) / wall,
        "blocked": max(0.0, wall - cpu - runq) / wall,
        "wall": wall,
        "cpu": cpu,
    }


def thread_cpu(threads) -> float:
    total = 0.0
    for t in threads:
        with contextlib.suppress(OSError, TypeError):  # ended meanwhile
            total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return total


def probe_gil(work: Path, steps: int, blocks: int) -> dict[str, Any]:
    """Blocks of busy steps, without and with reslog, in rotating order (noise hits all)."""
    import threading

    import reslog

    n = calibrate_busy()
    data = payloads(steps)
    labels = ["without", "reslog", "reslog+system"]
    blocks_out: dict[str, list[dict[str, float]]] = {k: [] for k in labels}
    for block in range(blocks):
        for label in labels[block % 3 :] + labels[: block % 3]:
            if label == "without":
                m = wait_share(n, steps)
                m["background_cpu"] = 0.0
                blocks_out[label].append(m)
                continue
            before = set(threading.enumerate())
            run = reslog.init(
                project="bench",
                name=label,
                store=str(work / f"gil-{block}-{label}.db"),
                system=label == "reslog+system",
            )
            background = [t for t in threading.enumerate() if t not in before]
            cpu0 = thread_cpu(background)
            m = wait_share(n, steps, run, data)
            m["background_cpu"] = (thread_cpu(background) - cpu0) / m["wall"]
            run.finish()
            blocks_out[label].append(m)
    step_ms = statistics.median(m["cpu"] for m in blocks_out["without"]) / steps * 1e3
    return {"busy_n": n, "step_ms": step_ms, "steps": steps, "blocks": blocks_out}


def probe_kill_child(work: Path, rate: float, flush: float) -> None:
    """Log at `rate` steps/s forever; the step count goes to a shared page after each log()."""
    import reslog

    fd = os.open(work / "counter", os.O_RDWR)
    counter = mmap.mmap(fd, 16)
    run = reslog.init(
        project="bench",
        name="kill",
        store=str(work / "kill.db"),
        system=False,
        flush_interval=flush,
    )
    counter[8:16] = struct.pack("q", 1)  # ready
    t0 = time.perf_counter()
    step = 0
    while True:
        run.log({k: float(step) for k in KEYS}, step=step)
        step += 1
        counter[0:8] = struct.pack("q", step)  # survives SIGKILL: a MAP_SHARED file page
        delay = t0 + step / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def part_kill(work: Path, trials: int, rate: float, flush: float) -> dict[str, Any]:
    results = []
    for trial in range(trials):
        d = work / f"kill-{trial}"
        d.mkdir()
        (d / "counter").write_bytes(b"\0" * 16)
        cmd = [sys.executable, __file__, "--probe", "kill_child", "--workdir", str(d)]
        cmd += ["--rate", str(rate), "--flush", str(flush)]
        proc = subprocess.Popen(cmd, env=child_env(), stderr=subprocess.PIPE)
        with open(d / "counter", "r+b") as f:
            counter = mmap.mmap(f.fileno(), 16)
            deadline = time.monotonic() + 60
            while struct.unpack("q", counter[8:16])[0] != 1:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
                    return {"unavailable": f"logging process failed: {(err or ['?'])[-1]}"}
                time.sleep(0.01)
            # Kill at a different phase of the flush cycle each trial.
            time.sleep(2.0 + flush * (trial + random.random()) / trials)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            logged_steps = struct.unpack("q", counter[0:8])[0]
        with sqlite3.connect(d / "kill.db") as conn:
            stored = points_by_id.point_count(conn.cursor(), "?")
        lost_points = logged_steps * len(KEYS) - stored
        lost_s = lost_points / len(KEYS) / rate
        results.append(
            {"logged": logged_steps * len(KEYS), "stored": stored, "lost_intervals": lost_s / flush}
        )
    return {"rate": rate, "flush": flush, "trials": results}


# -- read-back ------------------------------------------------------------------------------------


def best_of(repeats: int, fn) -> tuple[float, float, int]:
    """(best wall s, best CPU s, fn's result): CPU shows the cost on an idle core."""
    walls, cpus, result = [], [], 0
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus), result


def part_readback(db: Path, repeats: int = 3) -> dict[str, Any]:
    from reslog.agent.store import Store
    from schema.store import read
    from schema.store.connect import open_store

    t0 = time.perf_counter()
    engine = open_store(str(db), readonly=True)
    with engine.connect() as conn:
        run_id = read.list_runs(conn)[0][0]
        key_ids = read.run_key_ids(conn, run_id)
    open_s = time.perf_counter() - t0

    def fetch_all() -> int:
        with engine.connect() as conn:
            return len(read.fetch_points(conn, [run_id]))

    def by_series() -> int:
        return sum(len(read.series(engine, run_id, k)[0]) for k in key_ids)

    store = Store(str(db))

    def agent() -> int:
        # The remote agent's path: packed binary rows, as resplot receives them over SSH.
        cursor, n, more = 0, 0, True
        while more:
            header, _sections = store.read("points", {"after": cursor})
            cursor, more = header["points_cursor"], header["more"]
            n += sum(s["rows"] for s in header["sections"])
        return n

    out: dict[str, Any] = {"open_s": open_s, "keys": len(key_ids)}
    for name, fn in (("fetch_points", fetch_all), ("series", by_series), ("agent", agent)):
        wall, cpu, n = best_of(repeats, fn)
        out[name] = {"wall_s": wall, "cpu_s": cpu, "n": n}
    store.close()
    engine.dispose()
    return out


def environment() -> str:
    import platform

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu or platform.processor()}, {os.cpu_count()} cores, load average {load}; "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20_000, help="logging loop length (caller part)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    p.add_argument("--budget-s", type=float, default=20.0, help="cap on one tracker's loop (s)")
    p.add_argument("--ingest-steps", type=int, default=50_000)
    p.add_argument("--gil-steps", type=int, default=1000, help="busy steps per block")
    p.add_argument("--gil-blocks", type=int, default=4)
    p.add_argument("--kill-trials", type=int, default=3)
    p.add_argument("--rate", type=float, default=500.0, help="kill part: steps/s")
    p.add_argument("--flush", type=float, default=1.0, help="kill part: flush_interval (s)")
    p.add_argument("--markdown", type=Path, help="also write the report to this file")
    p.add_argument("--probe", help=argparse.SUPPRESS)
    p.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.probe:
        return run_probe(args)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        p.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if "readback" in parts and "caller" not in parts:
        p.error("the readback part reads the caller part's reslog store: add caller")
    started = time.perf_counter()
    env = environment()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="reslog-bench-") as tmp:
        work = Path(tmp)
        if "caller" in parts:
            results["caller"] = part_caller(args, work)
        if "readback" in parts:
            db = work / "reslog" / "reslog.db"
            ok = db.exists() and any(
                r["name"] == "reslog" and "unavailable" not in r for r in results["caller"]
            )
            results["readback"] = (
                part_readback(db) if ok else {"unavailable": "the reslog caller run failed"}
            )
        if "ingest" in parts:
            print("  ingest ...", file=sys.stderr, flush=True)
            steps = str(args.ingest_steps)
            results["ingest"] = probe("ingest", work, 300, "--ingest-steps", steps)
        if "gil" in parts:
            print("  gil ...", file=sys.stderr, flush=True)
            extra = ["--gil-steps", str(args.gil_steps), "--gil-blocks", str(args.gil_blocks)]
            results["gil"] = probe("gil", work, 300, *extra)
        if "kill" in parts:
            print("  kill ...", file=sys.stderr, flush=True)
            results["kill"] = part_kill(work, args.kill_trials, args.rate, args.flush)
    text = report(results, args)
    took = time.perf_counter() - started
    command = "python scripts/bench/bench_log.py " + " ".join(argv or sys.argv[1:])
    header = f"`{command.strip()}` ({took:.0f} s)\n\n{env}\n"
    print(header)
    print(text)
    if args.markdown:
        args.markdown.write_text(header + "\n" + text + "\n")
    return 0


def run_probe(args) -> int:
    work: Path = args.workdir
    if args.probe == "kill_child":
        probe_kill_child(work, args.rate, args.flush)
        return 0
    try:
        if args.probe == "ingest":
            result = probe_ingest(work, args.ingest_steps)
        elif args.probe == "gil":
            result = probe_gil(work, args.gil_steps, args.gil_blocks)
        else:
            raise ValueError(f"unknown probe {args.probe}")
    except Exception as exc:
        result = {"unavailable": f"{type(exc).__name__}: {exc}"[:300]}
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
