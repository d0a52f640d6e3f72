"""`reslog import KIND PATH...`: read, then write run by run, printing one line per run."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from sqlalchemy import Engine, select

from reslog.tools.importers import ImportError_, shown
from reslog.tools.importers.runs import ImportedRun, import_offsets, write_run
from schema.store.tables import runs

KINDS = ("tensorboard", "wandb", "csv", "parquet")
# Sources that grow while a run writes them: a second import appends what is new.
INCREMENTAL = ("tensorboard",)


@dataclass
class ImportCounts:
    new: int = 0  # runs written (new or replaced)
    updated: int = 0  # runs that got new points
    already: int = 0  # runs already there, nothing new
    points: int = 0
    corrupt: int = 0  # records that failed their checksum, skipped


def readers(
    engine: Engine, kind: str, path: Path, project: str | None, name: str | None, replace: bool
) -> Iterable[ImportedRun]:
    if kind == "tensorboard":
        from reslog.tools.importers.tensorboard import read_logdir

        def offsets(uid: str) -> dict[str, int]:
            return {} if replace else import_offsets(engine, uid)

        return read_logdir(path, project or "tensorboard", offsets)
    if kind == "wandb":
        from reslog.tools.importers.wandb_offline import read_wandb_dir

        return read_wandb_dir(path, project)
    if kind == "csv":
        from reslog.tools.importers.csv_table import read_csv

        return read_csv(path, project or "csv", name)
    raise ImportError_(f"unknown import kind {kind!r} (one of {', '.join(KINDS)})")


def imported(
    engine: Engine, kind: str, path: Path, project: str | None, name: str | None, replace: bool
) -> Iterator[tuple[ImportedRun, str, int, int]]:
    """(run, outcome, points written, keys) of every run under `path`, each written (or found
    there) before the next is read."""
    command = f"reslog import {kind} {shown(path)}"
    if kind == "parquet":  # written while it is read: memory bounded whatever the file's size
        from reslog.tools.importers.parquet import import_parquet

        yield from import_parquet(engine, path, project, replace, command)
        return
    for run in readers(engine, kind, path, project, name, replace):
        n = run.points()
        outcome = write_run(engine, run, command, replace=replace, append=kind in INCREMENTAL)
        yield run, outcome, n, len(run.series)


def import_runs(
    engine: Engine,
    kind: str,
    paths: Path | Sequence[Path],
    *,
    project: str | None = None,
    name: str | None = None,
    replace: bool = False,
    out: TextIO | None = None,
    progress: Callable[[str], None] | None = None,
) -> ImportCounts:
    """Import every run found under `paths`. ImportError_ on bad input: runs read before the
    bad file are written already (each whole), none of the bad file's run."""
    out = sys.stdout if out is None else out
    paths = [paths] if isinstance(paths, Path) else list(paths)
    counts = ImportCounts()
    t0 = time.monotonic()
    seen = 0
    grown: list[str] = []  # runs an import appended to: their new chunks merged at the end
    for path in paths:
        for run, outcome, n, nkeys in imported(engine, kind, path, project, name, replace):
            seen += 1
            print(_line(run, outcome, n, nkeys, kind in INCREMENTAL), file=out)
            for file, left in run.torn:
                print(
                    f"  {shown(file)}: its last {left:,} bytes are a record still being "
                    "written; the next import reads them",
                    file=out,
                )
            if outcome not in ("already", "unknown"):
                for line in run.corrupt_lines():
                    print(f"  {line}", file=out)
                counts.corrupt += len(run.corrupt)
            if outcome in ("already", "unknown"):
                counts.already += 1
            elif outcome == "appended":
                counts.updated += 1
                counts.points += n
                grown.append(run.uid)
            else:
                counts.new += 1
                counts.points += n
            if progress is not None:
                done = counts.new + counts.updated + counts.already
                progress(f"{done} runs, {counts.points:,} points, {time.monotonic() - t0:.1f} s")
    if seen == 0:
        where = ", ".join(map(str, paths))
        raise ImportError_(f"{where}: nothing to import (no {kind} runs found)")
    if grown:
        _compact(engine, grown)
    return counts


def _compact(engine: Engine, uids: list[str]) -> None:
    """Merge the chunks each appending import left beside the earlier ones (a new import
    writes each group's chunks whole already; docs/store.md, "Compaction")."""
    from schema.store.chunk_compact import compact

    with engine.connect() as conn:
        found = conn.execute(select(runs.c.id).where(runs.c.uid.in_(uids))).scalars().all()
    compact(engine, [int(i) for i in found])


def _line(run: ImportedRun, outcome: str, n: int, nkeys: int, incremental: bool) -> str:
    return shown(_outcome_line(run, outcome, n, nkeys, incremental))


def _outcome_line(run: ImportedRun, outcome: str, n: int, nkeys: int, incremental: bool) -> str:
    uid = run.uid[:8]
    note = ""
    if run.skipped:
        note = f", {run.skipped_count():,} non-scalar values not imported ({run.skipped_text()})"
    if run.bad_keys:
        note += f", not imported: {run.bad_key_text()}"
    if outcome == "already":
        checked = incremental or run.by_content
        why = "nothing new" if checked else "skipped (--replace imports it again)"
        return f"already imported {run.name!r} (uid {uid}): {why}"
    if outcome == "unknown":
        return (
            f"already imported {run.name!r} (uid {uid}) by an older reslog, which did not "
            "record where it stopped: skipped (--replace imports it again, with what is new)"
        )
    if outcome == "appended":
        return f"updated {run.name!r}: {n:,} new points in {nkeys:,} keys{note} (uid {uid})"
    verb = "replaced" if outcome == "replaced" else "imported"
    return f"{verb} {run.name!r}: {nkeys:,} keys, {n:,} points{note} (uid {uid})"
