"""reslog: log training metrics into a local SQLite store (or PostgreSQL) without slowing training.

    import reslog
    run = reslog.init(project="z2all", name="wsd-0.5", config=cfg)
    run.log({"train/loss": loss, "train/lr": lr}, step=step)
    run.finish()

    with reslog.open("runs/reslog.db") as store:    # read it back: DataFrames, O(samples)
        store.history("wsd-0.5", "train/loss", samples=1000)

The API reference and the semantics (steps, NaN, statuses, crashes, DDP) are in docs/reslog.md.
Importing this package is light: no torch, numpy, pandas or NVML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reslog.lifecycle import current
from reslog.reader import Reader, open
from reslog.tracked_run import Run, Timer, init
from schema.errors import StoreError

__all__ = ["Reader", "Run", "StoreError", "Timer", "current", "finish", "init", "log", "open"]


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
