"""Exports from the viewer through reslog.tools.export, so the window, `resplot export` and
`reslog export` write identical files.

Points are read raw from the store as they are written (each source's `reader()`: the agent's
`raw` pages, or SQL on PostgreSQL), never from what a chart decimated; the comparison table
comes from the series summaries the cache holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from reslog.tools.export import ExportRun, write_points, write_table
from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from schema.rules.compare import RunSummary, select_keys


def summaries(cache: SeriesCache, refs: list[RunRef]) -> list[RunSummary]:
    """The runs (in the cache) with their series aggregates."""
    out = []
    for ref in refs:
        info = cache.run(ref)
        if info is not None:
            out.append(RunSummary(info, {k: s.agg for k, s in cache.summaries(ref).items()}))
    return out


def export_runs(
    cache: SeriesCache,
    reader_of: Callable[[RunRef], object],
    refs: list[RunRef],
    keys: list[str] | None = None,
) -> list[ExportRun]:
    """ExportRuns whose points are read through `reader_of(ref).scan(key, start, stop)`."""
    out = []
    for d in summaries(cache, refs):
        wanted = set(select_keys(d.series, keys))
        reader = reader_of(d.run.ref)
        out.append(
            ExportRun(
                d.run,
                {k: a for k, a in d.series.items() if k in wanted},
                lambda key, a, b, _r=reader: _r.scan(key, a, b),
            )
        )
    return out


def export_points(
    cache: SeriesCache,
    reader_of: Callable[[RunRef], object],
    refs: list[RunRef],
    path: str | os.PathLike[str],
    fmt: str,
    keys: list[str] | None = None,
) -> None:
    write_points(export_runs(cache, reader_of, refs, keys), path, fmt, keys)


def export_table(
    cache: SeriesCache,
    refs: list[RunRef],
    path: str | os.PathLike[str],
    fmt: str,
    metrics: list[str] | None = None,
) -> None:
    write_table(summaries(cache, refs), path, fmt, metrics)
