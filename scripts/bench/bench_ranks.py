"""What every rank logging its own step phases costs each rank (issue 24): CPU per step, against
the same loop without logging, with 1, 4 and 8 ranks writing into one host's SQLite store.

    .venv/bin/python scripts/bench/bench_ranks.py [--ranks 1 4 8] [--steps 1000] [--repeats 2]

Each rank is a process doing what the trainer does per step on every rank: the step timer's
seven marks, and (logging on) one `run.log()` of the seven `time/*` phases into its own run of
the job (group, rank, world size; no telemetry sampler: the trainer runs one per host, on local
rank 0, whatever the number of ranks). Time is compressed 10x so the benchmark is short but the
writer sees what it sees in training: a step every 10 ms and a flush every 0.1 s, the 10 steps a
flush of a 100 ms step with the default 1 s flush interval. Measured per rank: the process's CPU
time per step (all its threads: the training thread's log() calls, the writer converting,
inserting and folding rollups, the heartbeat), on minus off, and the training thread's own time
inside log(). Off and on runs alternate (off, on, on, off, ...), so drift hits both. Target: at
most 1 % of a 100 ms step, i.e. 1 ms of CPU per step per rank.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PHASES = ("data", "h2d", "forward", "backward", "comm", "optimizer")
PERIOD_S = 0.010  # one step (a 100 ms step, 10x compressed)
FLUSH_S = 0.1  # the writer's interval (1 s, 10x compressed)


def rank_loop(store: str, rank: int, world: int, steps: int, log: bool, out) -> None:
    import reslog

    run = None
    if log:
        run = reslog.init(
            project="bench-ranks",
            name=f"bench-rank{rank}",
            store=store,
            group=f"job-{world}",
            rank=rank,
            world_size=world,
            system=False,
            flush_interval=FLUSH_S,
        )
    keys = [f"time/{p}" for p in PHASES]
    in_log = 0.0
    cpu0, t0 = time.process_time(), time.perf_counter()
    for step in range(1, steps + 1):
        marks = [time.perf_counter() for _ in range(len(PHASES) + 1)]  # the step timer
        if run is not None:
            phases = {k: marks[i + 1] - marks[i] for i, k in enumerate(keys)}
            phases["time/step"] = marks[-1] - marks[0]
            a = time.perf_counter()
            run.log(phases, step=step)
            in_log += time.perf_counter() - a
        wait = t0 + step * PERIOD_S - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
    if run is not None:
        run.finish()  # the last flush belongs to the cost
    out.put((time.process_time() - cpu0, in_log))


def one(store: str, world: int, steps: int, log: bool) -> tuple[float, float]:
    """(median CPU seconds per step per rank, median in-log() seconds per step) of one job."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=rank_loop, args=(store, r, world, steps, log, out)) for r in range(world)
    ]
    for p in procs:
        p.start()
    got = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    cpu = statistics.median(c for c, _ in got) / steps
    inside = statistics.median(i for _, i in got) / steps
    return cpu, inside


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 4, 8])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=2, help="off/on pairs per rank count")
    args = p.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.ranks:
            off, on, inside = [], [], []
            for i in range(args.repeats):
                for log in (False, True) if i % 2 == 0 else (True, False):
                    store = str(Path(tmp) / f"ranks{world}-{i}.db")
                    cpu, in_log = one(store, world, args.steps, log)
                    (on if log else off).append(cpu)
                    if log:
                        inside.append(in_log)
            cost = statistics.median(on) - statistics.median(off)
            rows.append((world, statistics.median(off), statistics.median(on), cost, inside))

    print(
        f"{args.steps} steps per rank, a step every {PERIOD_S * 1e3:.0f} ms and a flush every "
        f"{FLUSH_S:.1f} s (a 100 ms step with 1 s flushes, 10x compressed), "
        f"{args.repeats} off/on pairs, median rank"
    )
    print(
        "| ranks on the host | CPU/step off (us) | CPU/step on (us) | logging CPU/step/rank (us) "
        "| of a 100 ms step | in log() (us) |"
    )
    print("|---|---|---|---|---|---|")
    for world, off_cpu, on_cpu, cost, inside in rows:
        print(
            f"| {world} | {off_cpu * 1e6:.0f} | {on_cpu * 1e6:.0f} | {cost * 1e6:.0f} "
            f"| {cost / 0.1 * 100:.2f} % | {statistics.median(inside) * 1e6:.1f} |"
        )
    print("\ntarget: <= 1 % of a 100 ms step (1,000 us of CPU per step per rank)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
