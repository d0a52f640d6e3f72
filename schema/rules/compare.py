"""Comparing runs: the rules that the comparison table (every export), the viewer's run table,
`reslog ls/show` and `reslog.open` share, so that no two of them can disagree.

Metric statistics come from a series' aggregate (schema.store.rollup), the `series` row the writer
keeps, never from a pass over its points: last value, smallest finite value and its step.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schema.rules.alerts import gpu_key
from schema.store.records import RunInfo
from schema.store.rollup import LAST, MIN_AT, NAN, NEGINF, POSINF, STEP_HI, VMAX, VMIN, N

# Metrics the comparison table shows when none are chosen (those that some run has).
DEFAULT_METRICS = ("train/loss", "valid/loss", "valid/ppl")
# Validation metrics go by several family names (reslog's trainer: valid/, nanoGPT: val/,
# Hugging Face: eval/, others: validation/): a metric named in one family stands for its twins.
VALID_FAMILIES = ("valid", "val", "eval", "validation")
_MISSING = object()
# The column that holds a job's per-rank settings (per_rank_config), each rank's own values.
PER_RANK = "per-rank settings"


@dataclass
class RunSummary:
    """A run and the aggregates of its series (key name → schema.store.rollup aggregate)."""

    run: RunInfo
    series: dict[str, tuple] = field(default_factory=dict)


def select_keys(all_keys: Iterable[str], globs: Sequence[str] | None) -> list[str]:
    """Keys matching any glob (fnmatch, case-sensitive), in glob order then name order.

    No globs (None or []) selects every key, sorted.
    """
    names = sorted(set(all_keys))
    if not globs:
        return names
    chosen: dict[str, None] = {}
    for glob in globs:
        for name in names:
            if fnmatch.fnmatchcase(name, glob):
                chosen.setdefault(name, None)
    return list(chosen)


def family_keys(metric: str, present: Iterable[str]) -> list[str]:
    """The keys present that `metric` names: itself, and for a validation metric (`val/loss`)
    the same metric in every validation family (`valid/loss`, `eval/loss`, ...), in
    VALID_FAMILIES order."""
    have = set(present)
    family, sep, rest = metric.partition("/")
    if sep and family in VALID_FAMILIES:
        return [k for f in VALID_FAMILIES if (k := f"{f}/{rest}") in have]
    return [metric] if metric in have else []


def select_metrics(present: Iterable[str], metrics: Sequence[str]) -> list[str]:
    """Keys for the metric names or globs (select_keys), validation families included."""
    names = sorted(set(present))
    chosen: dict[str, None] = {}
    for m in metrics:
        if any(c in m for c in "*?["):
            chosen.update(dict.fromkeys(select_keys(names, [m])))
        else:
            chosen.update(dict.fromkeys(family_keys(m, names)))
    return list(chosen)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts → dotted keys ({"optim": {"lr": 1}} → {"optim.lr": 1}); lists stay values."""
    flat: dict[str, Any] = {}
    for k, v in config.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            flat.update(flatten(v, name + "."))
        else:
            flat[name] = v
    return flat


def _differing(flats: Sequence[Mapping[str, Any]]) -> list[str]:
    order: dict[str, None] = {}
    for f in flats:
        order.update(dict.fromkeys(f))
    differing = []
    for name in order:
        seen = {json.dumps(f.get(name, _MISSING), sort_keys=True, default=repr) for f in flats}
        if len(seen) > 1:
            differing.append(name)
    return differing


def per_rank_config(runs: Sequence[RunInfo]) -> list[str]:
    """Flattened config keys whose values differ between the ranks of one job (runs sharing a
    group, world_size > 1): a rank's own settings (its host's store, its local rank, its
    device), not what the job was run with. In first-appearance order."""
    by_job: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r.group and r.world_size > 1:
            by_job.setdefault(r.group, []).append(flatten(r.config))
    keys: dict[str, None] = {}
    for flats in by_job.values():
        keys.update(dict.fromkeys(_differing(flats)))
    return list(keys)


def differing_config(runs: Sequence[RunInfo]) -> list[str]:
    """Flattened config keys whose values differ between the runs (absent counts as a value),
    in first-appearance order, leaving out a job's per-rank settings (per_rank_config: they
    differ between its ranks by nature, and are shown per rank). One run or none: nothing
    differs."""
    per_rank = set(per_rank_config(runs))
    return [k for k in _differing([flatten(r.config) for r in runs]) if k not in per_rank]


def rank_settings(run: RunInfo, keys: Sequence[str]) -> str:
    """A rank's own values of the per-rank `keys`: `runtime.local_rank=1; logging.store=b.db`."""
    flat = flatten(run.config)
    return "; ".join(f"{k}={flat[k]}" for k in keys if k in flat)


def duration_s(run: RunInfo) -> float:
    """Seconds from creation to the end (or the last heartbeat while running or crashed)."""
    end = run.ended_at if run.ended_at is not None else run.heartbeat_at
    return max(0.0, end - run.created_at)


def gpu_ids(keys: Iterable[str]) -> list[int]:
    """GPU ordinals present in `sys/gpu{i}/...` keys."""
    return sorted({gpu[0] for k in keys if (gpu := gpu_key(k))})


def gpu_count(run: RunInfo, keys: Iterable[str]) -> int:
    """GPUs the run was seen using: distinct i in its `sys/gpu{i}/...` keys (0 without GPU
    telemetry: a CPU run, or one logged with system=False)."""
    return len(gpu_ids(keys))


def gpu_hours(run: RunInfo, keys: Iterable[str]) -> float | None:
    """Hours × GPUs seen; None (an empty cell) where no GPU was seen, rather than a guess."""
    gpus = gpu_count(run, keys)
    return duration_s(run) / 3600.0 * gpus if gpus else None


def metric_stats(agg: tuple | None) -> tuple[float | None, float | None, int | None]:
    """(last value, smallest finite value, its step) of a series aggregate; Nones without a
    point; the minimum is NaN when no value is finite."""
    if agg is None or agg[N] == 0:
        return None, None, None
    last = math.nan if agg[LAST] is None else float(agg[LAST])
    if agg[VMIN] is None:
        return last, math.nan, None
    return last, float(agg[VMIN]), int(agg[MIN_AT])


def last_step(series: Mapping[str, tuple]) -> int | None:
    """The highest step any series of a run reached."""
    return max((int(a[STEP_HI]) for a in series.values()), default=None)


def lowest(agg: tuple) -> float:
    """The smallest value of a series aggregate, -inf included (NaN when every value is)."""
    if agg[NEGINF]:
        return -math.inf
    if agg[VMIN] is not None:
        return float(agg[VMIN])
    return math.inf if agg[POSINF] else math.nan


def highest(agg: tuple) -> float:
    """The largest value of a series aggregate, +inf included (NaN when every value is)."""
    if agg[POSINF]:
        return math.inf
    if agg[VMAX] is not None:
        return float(agg[VMAX])
    return -math.inf if agg[NEGINF] else math.nan


def nonfinite(agg: tuple) -> int:
    """NaN, +inf and -inf points of a series aggregate."""
    return int(agg[NAN] + agg[POSINF] + agg[NEGINF])


def comparison_table(
    runs: Sequence[RunSummary], metrics: Sequence[str] | None = None
) -> tuple[list[str], list[list[object]]]:
    """(header, rows): one row per run with its name, the config keys that differ (a job's
    per-rank settings in one PER_RANK column, each rank's own), the summary
    values, last / min / min-step of each metric, hours and GPU-hours.

    `metrics` are key names or globs (select_metrics: a validation metric stands for its twins
    in every validation family); None = those of DEFAULT_METRICS that any run has.
    Missing cells are None.
    """
    config_keys = differing_config([d.run for d in runs])
    per_rank = per_rank_config([d.run for d in runs])
    summary_keys: dict[str, None] = {}
    for d in runs:
        summary_keys.update(dict.fromkeys(flatten(d.run.summary)))
    present = {k for d in runs for k in d.series}
    chosen = select_metrics(present, DEFAULT_METRICS if metrics is None else metrics)
    header = ["run", *config_keys, *([PER_RANK] if per_rank else []), *summary_keys]
    for m in chosen:
        header += [f"{m} last", f"{m} min", f"{m} min step"]
    header += ["hours", "GPU-hours"]
    rows: list[list[object]] = []
    for d in runs:
        flat_config, flat_summary = flatten(d.run.config), flatten(d.run.summary)
        row: list[object] = [d.run.name]
        row += [flat_config.get(k) for k in config_keys]
        row += [rank_settings(d.run, per_rank) or None] if per_rank else []
        row += [flat_summary.get(k) for k in summary_keys]
        for m in chosen:
            row += list(metric_stats(d.series.get(m)))
        row += [duration_s(d.run) / 3600.0, gpu_hours(d.run, d.series)]
        rows.append(row)
    return header, rows
