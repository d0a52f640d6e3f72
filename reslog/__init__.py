"""reslog: log training metrics into a local SQLite store (or PostgreSQL) without slowing training.

    import reslog
    run = reslog.init(project="z2all", name="wsd-0.5", config=cfg)
    run.log({"train/loss": loss, "train/lr": lr}, step=step)
    run.finish()

The API reference and the semantics (steps, NaN, statuses, crashes, DDP) are in docs/reslog.md.
Importing this package is light: no torch, numpy or NVML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reslog.lifecycle import current
from reslog.run import Run, Timer, init

__all__ = ["Run", "Timer", "current", "finish", "init", "log"]


def _current_or_raise() -> Run:
    run = current()
    if run is None:
        raise RuntimeError("reslog: no active run; call reslog.init(...) first")
    return run


def log(metrics: Mapping[str, Any], step: int | None = None) -> None:
    """Log to the current run (the most recent unfinished `reslog.init()`)."""
    _current_or_raise().log(metrics, step=step)


def finish(status: str | None = None, timeout: float | None = None) -> bool:
    """Finish the current run; True when there was none left to finish or it finished in time."""
    run = current()
    return True if run is None else run.finish(status, timeout=timeout)
