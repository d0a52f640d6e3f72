"""Many processes writing one SQLite store: how long each `log()` call takes, lock warnings, and
how long `reslog ls` takes meanwhile, for the code before (a git revision, default `main`) and
this tree, in one run (issue 36, finding 8).

    .venv/bin/python scripts/bench/bench_sqlite_writers.py  # 16 x 100 keys x 100 steps/s, 60 s
    .venv/bin/python scripts/bench/bench_sqlite_writers.py --writers 8 --seconds 20

Each writer is its own process: `reslog.init(store=FILE, system=False)`, then one `log()` of
`--keys` scalars per step at `--steps` steps a second for `--seconds` (the dict built before the
clock starts, `time.perf_counter()` around the call alone), then `finish()`. Meanwhile the parent
runs `reslog ls FILE` every `--ls-every` seconds, from when every writer logs, in a fresh process
and reports its wall time, and the time of `main(["ls", FILE])` inside that process (without the
interpreter's start). With `--diagnose`, every writer records its collector's passes
(gc.callbacks) and says how many slow calls overlapped one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from common import start_writers  # noqa: E402
from trees import tree_of  # noqa: E402

CHILD = r"""
import gc, json, sys, threading, time
import reslog
store, index, keys, rate, seconds, diagnose = sys.argv[1:7]
index, keys, rate, seconds = int(index), int(keys), float(rate), float(seconds)
passes = []
if diagnose == "1":
    started = {}
    def on_gc(phase, info):
        now = time.perf_counter()
        name = threading.current_thread().name
        if phase == "start":
            started[name] = now
        else:
            passes.append((started.pop(name, now), now, info["generation"], name))
    gc.callbacks.append(on_gc)
names = [f"train/k{j}" for j in range(keys)]
run = reslog.init(project="bench", name=f"w{index}", store=store, system=False)
steps = int(rate * seconds)
took, slow = [], []
pc = time.perf_counter
queued = {"core": 0, "asleep": 0}  # slow calls: mostly waiting for a core, or asleep (GIL, lock)
stat = open("/proc/thread-self/schedstat", "rb") if diagnose == "1" else None
def runq():
    stat.seek(0)
    return int(stat.read().split()[1]) / 1e9
# The longest stretch this writer had points waiting and committed none: its wait for a turn.
turn = {"longest": 0.0, "done": False}
def watch_turns():
    w, since, seen = run._writer, None, -1
    while not turn["done"]:
        now = time.monotonic()
        if w.committed != seen or not w.pending_points():
            seen, since = w.committed, now
        turn["longest"] = max(turn["longest"], now - since)
        time.sleep(0.05)
threading.Thread(target=watch_turns, daemon=True).start()
open(f"{store}.logging{index}", "w").close()  # the parent times `reslog ls` from now on
t0 = time.monotonic()
for step in range(steps):
    d = {k: step + j / 100 for j, k in enumerate(names)}
    q0 = runq() if stat else 0.0
    a = pc()
    run.log(d, step=step)
    b = pc()
    took.append(b - a)
    if b - a > 0.05:
        slow.append((a, b))
        if stat:
            queued["core" if runq() - q0 > (b - a) / 2 else "asleep"] += 1
    ahead = t0 + (step + 1) / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
f0 = pc()
ok = run.finish(timeout=120)
turn["done"] = True
gc_overlap = {}
for a, b in slow:
    hit = [p for p in passes if p[0] < b and p[1] > a]
    key = "none" if not hit else f"gen{max(p[2] for p in hit)} in " + hit[0][3]
    gc_overlap[key] = gc_overlap.get(key, 0) + 1
gc_overlap.update({f"waiting for a core": queued["core"], "asleep": queued["asleep"]})
print(json.dumps({"took": took, "ok": ok, "finish_s": pc() - f0, "gc": gc_overlap,
                  "turn_s": turn["longest"], "lock_waits": getattr(run._writer, "lock_waits", 0),
                  "committed": run._writer.committed, "logged": run._writer.logged}))
"""

LS = r"""
import contextlib, io, sys, time
t0 = time.perf_counter()
from reslog.tools.cli import main
t1 = time.perf_counter()
def runq():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9
out = io.StringIO()
c0, q0 = time.process_time(), runq()
with contextlib.redirect_stdout(out):
    rc = main(["ls", sys.argv[1]])
took, cpu, queued = time.perf_counter() - t1, time.process_time() - c0, runq() - q0
print(f"{rc} {t1 - t0:.4f} {took:.4f} {cpu:.4f} {queued:.4f}", file=sys.stderr)
"""


def one(tree: Path, store: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "default"}
    # The store first (one process), as a training job's launcher would have it.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import reslog,sys; reslog.init(store=sys.argv[1], system=False).finish()",
            str(store),
        ],
        check=True,
        env=env,
        cwd=tree,
    )
    argv = [str(args.keys), str(args.steps), str(args.seconds), "1" if args.diagnose else "0"]
    procs = start_writers(CHILD, str(store), argv, args.writers, tree, env)
    ls_wall: list[float] = []
    ls_work: list[float] = []
    ls_asleep: list[float] = []
    stop = threading.Event()

    def lister() -> None:
        # While the writers are busy: from when every one of them logs, not while 16
        # interpreters start (a `reslog ls` then took 1.5-1.7 s, every later one ~0.2 s).
        while not stop.is_set() and not all(
            Path(f"{store}.logging{i}").exists() for i in range(args.writers)
        ):
            time.sleep(0.05)
        time.sleep(args.ls_every)
        while not stop.is_set():
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", LS, str(store)],
                env=env,
                cwd=tree,
                capture_output=True,
                text=True,
            )
            ls_wall.append(time.perf_counter() - t0)
            with_rc = done.stderr.strip().splitlines()[-1].split() if done.stderr.strip() else []
            if len(with_rc) == 5 and with_rc[0] == "0":
                ls_work.append(float(with_rc[2]))
                # The command's time not spent on a core or waiting for one: asleep on a lock.
                ls_asleep.append(float(with_rc[2]) - float(with_rc[3]) - float(with_rc[4]))
            stop.wait(args.ls_every)

    thread = threading.Thread(target=lister, daemon=True)
    thread.start()
    took: list[float] = []
    locked = gave_up = finish_max = turn_max = 0.0
    lock_waits = 0
    gc_hits: dict[str, int] = {}
    lost = 0
    said: list[str] = []
    for proc in procs:
        out, err = proc.communicate()
        # The writer's own "cannot write ... (database is locked)" warning; a finish() that ran
        # out of time names the lock as its last error too, and is counted apart.
        warned = [line for line in err.splitlines() if "locked" in line and "gave up" not in line]
        locked += bool(warned)
        gave_up += "gave up" in err
        if warned and not said:
            said.append(warned[0])
        lines = out.strip().splitlines()
        if proc.returncode != 0 or not lines:
            print(err[-2000:], file=sys.stderr)
            continue
        r = json.loads(lines[-1])
        took.extend(r["took"])
        finish_max = max(finish_max, r["finish_s"])
        turn_max = max(turn_max, r.get("turn_s", float("nan")))
        lock_waits += r.get("lock_waits", 0)
        lost += r["logged"] - r["committed"]
        for k, v in r["gc"].items():
            gc_hits[k] = gc_hits.get(k, 0) + v
    stop.set()
    thread.join()
    took.sort()
    return {
        "calls": len(took),
        "over50": sum(t > 0.05 for t in took),
        "max_ms": took[-1] * 1e3 if took else float("nan"),
        "p99_us": took[int(len(took) * 0.99)] * 1e6 if took else float("nan"),
        "median_us": statistics.median(took) * 1e6 if took else float("nan"),
        "locked": int(locked),
        "gave_up": int(gave_up),
        "finish_max": finish_max,
        "turn_max": turn_max,
        "lock_waits": lock_waits,
        "lost": lost,
        "ls_wall_max": max(ls_wall, default=float("nan")),
        "ls_wall_median": statistics.median(ls_wall) if ls_wall else float("nan"),
        "ls_work_max": max(ls_work, default=float("nan")),
        "ls_work_median": statistics.median(ls_work) if ls_work else float("nan"),
        "ls_runs": len(ls_wall),
        "ls_asleep_max": max(ls_asleep, default=float("nan")),
        "gc": gc_hits,
        "said": said[0][:300] if said else "",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--keys", type=int, default=100, help="scalars per log() call")
    ap.add_argument("--steps", type=float, default=100.0, help="log() calls a second a writer")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--ls-every", type=float, default=2.0)
    ap.add_argument("--before", default="main", help="git revision of the baseline")
    ap.add_argument("--variants", default="before,after")
    ap.add_argument("--diagnose", action="store_true")
    args = ap.parse_args()
    got = {}
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-") as tmp:
        for name in args.variants.split(","):
            tree = ROOT if name == "after" else tree_of(args.before, Path(tmp) / name)
            store = Path(tmp) / f"{name}.db"
            got[name] = one(tree, store, args)
            print(f"{name}: {got[name]}", file=sys.stderr, flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{args.writers} writer processes x {args.keys} keys x {args.steps:.0f} steps/s x "
        f"{args.seconds:.0f} s into one SQLite file; before = {args.before}; load average {load}"
    )
    print(
        "| | log() calls | over 50 ms | max ms | p99 µs | median µs | 'locked' warnings "
        "(processes) | longest wait for a turn s | lock waits | finish() max s | finish() gave up "
        "(processes) | lost | "
        "reslog ls max s (process) | ls median s (process) | ls max s (command) "
        "| ls median s (command) | ls max s asleep (command) | ls runs |"
    )
    print("| --- |" + " ---: |" * 18)
    for name, r in got.items():
        print(
            f"| {name} | {r['calls']:,} | {r['over50']} | {r['max_ms']:.1f} | {r['p99_us']:.0f} "
            f"| {r['median_us']:.1f} | {r['locked']} | {r['turn_max']:.1f} | {r['lock_waits']:,} "
            f"| {r['finish_max']:.1f} | {r['gave_up']} | {r['lost']:,} | {r['ls_wall_max']:.2f} | "
            f"{r['ls_wall_median']:.2f} | {r['ls_work_max']:.3f} | {r['ls_work_median']:.3f} | "
            f"{r['ls_asleep_max']:.3f} | {r['ls_runs']} |"
        )
    for name, r in got.items():
        if r["said"]:
            print(f"{name}, first 'locked' line: {r['said']}")
        if args.diagnose:
            print(f"{name}: slow calls by overlapping collector pass: {r['gc']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
