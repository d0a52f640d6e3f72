"""Run-health latencies (issue: run state you can trust at a glance), on this machine:

- killed → shown `crashed`: a reader on the run's host (process liveness) against the baseline,
  a reader that cannot see the process (another host: the heartbeat rule), on the same kill;
- hung → shown `stalled`: seconds past `stall_after`, and whether the hanging frame is in the
  stall event;
- `reslog watch` (1 s polls): kill → the CRASHED line.

Usage: .venv/bin/python scripts/bench/bench_health.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from reslog.tools.watch import Watcher  # noqa: E402
from schema.store import read  # noqa: E402
from schema.store.connect import open_store  # noqa: E402
from schema.store.status import effective_status  # noqa: E402

CHILD = r"""
import sys, time, reslog
run = reslog.init(project="bench", name="health", store=sys.argv[1], system=False,
                  stall_after=float(sys.argv[2]))
print("ready", flush=True)
for step in range(50):
    run.log({"loss": 1.0}, step=step)
    time.sleep(0.02)
print("logged", time.time(), flush=True)
def wait_for_allreduce():
    time.sleep(3600)
wait_for_allreduce()
"""


def start(store: Path, stall_after: float) -> tuple[subprocess.Popen, float]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(stall_after)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().startswith("ready")
    last_log = float(proc.stdout.readline().split()[1])
    return proc, last_log


def run_info(engine):
    with engine.connect() as conn:
        return read.list_runs(conn)[-1][1]


def crash_latency(tmp: Path) -> dict[str, float]:
    store = tmp / "crash.db"
    proc, _ = start(store, 0)
    engine = open_store(store)
    time.sleep(0.5)
    watcher = Watcher(engine, str(store))
    watcher.poll()  # the baseline: running
    time.sleep(1.0 * (time.time() % 1))  # kill at a random point of the watch's poll period
    killed = time.time()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out: dict[str, float] = {}
    lines = io.StringIO()

    def watch() -> None:  # `reslog watch`: one poll a second
        while "watch" not in out and time.time() - killed < 120:
            time.sleep(1.0)
            for notice in watcher.poll():
                lines.write(notice.line() + "\n")
                if notice.status == "crashed":
                    out["watch"] = time.time() - killed

    thread = threading.Thread(target=watch)
    thread.start()
    while len(out) < 3 and time.time() - killed < 120:
        info = run_info(engine)
        now = time.time()
        if "host" not in out and info.status == "crashed":
            out["host"] = now - killed
        other = effective_status("running", info.heartbeat_at, info.heartbeat_interval, now)
        if "other host" not in out and other == "crashed":
            out["other host"] = now - killed
        time.sleep(0.01)
    thread.join()
    engine.dispose()
    return out


def stall_latency(tmp: Path, stall_after: float) -> tuple[float, bool]:
    store = tmp / "stall.db"
    proc, last_log = start(store, stall_after)
    engine = open_store(store)
    try:
        while run_info(engine).status != "stalled":
            time.sleep(0.01)
        late = time.time() - last_log - stall_after
        with engine.connect() as conn:
            row_id, ref = read.list_runs(conn)[-1][0], read.list_runs(conn)[-1][1].ref
            events = [e for e in read.fetch_events(conn, row_id, ref) if e.kind == "stall"]
        return late, any("wait_for_allreduce" in e.body for e in events)
    finally:
        proc.kill()
        proc.wait()
        engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stall-after", type=float, default=5.0)
    args = ap.parse_args()
    crash: dict[str, list[float]] = {"host": [], "other host": [], "watch": []}
    stalls, frames = [], []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as d:
            for k, v in crash_latency(Path(d)).items():
                crash[k].append(v)
            late, framed = stall_latency(Path(d), args.stall_after)
            stalls.append(late)
            frames.append(framed)
        print(f"round {i + 1}/{args.repeat} done", file=sys.stderr)

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} (max {max(values):.2f})"

    print("| measure | median s (max) | target |")
    print("|---|---|---|")
    print(f"| kill → `crashed`, reader on the run's host | {cell(crash['host'])} | ≤ 3 |")
    print(
        f"| kill → `crashed`, reader on another host (baseline: heartbeat rule) | "
        f"{cell(crash['other host'])} | (was ~30) |"
    )
    print(f"| kill → `reslog watch` CRASHED line (1 s polls) | {cell(crash['watch'])} | ≤ 2 |")
    print(f"| hang → `stalled`, past stall_after={args.stall_after:g} s | {cell(stalls)} | ≤ 2 |")
    print(f"| stall event names the hanging frame | {sum(frames)}/{len(frames)} | all |")
    ratio = statistics.median(crash["other host"]) / statistics.median(crash["host"])
    print(f"\ncrash shown {ratio:.0f}× sooner on the run's host than by the heartbeat rule")


if __name__ == "__main__":
    main()
