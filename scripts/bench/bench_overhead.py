"""Step time of the trainer with reslog logging on vs off, interleaved in one process.

    .venv/bin/python scripts/bench/bench_overhead.py [--config trainer/configs/debug.toml]
        [--chunk 10] [--pairs 40] [--threads 1]

One trainer, one reslog run; its logger is switched between the real one ("on": every step
train/loss, lr, grad_norm, tokens, tokens_per_s (+ mfu on a GPU) and the five time/* keys, into a
SQLite store, with the 1 s system sampler running) and the no-op one ("off") every ``--chunk``
steps, in ABBA order, so drift on a shared machine hits both. Reported: the median of the paired
on/off chunk ratios, and the training thread's own time inside the logging calls (robust to
noise). The sampler and writer threads keep running during "off" chunks (they are one run), so
their cost shows only through the in-thread time and the CPU they take. Target: <= 1 %.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from trainer.config import load_config  # noqa: E402
from trainer.metrics import Logger, NullLogger  # noqa: E402
from trainer.train import Trainer  # noqa: E402

# The measured loop's overrides, one list with the GPU checks' (scripts/gpu/speed.py times the
# same on/off loop on a GPU): gpucheck.py imports only the standard library at load.
sys.path.insert(0, str(ROOT / "scripts" / "gpu"))
from gpucheck import JUST_STEPS  # noqa: E402


class TimedLogger(Logger):
    """Forwards to a logger and adds up the training thread's time inside its calls."""

    def __init__(self, inner: Logger):
        self.inner, self.uid, self.seconds = inner, inner.uid, 0.0

    def log(self, metrics, step):
        t0 = time.perf_counter()
        self.inner.log(metrics, step)
        self.seconds += time.perf_counter() - t0

    def event(self, kind, title, body="", level="info"):
        t0 = time.perf_counter()
        self.inner.event(kind, title, body, level)
        self.seconds += time.perf_counter() - t0

    def summary(self, values):
        self.inner.summary(values)

    def close(self, status=None):
        self.inner.close(status)


def chunk(trainer: Trainer, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.log_step(*trainer.train_step())
    return (time.perf_counter() - t0) / steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "trainer/configs/debug.toml")
    p.add_argument("--chunk", type=int, default=10, help="steps per timed chunk")
    p.add_argument("--pairs", type=int, default=40, help="on/off chunk pairs")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    total = 2 * args.chunk * (args.pairs + 1)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(
            args.config,
            [
                "--train.steps",
                str(total),
                *JUST_STEPS,
                "--train.threads",
                str(args.threads),
                "--logging.system_interval",
                "1.0",
                "--logging.project",
                "bench-overhead",
                "--logging.store",
                str(Path(tmp) / "reslog.db"),
            ],
        )
        trainer = Trainer(cfg)
        on, off = TimedLogger(trainer.logger), NullLogger()
        try:
            trainer.logger = on
            chunk(trainer, args.chunk)  # warm-up
            trainer.logger = off
            chunk(trainer, args.chunk)
            on.seconds = 0.0
            t_on, t_off, ratios = [], [], []
            for i in range(args.pairs):
                order = (on, off) if i % 2 == 0 else (off, on)
                got = {}
                for logger in order:
                    trainer.logger = logger
                    got[logger is on] = chunk(trainer, args.chunk)
                t_on.append(got[True])
                t_off.append(got[False])
                ratios.append(got[True] / got[False])
        finally:
            trainer.logger = on
            trainer.close()

    med_on, med_off = statistics.median(t_on), statistics.median(t_off)
    in_thread = on.seconds / (args.pairs * args.chunk)
    paired = (statistics.median(ratios) - 1) * 100
    print(
        f"config {args.config.name}, {args.pairs} pairs of {args.chunk}-step chunks "
        f"(ABBA order), torch {torch.__version__}, {args.threads} thread(s)"
    )
    print("| logging | median ms/step | min ms/step |")
    print("|---|---|---|")
    print(f"| off (no-op logger) | {med_off * 1e3:.3f} | {min(t_off) * 1e3:.3f} |")
    print(
        f"| on (reslog every step + 1 s telemetry) | {med_on * 1e3:.3f} | {min(t_on) * 1e3:.3f} |"
    )
    print()
    print(f"paired overhead (median of on/off chunk ratios): {paired:+.2f} %  (target <= 1 %)")
    print(
        f"training-thread time inside log()/event(): {in_thread * 1e6:.1f} us/step = "
        f"{in_thread / med_off * 100:.2f} % of the step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
