"""`reslog import KIND PATH`: read, then write run by run, printing one line per run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TextIO

from sqlalchemy import Engine

from reslog.tools.importers import ImportError_
from reslog.tools.importers.runs import ImportedRun, write_run

KINDS = ("tensorboard", "wandb", "csv")


def readers(
    kind: str, path: Path, project: str | None, name: str | None
) -> Iterator[tuple[ImportedRun, int]]:
    if kind == "tensorboard":
        from reslog.tools.importers.tensorboard import read_logdir

        return read_logdir(path, project or "tensorboard")
    if kind == "wandb":
        from reslog.tools.importers.wandb_offline import read_wandb_dir

        return read_wandb_dir(path, project)
    if kind == "csv":
        from reslog.tools.importers.csv_table import read_csv

        return iter([(r, 0) for r in read_csv(path, project or "csv", name)])
    raise ImportError_(f"unknown import kind {kind!r} (one of {', '.join(KINDS)})")


def import_runs(
    engine: Engine,
    kind: str,
    path: Path,
    *,
    project: str | None = None,
    name: str | None = None,
    out: TextIO | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[int, int, int]:
    """(runs written, runs already there, points written). ImportError_ on bad input: runs
    read before the bad file are written already (each whole), none of the bad file's run."""
    out = sys.stdout if out is None else out
    command = f"reslog import {kind} {path}"
    written = already = points = 0
    t0 = time.monotonic()
    found: Iterable[tuple[ImportedRun, int]] = readers(kind, path, project, name)
    for run, skipped in found:
        n = run.points()
        if write_run(engine, run, command):
            written += 1
            points += n
            note = f", {skipped:,} non-scalar values not imported" if skipped else ""
            print(f"imported {run.name!r}: {len(run.series):,} keys, {n:,} points{note} "
                  f"(uid {run.uid[:8]})", file=out)  # fmt: skip
        else:
            already += 1
            print(f"already imported {run.name!r} (uid {run.uid[:8]}): skipped", file=out)
        if progress is not None:
            progress(f"{written + already} runs, {points:,} points, {time.monotonic() - t0:.1f} s")
    if written + already == 0:
        raise ImportError_(f"{path}: nothing to import (no {kind} runs found)")
    return written, already, points
