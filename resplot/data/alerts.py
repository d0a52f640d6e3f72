"""Alerts derived from the cache: NaN/inf loss, a stalled or crashed run, a quiet one (no new
step for a while), GPU utilisation drop, hot or throttled GPU, plus the alerts a run logged
itself (`run.alert`). Pure functions, no Qt; the kinds and what they mean are schema.rules.alerts'.

They read the series summaries (counts, extremes, flags and last points of whole series,
O(series)) and, for what happened in the last minute, the points seen arriving live.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from reslog.text import duration, safe
from resplot.data import ranks
from resplot.data.cache import SeriesCache, Summary
from resplot.data.model import RunRef
from schema.rules import alerts as kind
from schema.rules.alerts import (
    CRASHED,
    GPU_TEMP,
    GPU_UTIL_DROP,
    HANG,
    QUIET,
    STALLED,
    STRAGGLER,
    THROTTLED,
    gpu_key,
)
from schema.rules.throttle import THROTTLE_BITS
from schema.store.rollup import (
    BITS,
    MAX_AT,
    NAN,
    NEGINF,
    NONFINITE_AT,
    POSINF,
    STEP_HI,
    STEP_LO,
    VMAX,
    WALL_HI,
    WALL_LO,
    N,
    mean,
)
from schema.store.status import RUNNING

LOSS_KEYS = ("train/loss", "valid/loss")
LEVELS = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Thresholds:
    quiet_factor: float = 5.0  # quiet after k × median time between logged steps
    quiet_min_s: float = 30.0  # ... and never before this (flush + poll delays)
    util_window_s: float = 60.0  # recent window compared to the run's typical utilisation
    util_drop_ratio: float = 0.5  # recent mean below half of the run's median
    util_busy_pct: float = 50.0  # only for GPUs that were busy (median above this)
    temp_c: float = 85.0


@dataclass(frozen=True)
class Alert:
    run: RunRef
    kind: str  # schema.rules.alerts: nan, stalled, crashed, quiet, gpu_util_drop, gpu_temp, ...
    level: str  # info, warning, error
    message: str
    step: int | None = None
    wall: float | None = None
    detail: str = ""  # more than a line: a stalled run's thread stacks


def _live(cache: SeriesCache, ref: RunRef, key: str):
    live = cache.live(ref, key)
    return live if live is not None and len(live[0]) else None


def nan_loss(cache: SeriesCache, ref: RunRef) -> list[Alert]:
    out = []
    for key in LOSS_KEYS:
        summary = cache.summary(ref, key)
        if summary is None:
            continue
        agg = summary.agg
        count = agg[NAN] + agg[POSINF] + agg[NEGINF]
        if not count:
            continue
        step, wall = agg[NONFINITE_AT], None  # the first step it went wrong, from the rollups
        kinds = [
            k for k, n in (("NaN", agg[NAN]), ("+inf", agg[POSINF]), ("-inf", agg[NEGINF])) if n
        ]
        what = kinds[0] if len(kinds) == 1 else "/".join(kinds)
        live = _live(cache, ref, key)
        if live is not None and step is not None:  # seen arriving: what it was, and when
            steps, walls, values = live
            at = np.flatnonzero((steps == step) & ~np.isfinite(values))
            if len(at):
                i = int(at[0])
                what = "NaN" if np.isnan(values[i]) else f"{values[i]:+}"
                wall = float(walls[i])
        where = f" at step {step}" if step is not None else ""
        out.append(
            Alert(
                ref,
                kind.NAN,
                "error",
                f"{key} is {what}{where} ({count} non-finite points)",
                step,
                wall,
            )
        )
    return out


def _progress(cache: SeriesCache, ref: RunRef) -> tuple[str | None, Summary | None]:
    """(key, its summary) of the series that best shows training progress (None, None: none)."""
    for key in ("train/loss", "time/step"):
        summary = cache.summary(ref, key)
        if summary is not None:
            return key, summary
    counts = {k: s.agg[N] for k, s in cache.summaries(ref).items() if not k.startswith("sys/")}
    if not counts:
        return None, None
    key = max(counts, key=counts.get)
    return key, cache.summary(ref, key)


STACK_LINES = 40


def _stack_excerpt(body: str) -> str:
    """What a tooltip can hold of a stall event's body (reslog.training.stall.thread_stacks):
    the GPU note and the first thread's stack (the one that called init), its innermost frames
    kept when it is long; `reslog show` has every thread's."""
    lines = body.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith('Thread "')]
    if not starts:
        return "\n".join(lines[-STACK_LINES:])
    end = starts[1] if len(starts) > 1 else len(lines)
    head, stack = lines[: starts[0] + 1], lines[starts[0] + 1 : end]
    if len(stack) > STACK_LINES:
        stack = [f"  … {len(stack) - STACK_LINES} outer lines", *stack[-STACK_LINES:]]
    others = len(starts) - 1
    tail = [f"(+ {others} more threads: reslog show)"] if others else []
    return "\n".join([*head, *stack, *tail])


def run_status(cache: SeriesCache, ref: RunRef, now: float) -> list[Alert]:
    """A run whose status is stalled or crashed (schema/store/status.py), at its last step."""
    run = cache.run(ref)
    if run is None or run.status not in (STALLED, CRASHED):
        return []
    _key, summary = _progress(cache, ref)
    if summary is None:
        return []
    last_step, last_wall = int(summary.agg[STEP_HI]), float(summary.agg[WALL_HI])
    if run.status == CRASHED:
        # The process is gone (SIGKILL, OOM, a lost host): the run stopped for good, however
        # short its silence is next to its step time. Resuming or finishing it clears this.
        return [
            Alert(
                ref,
                CRASHED,
                "warning",
                f"crashed after step {last_step}: its process is gone or sent no heartbeat "
                f"for {duration(now - run.heartbeat_at)}",
                last_step,
                last_wall,
            )
        ]
    # The writer saw no log() for its stall_after (or the process is alive but silent); the
    # run's "stall" event holds every thread's stack.
    stalls = [e for e in cache.events(ref, "stall") if e.level == "warning"]
    where = _stack_excerpt(stalls[-1].body) if stalls else ""
    return [
        Alert(
            ref,
            STALLED,
            "warning",
            f"stalled after step {last_step}: no step for {duration(now - last_wall)}"
            + ("; hover for where it hangs" if where else ""),
            last_step,
            last_wall,
            where,
        )
    ]


def quiet(cache: SeriesCache, ref: RunRef, now: float, th: Thresholds) -> list[Alert]:
    """A running run that has logged no new step for `quiet_factor` × its usual time between
    steps: a guess from the chart, said before the writer's stall_after (or a heartbeat) can."""
    run = cache.run(ref)
    if run is None or run.status != RUNNING:
        return []
    key, summary = _progress(cache, ref)
    if summary is None:
        return []
    agg = summary.agg
    last_step, last_wall = int(agg[STEP_HI]), float(agg[WALL_HI])
    live = _live(cache, ref, key)
    if live is not None and len(live[0]) >= 3:
        steps, walls = live[0], live[1]
        # Time between consecutive new steps (several keys per step share one wall time).
        new = np.flatnonzero(np.diff(steps) != 0) + 1
        gaps = np.diff(walls[np.concatenate(([0], new))])
        gaps = gaps[gaps > 0]
        gap = float(np.median(gaps)) if len(gaps) else None
    elif agg[N] >= 3 and agg[STEP_HI] > agg[STEP_LO]:
        gap = (agg[WALL_HI] - agg[WALL_LO]) / (agg[N] - 1)  # the run's average so far
    else:
        gap = None
    if not gap or gap <= 0:
        return []
    limit = max(th.quiet_factor * gap, th.quiet_min_s)
    idle = now - last_wall
    if idle <= limit:
        return []
    return [
        Alert(
            ref,
            QUIET,
            "warning",
            f"no new step for {duration(idle)} (median step gap {gap:.2f} s)",
            last_step,
            last_wall,
        )
    ]


def gpu_alerts(cache: SeriesCache, ref: RunRef, th: Thresholds) -> list[Alert]:
    out = []
    for key, summary in cache.summaries(ref).items():
        parsed = gpu_key(key)
        if parsed is None:
            continue
        gpu, what = parsed
        agg = summary.agg
        if agg[VMAX] is None:
            continue
        if what == "util":
            # The last minute seen live against the run's mean so far.
            live = _live(cache, ref, key)
            if live is None:
                continue
            _steps, walls, values = live
            ok = np.isfinite(values)
            walls, values = walls[ok], values[ok]
            if len(values) < 10:
                continue
            recent = walls >= walls[-1] - th.util_window_s
            finite = agg[N] - agg[NAN] - agg[POSINF] - agg[NEGINF]
            if finite - int(recent.sum()) < 5:
                continue
            typical = mean(agg)
            now_mean = float(values[recent].mean())
            if typical >= th.util_busy_pct and now_mean < th.util_drop_ratio * typical:
                out.append(
                    Alert(
                        ref,
                        GPU_UTIL_DROP,
                        "warning",
                        f"GPU{gpu} utilisation {now_mean:.0f}% (typically {typical:.0f}%)",
                        int(agg[STEP_HI]),
                        float(agg[WALL_HI]),
                    )
                )
        elif what == "temp_c" and agg[VMAX] >= th.temp_c:
            out.append(
                Alert(
                    ref,
                    GPU_TEMP,
                    "warning",
                    f"GPU{gpu} reached {agg[VMAX]:.0f} °C (≥ {th.temp_c:.0f} °C)",
                    int(agg[MAX_AT]),
                    None,
                )
            )
        elif what == "throttle" and agg[BITS] > 0 and agg[BITS] & sum(THROTTLE_BITS):
            seen = agg[BITS]
            reasons = ", ".join(name for bit, name in THROTTLE_BITS.items() if seen & bit)
            share = ""
            live = _live(cache, ref, key)
            if live is not None:  # how often, among the samples seen arriving
                bits = np.nan_to_num(live[2], nan=0.0).astype(np.int64)
                pct = 100.0 * np.count_nonzero(bits & sum(THROTTLE_BITS)) / len(bits)
                whole = len(bits) == agg[N]
                share = f" in {pct:.0f}% of " + ("samples" if whole else f"the last {len(bits)}")
            out.append(
                Alert(
                    ref, THROTTLED, "warning", f"GPU{gpu} throttled ({reasons}){share}", None, None
                )
            )
    return out


def logged(cache: SeriesCache, ref: RunRef) -> list[Alert]:
    return [
        Alert(
            ref,
            kind.ALERT,
            ev.level if ev.level in LEVELS else "warning",
            ev.title,
            ev.step,
            ev.wall,
        )
        for ev in cache.events(ref, kind.ALERT)
    ]


def check_run(
    cache: SeriesCache, ref: RunRef, now: float | None = None, th: Thresholds | None = None
) -> list[Alert]:
    """Every alert for one run, most severe first."""
    th = th or Thresholds()
    now = time.time() if now is None else now
    found = nan_loss(cache, ref) + run_status(cache, ref, now) + quiet(cache, ref, now, th)
    found += gpu_alerts(cache, ref, th)
    found += logged(cache, ref)
    return sorted(found, key=lambda a: -LEVELS.get(a.level, 1))


def check_all(
    cache: SeriesCache,
    refs: list[RunRef] | None = None,
    now: float | None = None,
    th: Thresholds | None = None,
) -> dict[RunRef, list[Alert]]:
    refs = [r.ref for r in cache.runs()] if refs is None else refs
    found = {ref: alerts for ref in refs if (alerts := check_run(cache, ref, now, th))}
    for ref, alerts in job_alerts(cache).items():
        if ref in refs:
            found[ref] = sorted(found.get(ref, []) + alerts, key=lambda a: -LEVELS.get(a.level, 1))
    return found


def job_alerts(cache: SeriesCache) -> dict[RunRef, list[Alert]]:
    """A multi-rank job's alerts, on the run of the rank they name (resplot/data/ranks.py): a
    straggler still slow in the points seen live, and a hung collective."""
    out: dict[RunRef, list[Alert]] = {}
    for members in ranks.jobs_in(cache).values():
        by_rank = {r.rank: r.ref for r in members}
        for s in ranks.live_stragglers(cache, members):
            ref = by_rank[s.rank]
            out.setdefault(ref, []).append(Alert(ref, STRAGGLER, "warning", s.message(), s.since))
        hang = ranks.job_hang(cache, members)
        if hang is not None:
            ref = by_rank.get(hang.culprits[0]) if hang.culprits else members[0].ref
            out.setdefault(ref, []).append(Alert(ref, HANG, "error", hang.text(), hang.step))
    return out


def summary(alerts: dict[RunRef, list[Alert]], names: dict[RunRef, str]) -> str:
    """One line for the status bar."""
    if not alerts:
        return ""
    count = sum(len(a) for a in alerts.values())
    worst = max((a for lst in alerts.values() for a in lst), key=lambda a: LEVELS.get(a.level, 1))
    name = names.get(worst.run, worst.run.uid[:8])
    more = f" (+{count - 1} more)" if count > 1 else ""
    return safe(f"⚠ {name}: {worst.message}{more}")
