"""`reslog import parquet`: peak memory against the file's size (issue 36's target: 3M rows in
<= 200 MB RSS), against the importer before it streamed (commit 2e166ef: the whole file read
into Python lists), in one run.

    .venv/bin/python scripts/bench/bench_import_parquet.py                  # 1M and 3M rows
    .venv/bin/python scripts/bench/bench_import_parquet.py --rows 300000 1000000

The files are long tables as `reslog export --format parquet` writes them (run, uid, key,
step, wall, value; 4 keys of one run, row groups of 100,000), written once into --workdir.
Each import runs in a fresh process into a new store; its peak RSS is the child's ru_maxrss.
The baseline is the same command from a copy of 2e166ef's reslog and schema (git archive).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE_COMMIT = "2e166ef"

GEN = """
import sys
import pyarrow as pa, pyarrow.parquet as pq
n = int(sys.argv[2])
schema = pa.schema([("run", pa.string()), ("uid", pa.string()), ("key", pa.string()),
                    ("step", pa.int64()), ("wall", pa.float64()), ("value", pa.float64())])
with pq.ParquetWriter(sys.argv[1], schema) as w:
    for start in range(0, n, 100_000):
        rows = range(start, min(n, start + 100_000))
        w.write_table(pa.table({
            "run": ["bench"] * len(rows), "uid": ["b" * 32] * len(rows),
            "key": [f"train/k{i % 4}" for i in rows], "step": [i // 4 for i in rows],
            "wall": [1.7e9 + i * 0.01 for i in rows], "value": [i * 0.001 for i in rows],
        }, schema=schema))
"""

# Runs the CLI, then prints its own peak RSS (a process' ru_maxrss is its high-water mark).
RUN = """
import resource, sys, time
from reslog.tools.cli import main
t = time.perf_counter()
code = main(["import", "parquet", sys.argv[1], "--store", sys.argv[2]])
elapsed = time.perf_counter() - t
import reslog
assert reslog.__file__.startswith(sys.path[1]), (reslog.__file__, sys.path[:3])
print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, elapsed)
"""


def measure(pythonpath: Path, file: Path, store: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    # cwd: `-c` puts the current folder first on sys.path, ahead of PYTHONPATH
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(file), str(store)],
        env=env,
        cwd=store.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    code, rss, elapsed = done.stdout.strip().splitlines()[-1].split()
    if code != "0":
        raise SystemExit(f"import failed: {done.stdout}{done.stderr}")
    return float(rss), float(elapsed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 3_000_000])
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "reslog-bench-parquet"
    )
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    base = args.workdir / f"reslog-{BASELINE_COMMIT}"
    if not base.exists():
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BASELINE_COMMIT, "reslog", "schema"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
    print(
        f"{'rows':>10} {'file MB':>8} {'before MB':>10} {'now MB':>8} {'ratio':>6} "
        f"{'before s':>9} {'now s':>7}"
    )
    for n in args.rows:
        file = args.workdir / f"long-{n}.parquet"
        if not file.exists():
            subprocess.run([sys.executable, "-c", GEN, str(file), str(n)], check=True)
        results = []
        for code in (base, ROOT):
            store = args.workdir / "store.db"
            for leftover in args.workdir.glob("store.db*"):
                leftover.unlink()
            results.append(measure(code, file, store))
        (before, t_before), (now, t_now) = results
        print(
            f"{n:>10,} {file.stat().st_size / 2**20:>8.1f} {before:>10.0f} {now:>8.0f} "
            f"{before / now:>5.1f}x {t_before:>9.1f} {t_now:>7.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
