"""GPU check 2, no sync from logging: 1,000 steps logging CUDA scalar tensors under
``torch.cuda.set_sync_debug_mode("error")`` raise nothing, in the training thread or in reslog's
writer thread (the mode is process-wide: a blocking copy there would raise too), and every stored
value equals the tensor's ``.item()`` read afterwards. Then the trainer's own step (a small model,
CUDA-event timers, logging every step) under the same mode.

    python scripts/gpu/nosync.py --out OUTDIR [--steps 1000] [--keys 8] [--trainer-steps 30]
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpucheck


class Counting(logging.Handler):
    """Keeps reslog's warnings (a writer that failed to convert or store says so there)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def sync_debug(mode: str, enabled: bool):
    import torch

    if not enabled:
        yield
        return
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def log_scalars(run, steps: int, keys: int, device: str, strict: bool):
    """Log `keys` 0-d device tensors a step; keep them to compare with the store afterwards."""
    import torch

    torch.manual_seed(0)
    w = torch.randn(256, 256, device=device) / 16
    x = torch.randn(256, 256, device=device)
    names = [f"nosync/k{j}" for j in range(keys)]
    kept, error = [], None
    with sync_debug("error", strict):
        try:
            for step in range(steps):
                x = torch.tanh(x @ w)
                s = x.mean(dim=1)[:keys]  # (keys,) on the device; its 0-d views are logged
                run.log(dict(zip(names, s.unbind(), strict=True)), step=step)
                kept.append(s)
        except RuntimeError as e:  # the sync debug mode's error: a sync in this thread
            error = repr(e)
    return names, kept, error


def compare(stored, names, kept) -> tuple[int, int, list[str]]:
    """(values checked, values equal, first few differences) of store against ``.item()``."""
    checked = equal = 0
    diffs: list[str] = []
    for j, key in enumerate(names):
        by_step = {step: value for step, _wall, value in stored.get(key, [])}
        for step, s in enumerate(kept):
            want = s[j].item()  # a sync, after the timed part
            got = by_step.get(step)
            checked += 1
            if got == want:
                equal += 1
            elif len(diffs) < 5:
                diffs.append(f"{key} step {step}: stored {got!r}, .item() {want!r}")
    return checked, equal, diffs


def trainer_steps(out: Path, steps: int, device: str, strict: bool) -> dict:
    """The trainer's train_step + log_step (reslog logging every step, CUDA-event timers)."""
    from trainer.config import load_config
    from trainer.train import Trainer

    cfg = load_config(
        gpucheck.ROOT / "trainer/configs/debug.toml",
        [
            "--train.device",
            device,
            "--train.steps",
            str(steps + 1),
            *gpucheck.JUST_STEPS,
            "--logging.store",
            str(out / "nosync.db"),
            "--logging.name",
            "nosync-trainer",
            "--logging.project",
            "gpu-check",
            "--train.ckpt_dir",
            str(out / "nosync-ckpt"),
        ],
    )
    trainer = Trainer(cfg)
    error = None
    try:
        trainer.log_step(*trainer.train_step())  # first step: lazy CUDA and optimizer state set-up
        with sync_debug("error", strict):
            try:
                for _ in range(steps):
                    trainer.log_step(*trainer.train_step())
            except RuntimeError as e:
                # where the sync was: the innermost frames name the kernel or library
                frames = traceback.extract_tb(e.__traceback__)[-3:]
                error = f"{e!r} at " + " <- ".join(
                    f"{Path(f.filename).name}:{f.lineno} {f.line}" for f in reversed(frames)
                )
        trainer._settle()
    finally:
        trainer.close()
    stored = gpucheck.read_points(out / "nosync.db", "nosync-trainer")
    losses = stored.get("train/loss", [])
    return {"steps": steps, "error": error, "loss_points": len(losses)}


def main(argv: list[str] | None = None) -> int:
    p = gpucheck.parser(__doc__)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--keys", type=int, default=8, help="CUDA scalars logged per step")
    p.add_argument("--trainer-steps", type=int, default=30)
    args = p.parse_args(argv)
    res, device = gpucheck.start("nosync", args)
    strict = device == "cuda"

    import reslog

    warnings = Counting()
    logging.getLogger("reslog").addHandler(warnings)
    store = args.out / "nosync.db"
    run = reslog.init(
        project="gpu-check", name="nosync", store=str(store), system=False, flush_interval=0.2
    )
    names, kept, error = log_scalars(run, args.steps, args.keys, device, strict)
    run.finish()
    checked, equal, diffs = compare(gpucheck.read_points(store, "nosync"), names, kept)
    trainer = trainer_steps(args.out, args.trainer_steps, device, strict)
    logging.getLogger("reslog").removeHandler(warnings)

    res.details = {
        "steps": args.steps,
        "keys": args.keys,
        "training_thread_error": error,
        "reslog_warnings": warnings.messages[:10],
        "values_checked": checked,
        "values_equal": equal,
        "differences": diffs,
        "trainer": trainer,
        "sync_debug_mode": "error" if strict else "off (CPU)",
    }
    ok = (
        error is None
        and not warnings.messages
        and checked == equal == args.steps * args.keys
        and trainer["error"] is None
        and trainer["loss_points"] >= args.trainer_steps
    )
    res.judge(
        ok,
        f"{args.steps} steps x {args.keys} CUDA scalars under sync debug 'error': "
        f"training thread {'raised ' + error if error else 'raised nothing'}, "
        f"reslog warnings {len(warnings.messages)}, stored == .item() {equal}/{checked}; "
        f"trainer {args.trainer_steps} steps: "
        + (trainer["error"] or f"no sync, {trainer['loss_points']} losses stored"),
    )
    res.write()
    print(res.summary)
    return res.exit_code()


if __name__ == "__main__":
    sys.exit(main())
