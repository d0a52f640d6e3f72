"""history(samples=N) at every length: rows and time for one key of 10^3 to 10^8 points.

    .venv/bin/python scripts/bench/bench_history.py [--max 100000000] [--repeat 5]

Issue 20's target: `reslog.open(store).history(run, key, samples=1000)` of 1,001 ... 10^8 points
gives 500-1,000 exact rows in at most 0.1 s. One store holds a run per length (a key `loss`
logged every step, a one-step spike to 50 in the middle); the longest take minutes to build
and are kept under --dir with a marker for the next run. 63,000 points is near the widest range
read raw (level 1 gives fewer than 500 buckets below 63,872 steps). Each length is asked
whole and for a window of its middle 3 %, by this tree and, in the same run on the same store,
by the code before issue 20 (git archive 46f7156), each in a fresh process, best and median of
--repeat calls. Rows outside 500-1,000, or a maximum that is not the spike, fail the run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

BEFORE = "46f7156"  # main before issue 20 (128-step buckets merged into rows)
LENGTHS = (1_001, 10_000, 63_000, 100_000, 1_000_000, 10_000_000, 100_000_000)
SAMPLES = 1000
CHUNK = 1_000_000  # points a transaction while building
SPIKE = 50.0


def loss(n: int, lo: int, hi: int) -> list[tuple[int, float]]:
    spike = n // 2 + 7
    return [
        (s, SPIKE if s == spike else 2.0 + 1.0 / (1.0 + s / 1000.0) + 0.01 * math.sin(s))
        for s in range(lo, hi)
    ]


def build(path: Path, lengths: tuple[int, ...]) -> None:
    """One run a length, through the writer's own rollup keeper (tests/fixtures/stores.py)."""
    from scale_store import cached

    from tests.fixtures.stores import add_points, make_run, new_store

    def make(path: Path) -> None:
        engine = new_store(path)
        for n in lengths:
            t0 = time.perf_counter()
            run = make_run(engine, name=f"n{n}", points={"loss": loss(n, 0, min(n, CHUNK))})
            for lo in range(CHUNK, n, CHUNK):
                add_points(engine, run.id, {"loss": loss(n, lo, min(n, lo + CHUNK))})
            took = time.perf_counter() - t0
            print(f"built n{n}: {n:,} points in {took:.0f} s", file=sys.stderr)
        engine.dispose()

    cached(path, {"lengths": list(lengths)}, make)


def child(store: str, lengths: list[int], repeat: int) -> dict:
    """Times of history() in this process (the tree on its sys.path)."""
    import reslog

    st = reslog.open(store)
    out = {}
    for n in lengths:
        got = {}
        for name, window in (
            ("whole", {}),
            ("window", {"start": n * 485 // 1000, "stop": n * 515 // 1000}),
        ):
            times, df = [], None
            for _ in range(repeat):
                t0 = time.perf_counter()
                df = st.history(f"n{n}", ["loss"], samples=SAMPLES, **window)
                times.append(time.perf_counter() - t0)
            assert df is not None
            top = float(df["max"].max()) if "max" in df.columns else float(df["loss"].max())
            got[name] = {
                "rows": len(df),
                "best_s": min(times),
                "median_s": statistics.median(times),
                "max": top,
            }
        out[str(n)] = got
    return out


def run_child(tree: Path, store: Path, lengths: tuple[int, ...], repeat: int) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from bench_history import child;"
        " print(json.dumps(child(sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]))))"
    )
    argv = [sys.executable, "-c", code, str(HERE), str(store), json.dumps(lengths), str(repeat)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def timing(result: dict) -> str:
    return f"{result['best_s'] * 1000:.1f} ms ({result['median_s'] * 1000:.1f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max", type=int, default=LENGTHS[-1], help="longest run (points)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--dir", type=Path, default=Path("/tmp/reslog-history"))
    p.add_argument("--no-before", action="store_true", help="skip the old code's baseline")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))  # here only: a child imports the tree it measures
    lengths = tuple(n for n in LENGTHS if n <= args.max)
    args.dir.mkdir(parents=True, exist_ok=True)
    store = args.dir / "history.db"
    build(store, lengths)
    from scale import code_tree  # the old tree, unpacked once (git archive)

    trees = {"this tree": ROOT}
    if not args.no_before:
        trees[BEFORE] = code_tree(args.dir, BEFORE)
    results = {name: run_child(tree, store, lengths, args.repeat) for name, tree in trees.items()}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"history(samples={SAMPLES}), best (median) of {args.repeat}; load average {load}\n")
    head = "| points | range | rows | time |"
    head += f" {BEFORE}: rows | time |" if BEFORE in trees else ""
    print(head)
    print("| ---: " * (head.count("|") - 1) + "|")
    failed = []
    for n in lengths:
        for part in ("whole", "window"):
            now = results["this tree"][str(n)][part]
            span = n if part == "whole" else n * 515 // 1000 - n * 485 // 1000
            cells = [
                f"{n:,}",
                "all" if part == "whole" else f"middle 3 % ({span:,})",
                f"{now['rows']:,}",
                timing(now),
            ]
            if BEFORE in results:
                old = results[BEFORE][str(n)][part]
                cells += [f"{old['rows']:,}", timing(old)]
            print("| " + " | ".join(cells) + " |")
            lo, hi = (span, span) if span <= SAMPLES else (-(-SAMPLES // 2), SAMPLES)
            if not lo <= now["rows"] <= hi:
                failed.append(f"{n} {part}: {now['rows']} rows, not {lo}-{hi}")
            if part == "whole" and now["max"] != SPIKE:
                failed.append(f"{n}: the maximum is {now['max']}, not the spike")
    worst = max(
        results["this tree"][str(n)][p]["median_s"] for n in lengths for p in ("whole", "window")
    )
    print(f"\nslowest median: {worst * 1000:.1f} ms (target 100 ms)")
    for line in failed:
        print("FAILED:", line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
