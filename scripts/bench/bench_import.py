"""`reslog import tensorboard`: 1M scalars (issue 9's target: <= 10 s), against TensorBoard's own
loader reading the same files, in one run.

    .venv/bin/python scripts/bench/bench_import.py              # 1,000,000 scalars, ~1-2 min
    .venv/bin/python scripts/bench/bench_import.py --scalars 200000

The event files are written once into --workdir (kept between runs) by tensorboard's
EventFileWriter, one scalar per event over 8 tags: the layout `SummaryWriter.add_scalar` writes
(SummaryWriter itself takes ~500 us a scalar: 8 minutes for 1M). Each measurement runs in a
fresh process:
  reslog parse    read_logdir() only (the event files into memory, no store)
  reslog import   `reslog import tensorboard LOGDIR --store NEW.db`, process start to exit
  tensorboard     EventAccumulator(size_guidance={"scalars": 0}).Reload() + Scalars() per tag
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

GEN = """
import sys
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
w = EventFileWriter(sys.argv[1])
n = int(sys.argv[2])
Value, Summary, Event = summary_pb2.Summary.Value, summary_pb2.Summary, event_pb2.Event
for s in range(n // 8):
    for i in range(8):
        v = Value(tag=f"train/k{i}", simple_value=s * 0.001 + i)
        w.add_event(Event(wall_time=1.7e9 + s * 0.01, step=s, summary=Summary(value=[v])))
w.close()
"""

PARSE = """
import sys, time
from pathlib import Path
from reslog.tools.importers.tensorboard import read_logdir
t = time.perf_counter()
n = sum(run.points() for run in read_logdir(Path(sys.argv[1]), "bench"))
print(n, time.perf_counter() - t)
"""

BASELINE = """
import sys, time
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
t = time.perf_counter()
ea = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
ea.Reload()
n = sum(len(ea.Scalars(tag)) for tag in ea.Tags()["scalars"])
print(n, time.perf_counter() - t)
"""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    return e


def timed(code: str, *args: str) -> tuple[int, float]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env(), check=True
    ).stdout.split()
    return int(out[0]), float(out[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scalars", type=int, default=1_000_000)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "reslog-bench-import"))
    args = ap.parse_args()
    logdir = Path(args.workdir) / f"tb-{args.scalars}"
    if not logdir.exists():
        print(f"writing {args.scalars:,} scalars into {logdir} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-c", GEN, str(logdir), str(args.scalars)], check=True)
    size = sum(f.stat().st_size for f in logdir.iterdir())
    n_parse, t_parse = timed(PARSE, str(logdir))
    store = Path(args.workdir) / "import.db"
    for p in (store, Path(f"{store}-wal"), Path(f"{store}-shm")):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    cmd = ["import", "tensorboard", str(logdir), "--store", str(store)]
    subprocess.run(
        [sys.executable, "-m", "reslog.tools.cli", *cmd], check=True, env=env(), capture_output=True
    )
    t_import = time.perf_counter() - t0
    n_base, t_base = timed(BASELINE, str(logdir))
    assert n_parse == n_base == args.scalars, (n_parse, n_base)
    print(
        f"`python scripts/bench/bench_import.py --scalars {args.scalars}`: {args.scalars:,} "
        f"scalars, 1 per event, 8 tags, {size / 1e6:.1f} MB of event files\n"
    )
    print("| reader | seconds | scalars/s | × tensorboard |")
    print("| --- | ---: | ---: | ---: |")
    for name, t in (
        ("reslog parse (read_logdir, no store)", t_parse),
        ("reslog import (CLI, into a new SQLite store, process start to exit)", t_import),
        ("tensorboard EventAccumulator (read only)", t_base),
    ):
        print(f"| {name} | {t:.2f} | {args.scalars / t:,.0f} | {t / t_base:.2f} |")
    target = "met" if t_import <= 10.0 * args.scalars / 1_000_000 else "NOT met"
    print(f"\ntarget: 1M scalars in <= 10 s: {t_import:.2f} s for {args.scalars:,} ({target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
