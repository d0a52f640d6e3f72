"""Exports from the viewer's cache (full resolution, never a decimated view) through
reslog.export, so the window, `resplot export` and `reslog export` write identical files."""

from __future__ import annotations

import os

import numpy as np

from reslog.export import RunData, select_keys, write_points, write_table
from resplot.cache import SeriesCache
from resplot.model import RunRef


def run_data(
    cache: SeriesCache, refs: list[RunRef], key_globs: list[str] | None = None
) -> list[RunData]:
    """RunData (series sorted by step, as reslog.export expects) for runs in the cache."""
    out = []
    for ref in refs:
        info = cache.run(ref)
        if info is None:
            continue
        all_keys = cache.keys(ref)
        series = {}
        for key in select_keys(all_keys, key_globs):
            steps, walls, values = cache.series(ref, key)
            order = np.argsort(steps, kind="stable")
            series[key] = (steps[order], walls[order], values[order])
        out.append(RunData(info, series, all_keys))
    return out


def export_points(
    cache: SeriesCache, refs: list[RunRef], path: str | os.PathLike[str], fmt: str,
    keys: list[str] | None = None,
) -> None:  # fmt: skip
    write_points(run_data(cache, refs, keys), path, fmt, keys)


def export_table(
    cache: SeriesCache, refs: list[RunRef], path: str | os.PathLike[str], fmt: str,
    metrics: list[str] | None = None,
) -> None:  # fmt: skip
    write_table(run_data(cache, refs), path, fmt, metrics)
