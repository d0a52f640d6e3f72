"""`reslog.open().points(run)` of a run of many short keys: what a scan pays a key (a frame,
a chunk directory, a read transaction) beside its points, for this tree and the code before.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_scan_keys.py [--keys 100] [--steps 2000]
        [--repeats 5] [--before REV]

One run written through reslog, `--keys` keys logged together every step for `--steps` steps
(one keyset, random values). Each tree reads the same store in its own child process
(`--before REV`: `git archive REV`, alternated with this tree `--rounds` times); printed:
process CPU of `points(run)`, ns a point, best and median of `--repeats`, and the ratio.
The frames of the two trees are checked to hold the same points.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from trees import tree_of

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, time, hashlib
import reslog
path, repeats = sys.argv[1], int(sys.argv[2])
with reslog.open(path) as st:
    df = st.points("keys")
    took = []
    for _ in range(repeats):
        t = time.process_time()
        df = st.points("keys")
        took.append(time.process_time() - t)
digest = hashlib.sha256(df["value"].to_numpy().tobytes() + df["key"].str.cat().encode()).hexdigest()
print(json.dumps({"n": len(df), "took": took, "digest": digest}))
"""


def measure(tree: Path, store: Path, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(store), str(repeats)],
        env=env,
        cwd=str(tree),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", help="git revision of the code before")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import reslog

    with tempfile.TemporaryDirectory(prefix="bench-scan-keys-") as tmp:
        store = Path(tmp) / "keys.db"
        run = reslog.init(project="bench", name="keys", store=store, system=False)
        rng = random.Random(0)
        for s in range(args.steps):
            run.log({f"k/{j:04d}": rng.random() for j in range(args.keys)}, step=s)
        assert run.finish(timeout=600)
        trees = {"this tree": ROOT}
        if args.before:
            trees = {f"before ({args.before})": tree_of(args.before, Path(tmp) / "before"), **trees}
        got: dict[str, list[float]] = {name: [] for name in trees}
        digests = set()
        n = 0
        for _ in range(args.rounds):
            for name, tree in trees.items():
                r = measure(tree, store, args.repeats)
                n = r["n"]
                digests.add(r["digest"])
                got[name] += [t / n * 1e9 for t in r["took"]]
        assert len(digests) == 1, "the trees read different points"
        load = os.getloadavg()[0]
        print(
            f"points(run): {args.keys} keys x {args.steps:,} steps = {n:,} points, one keyset;"
            f" load average {load:.1f} at the end"
        )
        print("| tree | best ns/pt | median ns/pt |")
        print("| --- | ---: | ---: |")
        for name, ts in got.items():
            print(f"| {name} | {min(ts):,.0f} | {statistics.median(ts):,.0f} |")
        if args.before:
            before, after = (statistics.median(ts) for ts in got.values())
            print(f"median ratio, before / this tree: {before / after:.2f}x")


if __name__ == "__main__":
    main()
