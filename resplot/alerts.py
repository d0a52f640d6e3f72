"""Alerts derived from the cache: NaN/inf loss, stalled run, GPU utilisation drop, hot or
throttled GPU, plus the alerts a run logged itself (`run.alert`). Pure functions, no Qt."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from resplot.cache import SeriesCache
from resplot.model import RunRef

LOSS_KEYS = ("train/loss", "valid/loss")
_GPU_KEY = re.compile(r"^sys/gpu(\d+)/(util|temp_c|throttle)$")
# NVML clock-event reasons that mean the GPU is being held back (idle, application clocks and
# display clock settings are not slowdowns).
THROTTLE_BITS = {
    0x4: "power cap",
    0x8: "hw slowdown",
    0x20: "sw thermal",
    0x40: "hw thermal",
    0x80: "power brake",
}
LEVELS = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Thresholds:
    stall_factor: float = 5.0  # stalled after k × median time between logged steps
    stall_min_s: float = 30.0  # ... and never before this (flush + poll delays)
    util_window_s: float = 60.0  # recent window compared to the run's typical utilisation
    util_drop_ratio: float = 0.5  # recent mean below half of the run's median
    util_busy_pct: float = 50.0  # only for GPUs that were busy (median above this)
    temp_c: float = 85.0


@dataclass(frozen=True)
class Alert:
    run: RunRef
    kind: str  # nan_loss, stalled, gpu_util_drop, gpu_temp, gpu_throttle, logged
    level: str  # info, warning, error
    message: str
    step: int | None = None
    wall: float | None = None


def nan_loss(cache: SeriesCache, ref: RunRef) -> list[Alert]:
    out = []
    for key in LOSS_KEYS:
        s = cache.series(ref, key)
        if s is None:
            continue
        steps, walls, values = s
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            i = int(bad[0])
            what = "NaN" if np.isnan(values[i]) else f"{values[i]:+}"
            out.append(
                Alert(ref, "nan_loss", "error",
                      f"{key} is {what} at step {int(steps[i])} ({len(bad)} non-finite points)",
                      int(steps[i]), float(walls[i]))
            )  # fmt: skip
    return out


def _progress_series(cache: SeriesCache, ref: RunRef) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, walls) of the key that best shows training progress."""
    s = cache.series(ref, "train/loss") or cache.series(ref, "time/step")
    if s is None:
        candidates = [k for k in cache.keys(ref) if not k.startswith("sys/")]
        lengths = {k: len(cache.series(ref, k)[0]) for k in candidates}
        if not lengths:
            return None
        s = cache.series(ref, max(lengths, key=lengths.get))
    return s[0], s[1]


def stalled(cache: SeriesCache, ref: RunRef, now: float, th: Thresholds) -> list[Alert]:
    run = cache.run(ref)
    if run is None or run.status not in ("running", "crashed"):
        return []
    s = _progress_series(cache, ref)
    if run.status == "crashed" and s is not None and len(s[0]):
        # The heartbeat went stale (SIGKILL, OOM, a lost host): the run stalled for good, however
        # short its silence is next to its step time. Resuming or finishing it clears this.
        return [
            Alert(ref, "stalled", "warning",
                  f"crashed: no heartbeat for {now - run.heartbeat_at:.0f} s after step "
                  f"{int(s[0][-1])}", int(s[0][-1]), float(s[1][-1]))
        ]  # fmt: skip
    if s is None or len(s[0]) < 3:
        return []
    steps, walls = s
    # Time between consecutive new steps (several keys per step share one wall time).
    new = np.flatnonzero(np.diff(steps) != 0) + 1
    gaps = np.diff(walls[np.concatenate(([0], new))])
    gaps = gaps[gaps > 0]
    if len(gaps) == 0:
        return []
    limit = max(th.stall_factor * float(np.median(gaps)), th.stall_min_s)
    idle = now - float(walls[-1])
    if idle <= limit:
        return []
    return [
        Alert(ref, "stalled", "warning",
              f"no new step for {idle:.0f} s (median step gap {np.median(gaps):.2f} s)",
              int(steps[-1]), float(walls[-1]))
    ]  # fmt: skip


def gpu_alerts(cache: SeriesCache, ref: RunRef, th: Thresholds) -> list[Alert]:
    out = []
    for key in cache.keys(ref):
        m = _GPU_KEY.match(key)
        if not m:
            continue
        gpu, what = m.group(1), m.group(2)
        steps, walls, values = cache.series(ref, key)
        ok = np.isfinite(values)
        steps, walls, values = steps[ok], walls[ok], values[ok]
        if len(values) == 0:
            continue
        if what == "util" and len(values) >= 10:
            recent = walls >= walls[-1] - th.util_window_s
            earlier = values[~recent]
            if len(earlier) >= 5:
                typical = float(np.median(earlier))
                now_mean = float(values[recent].mean())
                if typical >= th.util_busy_pct and now_mean < th.util_drop_ratio * typical:
                    out.append(
                        Alert(ref, "gpu_util_drop", "warning",
                              f"GPU{gpu} utilisation {now_mean:.0f}% (typically {typical:.0f}%)",
                              int(steps[-1]), float(walls[-1]))
                    )  # fmt: skip
        elif what == "temp_c":
            hot = np.flatnonzero(values >= th.temp_c)
            if len(hot):
                i = int(hot[-1])
                out.append(
                    Alert(ref, "gpu_temp", "warning",
                          f"GPU{gpu} reached {values.max():.0f} °C (≥ {th.temp_c:.0f} °C)",
                          int(steps[i]), float(walls[i]))
                )  # fmt: skip
        elif what == "throttle":
            bits = values.astype(np.int64)
            mask = sum(THROTTLE_BITS)
            hit = np.flatnonzero(bits & mask)
            if len(hit):
                seen = np.bitwise_or.reduce(bits[hit])
                reasons = ", ".join(name for bit, name in THROTTLE_BITS.items() if seen & bit)
                i = int(hit[-1])
                share = 100.0 * len(hit) / len(bits)
                out.append(
                    Alert(ref, "gpu_throttle", "warning",
                          f"GPU{gpu} throttled ({reasons}) in {share:.0f}% of samples",
                          int(steps[i]), float(walls[i]))
                )  # fmt: skip
    return out


def logged(cache: SeriesCache, ref: RunRef) -> list[Alert]:
    return [
        Alert(ref, "logged", ev.level if ev.level in LEVELS else "warning", ev.title, ev.step,
              ev.wall)
        for ev in cache.events(ref)
        if ev.kind == "alert"
    ]  # fmt: skip


def check_run(
    cache: SeriesCache, ref: RunRef, now: float | None = None, th: Thresholds | None = None
) -> list[Alert]:
    """Every alert for one run, most severe first."""
    th = th or Thresholds()
    now = time.time() if now is None else now
    found = nan_loss(cache, ref) + stalled(cache, ref, now, th) + gpu_alerts(cache, ref, th)
    found += logged(cache, ref)
    return sorted(found, key=lambda a: -LEVELS.get(a.level, 1))


def check_all(
    cache: SeriesCache, refs: list[RunRef] | None = None, now: float | None = None,
    th: Thresholds | None = None,
) -> dict[RunRef, list[Alert]]:  # fmt: skip
    refs = [r.ref for r in cache.runs()] if refs is None else refs
    return {ref: alerts for ref in refs if (alerts := check_run(cache, ref, now, th))}


def summary(alerts: dict[RunRef, list[Alert]], names: dict[RunRef, str]) -> str:
    """One line for the status bar."""
    if not alerts:
        return ""
    count = sum(len(a) for a in alerts.values())
    worst = max((a for lst in alerts.values() for a in lst), key=lambda a: LEVELS.get(a.level, 1))
    name = names.get(worst.run, worst.run.uid[:8])
    more = f" (+{count - 1} more)" if count > 1 else ""
    return f"⚠ {name}: {worst.message}{more}"
