"""X coordinates for each x-axis mode: auto (the default: the run's step metric or step counter
where it logs one, else its step), step, wall time, time since the run started, tokens, the
run's step metric.

Wall time is in matplotlib date units (days since 1970-01-01, matplotlib's default epoch) so
date tick formatters apply (labelled in the local time zone: resplot/draw/axes_setup.py);
relative time is in hours; tokens come from the run's cumulative `train/tokens` series (its
points, or each bucket's last value when zoomed out) interpolated on step, so points logged at
other steps get a token count too. Any other logged counter (`iter`, `epoch`,
`train/global_step`) is an x axis the same way: mode "key:NAME" places points by NAME's value
interpolated on step (resplot.data.key_roles.counter_keys lists the candidates), and "metric"
by the key the run named in `define_metric(..., step_metric=KEY)`: see step_metric().
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping

import numpy as np

from resplot.data.decimate import in_order
from resplot.data.key_roles import key_for, step_counter
from resplot.data.model import Event, RunInfo
from schema.store.rollup import LAST, STEP_HI, VMAX

TOKENS_KEY = "train/tokens"
LABELS = {
    "auto": "step",
    "step": "step",
    "wall": "wall time",
    "relative": "hours since start",
    "tokens": "tokens",
    "metric": "step metric (define_metric)",
}
KEY_PREFIX = "key:"
Guide = tuple[np.ndarray, np.ndarray]  # (steps, cumulative tokens), steps ascending


def is_key_mode(mode: str) -> bool:
    return mode.startswith(KEY_PREFIX) and len(mode) > len(KEY_PREFIX)


def is_guided(mode: str) -> bool:
    """Whether the mode places points by another series of the run (tokens, a counter, the
    step metric) rather than by step or time ("auto": where the run has one)."""
    return mode in ("tokens", "metric", "auto") or is_key_mode(mode)


def steps_like(mode: str) -> bool:
    """Whether x on this axis counts optimizer steps (the hover readout reads it as a step)."""
    return mode in ("step", "auto")


def label(mode: str) -> str:
    """The axis's name under a snapshot's charts and in the hover ("wall time (CET)": the
    times are this machine's local ones)."""
    if mode == "wall":
        return f"{LABELS[mode]} ({time.strftime('%Z')})"
    return mode[len(KEY_PREFIX) :] if is_key_mode(mode) else LABELS[mode]


def guide_key(mode: str, keys, events: Iterable[Event] = ()) -> str | None:
    """The logged key that places points on this axis (tokens, a counter, the run's step
    metric), None for the step and time axes; `keys` are the run's keys (tokens go by whatever
    name it logged), `events` its events (where define_metric is recorded)."""
    if mode == "tokens":
        return key_for(keys, "tokens") or TOKENS_KEY
    if mode == "metric":
        return step_metric(events)
    if mode == "auto":
        # The run's own choice (define_metric), else a step counter it logs: Hugging Face's
        # train/global_step (its logged step is the logging call counter: 0..612 for 6,000
        # steps), nanoGPT's iter, Lightning's trainer/global_step. Else its steps.
        return step_metric(events) or step_counter(keys)
    if is_key_mode(mode):
        return mode[len(KEY_PREFIX) :]
    return None


def tokens_at(steps: np.ndarray, tok_steps: np.ndarray, tok_values: np.ndarray) -> np.ndarray:
    """Cumulative tokens at `steps`, linear between logged points, extrapolated at the ends by
    the average tokens per step (so a point logged after the last tokens update still places)."""
    ok = np.isfinite(tok_values)
    ts, tv = tok_steps[ok].astype(np.float64), tok_values[ok]
    if len(ts) == 0:
        return np.full(len(steps), np.nan)
    ts, tv = in_order(ts, tv)
    s = steps.astype(np.float64)
    out = np.interp(s, ts, tv)
    if len(ts) > 1 and ts[-1] > ts[0]:
        rate = (tv[-1] - tv[0]) / (ts[-1] - ts[0])
        out = np.where(s > ts[-1], tv[-1] + (s - ts[-1]) * rate, out)
        out = np.where(s < ts[0], tv[0] - (ts[0] - s) * rate, out)
    return out


def x_values(
    mode: str,
    run: RunInfo | None,
    steps: np.ndarray,
    walls: np.ndarray,
    guide: Guide | None = None,
) -> np.ndarray | None:
    """X for points of one run; None when the mode cannot place them (no tokens logged, no
    step metric defined)."""
    if mode == "step":
        return steps.astype(np.float64)
    if mode == "wall":
        return walls / 86400.0
    if mode == "relative":
        start = run.created_at if run is not None else (float(walls.min()) if len(walls) else 0)
        return (walls - start) / 3600.0
    if is_guided(mode):
        if guide is None or not np.isfinite(guide[1]).any():
            # (a counter logged as NaN throughout places nothing: said as not on this axis)
            return steps.astype(np.float64) if mode == "auto" else None
        return tokens_at(steps, guide[0], guide[1])
    raise ValueError(f"unknown x-axis mode {mode!r}")


def event_xs(
    mode: str,
    run: RunInfo | None,
    steps: list[int | None],
    walls: list[float],
    guide: Guide | None,
) -> np.ndarray:
    """Where events go on the x-axis, NaN where one cannot (an event without a step on a
    step or tokens axis, a mode the run cannot place)."""
    walls_a = np.asarray(walls, np.float64)
    out = np.full(len(walls_a), np.nan)
    if mode in ("wall", "relative"):
        xs = x_values(mode, run, np.zeros(len(walls_a), dtype=np.int64), walls_a)
        return out if xs is None else xs
    has = np.array([s is not None for s in steps], bool)
    if has.any():
        at = np.array([s for s in steps if s is not None], np.int64)
        xs = x_values(mode, run, at, walls_a[has], guide)
        if xs is not None:
            out[has] = xs
    return out


def step_metric(events: Iterable[Event]) -> str | None:
    """The key a run chose as its x axis with `define_metric(name, step_metric=KEY)` ("metric"
    events, reslog.Run.define_metric): the newest one defined for "*", else the newest any."""
    chosen: dict[str, str] = {}
    for ev in events:
        if ev.kind != "metric":
            continue
        try:
            key = json.loads(ev.body or "{}").get("step_metric")
        except (ValueError, AttributeError):
            continue
        if isinstance(key, str) and key:
            chosen.pop(ev.title, None)
            chosen[ev.title] = key
    if not chosen:
        return None
    return chosen.get("*") or list(chosen.values())[-1]


def own_step(series: Mapping[str, tuple], events: Iterable[Event] = ()) -> int | None:
    """The last step of a run on its own step axis (what the charts' default axis, "auto",
    counts): the last value of its step metric or step counter where it logs one (nanoGPT's
    `iter`, Hugging Face's `train/global_step`: their logged step is the logging call count,
    20 against 5,000), else the highest step any series reached. `series`: key -> summary
    aggregate."""
    key = guide_key("auto", series.keys(), events)
    agg = series.get(key) if key is not None else None
    if agg is not None:
        value = agg[LAST] if agg[LAST] is not None and math.isfinite(agg[LAST]) else agg[VMAX]
        if value is not None and math.isfinite(value):
            return round(value)
    return max((int(a[STEP_HI]) for a in series.values()), default=None)
