"""GPU checks 3, 5 and 6 in one process (one torch.compile): the ~125M LLaMA config in bf16 on
real token data, as the trainer runs it.

- peak: a large bf16 matmul, timed with CUDA events: the card's dense bf16 FLOP/s, measured here.
- speed (5): tokens/s over ``--steps`` steps (synchronised at both ends), MFU against the
  measured peak and against the datasheet peak the trainer logs; target ``--target-mfu``. Below
  it, a torch.profiler breakdown of a few steps (kernel time by kind) goes into the report.
- timers (3): the CUDA-event data/forward/backward/optimizer times of those steps against the
  wall time per step: equal within 5 %.
- overhead (6): chunks of steps with reslog on (a run with 1 s telemetry, the trainer's
  CUDA-event timers, 20 scalars a step) and off (no-op logger, no timers), in ABBA order:
  the median paired slowdown must be <= 1 %.

    python scripts/gpu/speed.py --out OUTDIR --data PREPARED_DIR [--variant NAME] [--set --k v ...]

``--variant NAME --set --data.batch_size 64`` (or ``--kernels cross_entropy=eager``,
``--compile-mode max-autotune-no-cudagraphs``) measures a change's effect on speed alone.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucheck


class NullTimer:
    """The trainer's StepTimer interface, measuring nothing (logging "off")."""

    def start(self, step: int) -> None: ...
    def mark(self, phase: str) -> None: ...
    def end(self) -> None: ...
    def poll(self) -> list:
        return []

    def drain(self) -> list:
        return []


class TwentyScalars:
    """A logger adding 9 CUDA scalars to each per-step log: with the trainer's 11 keys (loss,
    grad norm, lr, tokens, five time/*, tokens/s, MFU) that is 20 a step."""

    def __init__(self, inner):
        self.inner, self.uid = inner, inner.uid

    def log(self, metrics: dict[str, Any], step: int) -> None:
        loss = metrics.get("train/loss")
        if loss is not None:
            metrics = {**metrics, **{f"extra/k{i}": loss for i in range(9)}}
        self.inner.log(metrics, step)

    def event(self, kind, title, body="", level="info"):
        self.inner.event(kind, title, body, level)

    def summary(self, values):
        self.inner.summary(values)

    def close(self, status=None):
        self.inner.close(status)


def measure_peak(device: str) -> float:
    """Dense matmul FLOP/s: bf16 8192^3 on CUDA (a tiny fp32 one on the CPU dry run)."""
    import torch

    if device != "cuda":
        a = torch.randn(256, 256)
        t0 = time.perf_counter()
        for _ in range(10):
            a @ a
        return 10 * 2 * 256**3 / (time.perf_counter() - t0)
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    iters = 50
    start.record()
    for _ in range(iters):
        a @ b
    end.record()
    end.synchronize()
    return iters * 2 * n**3 / (start.elapsed_time(end) / 1000)


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def run_steps(trainer, n: int, device: str) -> float:
    """Wall seconds of n steps, the GPU idle at both ends."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(n):
        trainer.log_step(*trainer.train_step())
    sync(device)
    return time.perf_counter() - t0


def build(args, device: str):
    from trainer.config import load_config
    from trainer.train import Trainer

    if args.cpu_dry_run:
        config = gpucheck.ROOT / "trainer/configs/debug.toml"
        base = ["--train.device", "cpu", "--train.threads", "1", "--data.source", "synthetic"]
    else:
        config = args.config
        base = [
            "--train.device",
            "cuda",
            "--train.dtype",
            "bf16",
            "--train.compile",
            "false" if args.compile_mode else "true",
        ]
        base += ["--data.dir", str(args.data)] if args.data else ["--data.source", "synthetic"]
        if not args.data:
            base += ["--model.vocab_size", "32768"]
    cfg = load_config(
        config,
        [
            *base,
            "--train.steps",
            "1000000",
            *gpucheck.JUST_STEPS,
            "--logging.enabled",
            "false",
            "--train.ckpt_dir",
            str(args.out / "speed-ckpt"),
            *args.set,
        ],
    )
    if args.kernels:
        os.environ["TRAINER_KERNELS"] = args.kernels
    trainer = Trainer(cfg)
    if args.compile_mode:
        import torch

        trainer.model = torch.compile(trainer.raw_model, mode=args.compile_mode)
    return cfg, trainer


def compiled_parity(trainer, device: str) -> dict[str, float]:
    """The compiled model's loss on one batch against the eager model's (same autocast)."""
    import torch

    x, y = next(trainer.loader)
    x, y = x.to(device), y.to(device)
    with torch.no_grad(), trainer.autocast:
        eager = trainer.raw_model(x, y).item()
        compiled = trainer.model(x, y).item()
    return {
        "eager_loss": eager,
        "compiled_loss": compiled,
        "rel_diff": abs(eager - compiled) / eager,
    }


def profile(trainer, out: Path, name: str, device: str, steps: int = 3) -> dict[str, Any]:
    """Kernel time by kind over a few steps, and the top kernels as a table file."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch_profile(activities=acts) as prof:
        run_steps(trainer, steps, device)
    events = prof.key_averages()
    sort = "device_time_total" if device == "cuda" else "cpu_time_total"
    table = events.table(sort_by=sort, row_limit=30)
    (out / f"profile-{name}.txt").write_text(table)

    def device_us(e) -> float:
        for attr in ("self_device_time_total", "self_cuda_time_total"):
            if hasattr(e, attr):
                return float(getattr(e, attr))
        return 0.0

    kinds = {
        "matmul": ("gemm", "cutlass", "sm90", "matmul", "nvjet", "cublas"),
        "attention": ("flash", "fmha", "attention", "cudnn", "sdpa"),
        "optimizer": ("adam", "foreach", "multi_tensor"),
        "copy": ("memcpy", "memset", "copy_"),
        "triton (fused)": ("triton",),
    }
    shares: dict[str, float] = dict.fromkeys([*kinds, "other"], 0.0)
    total = 0.0
    for e in events:
        us = device_us(e)
        if us <= 0 or e.key.startswith("ProfilerStep"):
            continue
        total += us
        key = e.key.lower()
        kind = next((k for k, pats in kinds.items() if any(p in key for p in pats)), "other")
        shares[kind] += us
    return {
        "device_ms_per_step": total / 1000 / steps,
        "share": {k: round(v / total, 3) for k, v in shares.items()} if total else {},
        "table": str(out / f"profile-{name}.txt"),
    }


def overhead(trainer, cfg, args, device: str) -> dict[str, Any]:
    """ABBA chunks, reslog on vs off; each "on" chunk is a reslog run of its own (1 s telemetry
    included), opened and finished outside the timed part."""
    import reslog
    from trainer.metrics import NullLogger, ReslogLogger, StepTimer

    real_timer, off_timer = StepTimer(trainer.device), NullTimer()
    store = args.out / "overhead.db"
    ratios, t_on, t_off = [], [], []
    for pair in range(args.overhead_pairs):
        got = {}
        for on in (True, False) if pair % 2 == 0 else (False, True):
            if on:
                run = reslog.init(
                    project="gpu-check",
                    name=f"overhead-{pair}",
                    store=str(store),
                    system=True,
                    system_interval=1.0,
                    config=cfg.to_dict(),
                )
                trainer.logger, trainer.timer = TwentyScalars(ReslogLogger(run)), real_timer
            else:
                trainer.logger, trainer.timer = NullLogger(), off_timer
            got[on] = run_steps(trainer, args.overhead_chunk, device) / args.overhead_chunk
            trainer._settle()  # the last steps' timings and scalars, outside the clock
            trainer.logger.close()
        t_on.append(got[True])
        t_off.append(got[False])
        ratios.append(got[True] / got[False])
    trainer.logger = NullLogger()
    paired = (statistics.median(ratios) - 1) * 100
    return {
        "pairs": args.overhead_pairs,
        "chunk_steps": args.overhead_chunk,
        "on_ms_median": statistics.median(t_on) * 1e3,
        "off_ms_median": statistics.median(t_off) * 1e3,
        "paired_overhead_pct": paired,
        "ratios": ratios,
        "store": str(store),
    }


def main(argv: list[str] | None = None) -> int:
    p = gpucheck.parser(__doc__)
    p.add_argument("--data", type=Path, help="prepared data (trainer.prepare); default synthetic")
    p.add_argument("--config", type=Path, default=gpucheck.ROOT / "trainer/configs/gpt125m.toml")
    p.add_argument("--variant", default="base", help="name of this measurement")
    p.add_argument("--set", nargs="*", default=[], help="config overrides: --set --k v ...")
    p.add_argument("--kernels", default="", help="$TRAINER_KERNELS for this run")
    p.add_argument("--compile-mode", default="", help="torch.compile mode (default: trainer's)")
    p.add_argument("--warmup", type=int, default=3, help="steps before timing (compiles)")
    p.add_argument("--steps", type=int, default=30, help="timed steps")
    p.add_argument("--target-mfu", type=float, default=0.5)
    p.add_argument("--overhead-pairs", type=int, default=8, help="0: no overhead check")
    p.add_argument(
        "--overhead-chunk",
        type=int,
        default=0,
        help="steps per on/off chunk (0: as many as take about 3 s, at least 2)",
    )
    p.add_argument("--profile", choices=("auto", "always", "never"), default="auto")
    args, unknown = p.parse_known_args(argv)
    args.set += unknown  # `--set --data.batch_size 64`: argparse hands the pairs over here
    gpucheck.require_cuda("speed", args.cpu_dry_run)
    device = "cpu" if args.cpu_dry_run else "cuda"
    base = args.variant == "base"
    speed = gpucheck.Result(
        "speed" if base else f"speed-{args.variant}", args.out, args.cpu_dry_run
    )

    import torch

    peak = measure_peak(device)
    cfg, trainer = build(args, device)
    try:
        t0 = time.perf_counter()
        run_steps(trainer, args.warmup, device)  # compiles
        compile_s = time.perf_counter() - t0
        parity = compiled_parity(trainer, device) if cfg.train.compile else None
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        resolved: list[tuple[int, dict[str, float]]] = []
        on_resolved = trainer._on_resolved
        trainer.timer.drain()  # forget the warm-up's timings

        def keep(step: int, times: dict[str, float]) -> None:
            resolved.append((step, times))
            on_resolved(step, times)

        trainer._on_resolved = keep
        wall = run_steps(trainer, args.steps, device)
        for s, times in trainer.timer.drain():
            keep(s, times)
        trainer._on_resolved = on_resolved
        tps = args.steps * trainer.tokens_per_step / wall
        flops = trainer.flops_per_token * tps
        mfu = flops / peak
        mfu_table = flops / trainer.peak_flops if trainer.peak_flops else None
        prof = None
        if args.profile == "always" or (args.profile == "auto" and mfu < args.target_mfu):
            prof = profile(trainer, args.out, args.variant, device)
        speed.details = {
            "variant": args.variant,
            "overrides": args.set,
            "kernels_env": args.kernels,
            "compile_mode": args.compile_mode or ("default" if cfg.train.compile else "off"),
            "runtime": trainer.runtime_info(),
            "batch": f"{cfg.data.batch_size} x {cfg.data.seq_len} x {cfg.data.grad_accum}",
            "compile_and_warmup_s": compile_s,
            "compiled_parity": parity,
            "step_ms": wall / args.steps * 1e3,
            "tokens_per_s": tps,
            "model_tflops": flops / 1e12,
            "peak_measured_tflops": peak / 1e12,
            "mfu_measured_peak": mfu,
            "peak_table": [trainer.peak_name, trainer.peak_flops],
            "mfu_table_peak": mfu_table,
            "max_memory_gib": torch.cuda.max_memory_allocated() / 2**30
            if device == "cuda"
            else None,
            "profile": prof,
        }
        speed.judge(
            mfu >= args.target_mfu and (parity is None or parity["rel_diff"] < 1e-2),
            f"{args.variant}: {tps:,.0f} tokens/s, {wall / args.steps * 1e3:.1f} ms/step, MFU "
            f"{mfu:.1%} of the measured {peak / 1e12:.0f} TFLOP/s"
            + (f" ({mfu_table:.1%} of the datasheet's)" if mfu_table else "")
            + f" (target {args.target_mfu:.0%})",
        )
        speed.write()
        print(speed.summary)
        if not base:
            return speed.exit_code()

        timers = gpucheck.Result("timers", args.out, args.cpu_dry_run)
        from schema.rules.ranks import PHASES

        # The phases a step marked (h2d and comm only where they happen) tile the step.
        summed = sum(sum(t.get(ph, 0.0) for ph in PHASES) for _, t in resolved) / max(
            len(resolved), 1
        )
        per_step = wall / args.steps
        rel = abs(summed - per_step) / per_step
        timers.details = {
            "steps_resolved": len(resolved),
            "phases_ms_mean": {
                ph: statistics.mean(t.get(ph, 0.0) for _, t in resolved) * 1e3 for ph in PHASES
            },
            "phases_sum_ms": summed * 1e3,
            "wall_ms_per_step": per_step * 1e3,
            "rel_diff": rel,
        }
        timers.judge(
            len(resolved) == args.steps and rel <= 0.05,
            f"CUDA-event phases sum to {summed * 1e3:.2f} ms/step, wall clock {per_step * 1e3:.2f} "
            f"ms/step: {rel:.1%} apart (bar 5 %), {len(resolved)}/{args.steps} steps resolved",
        )
        timers.write()
        print(timers.summary)

        if args.overhead_pairs:
            # 10-step chunks of the H200's 1.04 s steps made 8 pairs take 170 s, past the step's
            # time limit: a chunk's length in seconds is what the comparison needs.
            if not args.overhead_chunk:
                args.overhead_chunk = max(2, round(3.0 / per_step))
            over = gpucheck.Result("overhead", args.out, args.cpu_dry_run)
            over.details = overhead(trainer, cfg, args, device)
            pct = over.details["paired_overhead_pct"]
            over.judge(
                pct <= 1.0,
                f"reslog on (1 s telemetry, CUDA-event timers, 20 scalars/step) vs off: "
                f"{pct:+.2f} % per step (median of {args.overhead_pairs} ABBA pairs of "
                f"{args.overhead_chunk}-step chunks; bar 1 %)",
            )
            over.write()
            print(over.summary)
    finally:
        trainer.close()
    return max(r.exit_code() for r in (speed, timers) + ((over,) if args.overhead_pairs else ()))


if __name__ == "__main__":
    sys.exit(main())
