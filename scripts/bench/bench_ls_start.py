"""What a `reslog ls` process costs from start to exit, before (a git revision) and now, in one
run, alternating: wall and CPU seconds of the whole process, the modules it loads, and the
cumulative `python -X importtime` of `reslog.tools.cli` (issue 36: `reslog ls` within a second
while 16 writers are busy; their share of 2 cores is what the process gets).

    .venv/bin/python scripts/bench/bench_ls_start.py --before b57fe1f --runs 10

The store is a fresh one with 20 runs of 10 keys x 1,000 steps, written by the tree under test.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from trees import tree_of

ROOT = Path(__file__).resolve().parents[2]

MAKE = r"""
import sys, reslog
for i in range(20):
    run = reslog.init(project="bench", name=f"r{i}", store=sys.argv[1], system=False)
    for step in range(1000):
        run.log({f"k{j}": step + j for j in range(10)}, step=step)
    run.finish()
"""
COUNT = "import sys\nfrom reslog.tools.cli import main\nprint(len(sys.modules))"


def one_ls(tree: Path, store: Path) -> tuple[float, float]:
    """(wall s, user+system CPU s) of one `python -m reslog.tools.cli ls STORE` process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "reslog.tools.cli", "ls", str(store)],
        check=True,
        env=env,
        cwd=tree,
        capture_output=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_time(tree: Path) -> float:
    """Cumulative seconds of `import reslog.tools.cli` as -X importtime reports it."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import reslog.tools.cli"],
        check=True,
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
    ).stderr
    found = re.search(r"\|\s*(\d+)\s*\|\s*reslog\.tools\.cli\s*$", err, re.M)
    assert found, err[-500:]
    return int(found.group(1)) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="main", help="git revision of the baseline")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ls-") as tmp:
        trees = {"before": tree_of(args.before, Path(tmp) / "before"), "after": ROOT}
        store = Path(tmp) / "runs.db"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", MAKE, str(store)], check=True, env=env)
        got: dict[str, dict[str, list[float]]] = {
            name: {"wall": [], "cpu": [], "imports": []} for name in trees
        }
        for _ in range(args.runs):  # alternating, so that both see the same load
            for name, tree in trees.items():
                wall, cpu = one_ls(tree, store)
                got[name]["wall"].append(wall)
                got[name]["cpu"].append(cpu)
                got[name]["imports"].append(import_time(tree))
        modules = {
            name: subprocess.run(
                [sys.executable, "-c", COUNT],
                check=True,
                env={**os.environ, "PYTHONPATH": str(tree)},
                cwd=tree,
                capture_output=True,
                text=True,
            ).stdout.strip()
            for name, tree in trees.items()
        }
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"`reslog ls` of 20 runs, {args.runs} processes each; before = {args.before}; "
        f"load average {load}"
    )
    print(
        "| | process wall s (median) | max | CPU s (median) | import of reslog.tools.cli s "
        "(median) | modules loaded |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in got.items():
        print(
            f"| {name} | {statistics.median(r['wall']):.2f} | {max(r['wall']):.2f} | "
            f"{statistics.median(r['cpu']):.2f} | {statistics.median(r['imports']):.3f} | "
            f"{modules[name]} |"
        )
    ratio = statistics.median(got["before"]["wall"]) / statistics.median(got["after"]["wall"])
    print(f"process wall, before / after: {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
