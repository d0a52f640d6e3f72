"""`resplot sync` of 1M points, this tree against the code before chunks travelled (main at
a7f5172, which fetched points as rows and wrote them again through the writer), in one run.

The source is written by reslog itself: one run logging bench_codec.py's 20 training keys every
step (float32 losses and norms, a warmup + cosine lr, throughput and timings, counters) for
50,000 steps, 1,000,000 points in sealed chunks of a keyset. Each tree syncs a copy of it into
a fresh mirror (the first sync), then 10,000 more points logged by the resumed run (an incremental
sync). Each sync runs in a child process with PYTHONPATH at its tree, through the real agent
as a local subprocess; the client asks for compressed replies as SSH sources do, so "bytes
received" is what would cross an SSH connection. CPU: the mirror's process and the agent's.

    .venv/bin/python scripts/bench/bench_sync.py [--steps 50000] [--keys 20] [--repeat 2]
        [--before /tmp/sync_before]   # made with: git archive a7f5172 | tar -x -C DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "scripts" / "bench"))

import numpy as np  # noqa: E402
from bench_codec import training  # noqa: E402

import reslog  # noqa: E402

BEFORE = "a7f5172"
DRIVER = """
import json, resource, sys, time
import resplot.sources.client as client_mod
clients = []
_init = client_mod.AgentClient.__init__
def init(self, *args, **kw):
    kw["compress"] = True  # as SSH sources ask
    _init(self, *args, **kw)
    clients.append(self)
client_mod.AgentClient.__init__ = init
from resplot.sources.spec import parse_spec
from resplot.sources.sync import Mirror
t0, c0 = time.perf_counter(), time.process_time()
with Mirror(sys.argv[2]) as m:
    report = m.sync(parse_spec(sys.argv[1]))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"points": report.points, "wall": wall, "cpu": cpu,
                  "agent_cpu": kids.ru_utime + kids.ru_stime,
                  "received": sum(c.bytes_received for c in clients),
                  "sent": sum(c.bytes_sent for c in clients)}))
"""


def log_steps(run, steps: range, total: int, seed: int) -> None:
    """bench_codec.py's 20 training keys (values as real loops produce them), logged a step a
    call, steps `steps` of a run `total` steps long."""
    _s, _walls, keys = training(total + steps.stop, np.random.default_rng(seed))
    columns = {name: values.tolist() for name, values in keys.items()}
    for s in steps:
        run.log({name: values[s] for name, values in columns.items()}, step=s)


def make_source(path: Path, steps: int) -> str:
    run = reslog.init(project="bench", name="sync", store=str(path), system=False)
    log_steps(run, range(steps), steps, 1)
    run.finish()
    return run.uid


def add_points(path: Path, uid: str, first: int, steps: int, total: int) -> None:
    run = reslog.init(store=str(path), resume=uid, system=False)
    log_steps(run, range(first, first + steps), total, 2)
    run.finish()


def backup(src: Path, dst: Path) -> None:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)


def sync(tree: Path, src: Path, mirror: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, str(src), str(mirror)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    with sqlite3.connect(mirror) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    result["mirror_bytes"] = mirror.stat().st_size
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50_000, help="steps of 20 keys")
    ap.add_argument("--more", type=int, default=500, help="steps added for the incremental sync")
    ap.add_argument("--repeat", type=int, default=2, help="best of")
    ap.add_argument("--before", type=Path, default=None, help="the code before (a7f5172)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    before = args.before
    if before is None or not (before / "resplot" / "sync.py").exists():
        before = before or work / "before"
        before.mkdir(parents=True, exist_ok=True)
        data = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BEFORE], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=data, check=True)
    src = work / "src.db"
    t0 = time.perf_counter()
    uid = make_source(src, args.steps)
    points = args.steps * 20
    print(
        f"source: {points:,} points written by reslog in {time.perf_counter() - t0:.1f} s, "
        f"{src.stat().st_size / 2**20:.1f} MiB"
    )
    trees = {"before (a7f5172, rows)": before, "this tree (chunks)": ROOT}
    best: dict[tuple[str, str], dict] = {}
    for rep in range(args.repeat):
        for i, (name, tree) in enumerate(trees.items()):
            copy = work / f"src-{rep}-{i}.db"
            backup(src, copy)
            mirror = work / f"mirror-{rep}-{i}.db"
            first = sync(tree, copy, mirror)
            add_points(copy, uid, args.steps, args.more, args.steps)
            more = sync(tree, copy, mirror)
            for what, r in (("first sync", first), ("incremental", more)):
                old = best.get((name, what))
                if old is None or r["wall"] < old["wall"]:
                    best[(name, what)] = r
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"best of {args.repeat}; load average {load}; {os.cpu_count()} CPUs")
    print(
        "| sync | tree | points | wall s | mirror CPU s | agent CPU s | received MB | "
        "bytes/point | mirror MiB |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for what in ("first sync", "incremental"):
        for name in trees:
            r = best[(name, what)]
            print(
                f"| {what} | {name} | {r['points']:,} | {r['wall']:.2f} | {r['cpu']:.2f} | "
                f"{r['agent_cpu']:.2f} | {r['received'] / 1e6:.2f} | "
                f"{r['received'] / max(1, r['points']):.2f} | "
                f"{r['mirror_bytes'] / 2**20:.1f} |"
            )
    print()
    print("| sync | wall | mirror CPU | agent CPU | bytes received |")
    print("| --- | ---: | ---: | ---: | ---: |")
    old_name, new_name = list(trees)
    for what in ("first sync", "incremental"):
        a, b = best[(old_name, what)], best[(new_name, what)]
        print(
            f"| {what}: before / now | {a['wall'] / b['wall']:.1f}x | "
            f"{a['cpu'] / b['cpu']:.1f}x | {a['agent_cpu'] / max(b['agent_cpu'], 1e-9):.1f}x | "
            f"{a['received'] / b['received']:.1f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
