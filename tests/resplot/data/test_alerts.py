"""Alerts computed from a filled SeriesCache (the real structure the sources fill); no Qt.

Most cases fill it as points arriving live (summaries folded, live tails kept); the last ones
as a store's history read on connect (summary rows only), where alerts must still work."""

from __future__ import annotations

import numpy as np

from resplot.data.alerts import STACK_LINES, Thresholds, check_all, check_run, summary
from resplot.data.cache import SeriesCache, Summary
from resplot.data.model import Event, RunInfo, RunRef
from schema.store.rollup import fold

T0 = 1_700_000_000.0
REF = RunRef("local", "/tmp/reslog.db", "c" * 32)


def _cache(status="running", loss=None, step_s=1.0, n=100, **sys_series) -> SeriesCache:
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "lm-small", status, T0, T0 + n * step_s)])
    steps = np.arange(n)
    walls = T0 + steps * step_s
    loss = np.linspace(4.0, 2.0, n) if loss is None else np.asarray(loss, dtype=float)
    cache.add_live(REF, "train/loss", steps, walls, loss, epoch=1)
    for key, values in sys_series.items():
        values = np.asarray(values, dtype=float)
        cache.add_live(
            REF, key.replace("__", "/"), steps[: len(values)], walls[: len(values)], values, epoch=1
        )
    return cache


def _history(status="running", step_s=1.0, n=100, **series) -> SeriesCache:
    """A cache that knows the series only from their summary rows (history, no live points)."""
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "lm-small", status, T0, T0 + n * step_s)])
    steps = list(range(n))
    walls = [T0 + s * step_s for s in steps]
    for key, values in series.items():
        values = [None if v != v else float(v) for v in values]
        agg = fold(steps[: len(values)], walls[: len(values)], values)
        tail = (steps[len(values) - 1], walls[len(values) - 1])
        cache.set_summaries(REF, {key.replace("__", "/"): Summary(agg, 1, tail)})
    return cache


def kinds(alerts):
    return sorted(a.kind for a in alerts)


def test_healthy_run_has_no_alert():
    cache = _cache(sys__gpu0__util=np.full(100, 97.0), sys__gpu0__temp_c=np.full(100, 70.0))
    assert check_run(cache, REF, now=T0 + 100) == []


def test_nan_loss_is_an_error_naming_the_step():
    loss = np.linspace(4, 2, 100)
    loss[42] = np.nan
    loss[60] = np.inf
    alerts = check_run(_cache(loss=loss), REF, now=T0 + 100)
    assert kinds(alerts) == ["nan"]
    assert alerts[0].level == "error" and alerts[0].step == 42
    assert "NaN at step 42" in alerts[0].message and "2 non-finite" in alerts[0].message


def test_inf_loss_is_named_as_inf():
    loss = np.linspace(4, 2, 100)
    loss[10] = -np.inf
    (alert,) = check_run(_cache(loss=loss), REF, now=T0 + 100)
    assert "-inf at step 10" in alert.message


def test_quiet_run_after_k_times_its_median_step_time():
    cache = _cache(step_s=10.0)  # last point at T0 + 990, median gap 10 s
    th = Thresholds(quiet_factor=5.0, quiet_min_s=1.0)
    assert check_run(cache, REF, now=T0 + 990 + 45, th=th) == []
    alerts = check_run(cache, REF, now=T0 + 990 + 60, th=th)
    assert kinds(alerts) == ["quiet"] and "no new step for 1m00s" in alerts[0].message


def test_a_run_its_writer_flagged_stalled_is_an_alert_at_once():
    cache = _cache(status="stalled", step_s=10.0)  # the writer's stall_after already passed
    (alert,) = check_run(cache, REF, now=T0 + 990 + 30)
    assert alert.kind == "stalled" and alert.step == 99
    assert "stalled after step 99: no step for 30s" in alert.message


def test_a_stalled_alert_carries_where_the_run_hangs():
    cache = _cache(status="stalled", step_s=10.0)
    stack = 'Thread "MainThread" (the thread that called reslog.init):\n' + "".join(
        f'  File "train.py", line {i}, in wait_for_allreduce\n' for i in range(60)
    )
    cache.add_events([Event(REF, 1, T0 + 990, None, "stall", "warning", "stalled: no step", stack)])
    (alert,) = check_run(cache, REF, now=T0 + 990 + 30)
    assert alert.message.endswith("; hover for where it hangs")
    lines = alert.detail.splitlines()
    assert lines[0].startswith('Thread "MainThread"') and lines[1] == "  … 20 outer lines"
    assert lines[-1] == '  File "train.py", line 59, in wait_for_allreduce'  # the innermost
    assert len(lines) == 2 + STACK_LINES


def test_a_crashed_run_is_an_alert_naming_its_last_step():
    (alert,) = check_run(_cache(status="crashed", step_s=10.0), REF, now=T0 + 995)
    assert alert.kind == "crashed" and alert.message.startswith("crashed after step 99")


def test_how_long_a_run_has_been_silent_reads_in_days_hours_and_minutes():
    """A run that crashed two days ago said "no heartbeat for 187200 s"."""
    gone = T0 + 1000  # its last heartbeat (100 steps of 10 s)
    (alert,) = check_run(_cache(status="crashed", step_s=10.0), REF, now=gone + 2 * 86400 + 14400)
    assert alert.message.endswith("sent no heartbeat for 2d04h")


def test_finished_run_is_never_stalled():
    cache = _cache(status="finished", step_s=10.0)
    assert check_run(cache, REF, now=T0 + 10_000) == []


def test_gpu_utilisation_drop():
    util = np.r_[np.full(80, 98.0), np.full(20, 20.0)]
    alerts = check_run(
        _cache(sys__gpu1__util=util), REF, now=T0 + 100, th=Thresholds(util_window_s=19)
    )
    assert kinds(alerts) == ["gpu_util_drop"] and "GPU1 utilisation 20%" in alerts[0].message


def test_idle_gpu_all_along_is_not_a_drop():
    alerts = check_run(_cache(sys__gpu0__util=np.full(100, 3.0)), REF, now=T0 + 100)
    assert alerts == []


def test_temperature_and_throttle_reasons():
    temp = np.r_[np.full(90, 70.0), np.full(10, 88.0)]
    throttle = np.zeros(100)
    throttle[50:60] = 0x4 | 0x1  # power cap (+ idle, which is not a slowdown)
    throttle[70] = 0x40
    alerts = check_run(
        _cache(sys__gpu0__temp_c=temp, sys__gpu0__throttle=throttle), REF, now=T0 + 100
    )
    assert kinds(alerts) == ["gpu_temp", "throttled"]
    msgs = " | ".join(a.message for a in alerts)
    assert "GPU0 reached 88 °C" in msgs
    assert "power cap, hw thermal" in msgs and "11% of samples" in msgs


def test_idle_and_application_clock_bits_are_not_throttling():
    alerts = check_run(
        _cache(sys__gpu0__throttle=np.full(100, 0x1 | 0x2 | 0x100)), REF, now=T0 + 100
    )
    assert alerts == []


def test_alerts_logged_by_the_run_are_included_most_severe_first():
    loss = np.linspace(4, 2, 100)
    loss[5] = np.nan
    cache = _cache(loss=loss)
    cache.add_events(
        [
            Event(REF, 1, T0 + 3, 3, "alert", "warning", "grad norm spiked"),
            Event(REF, 2, T0 + 4, 4, "checkpoint", "info", "step 4"),
        ]
    )
    alerts = check_run(cache, REF, now=T0 + 100)
    assert [a.kind for a in alerts] == ["nan", "alert"]
    assert alerts[1].message == "grad norm spiked"
    by_run = check_all(cache, now=T0 + 100)
    assert list(by_run) == [REF]
    line = summary(by_run, {REF: "lm-small"})
    assert line.startswith("⚠ lm-small: train/loss is NaN") and "(+1 more)" in line


def test_alerts_from_history_alone_use_the_summary_rows():
    loss = np.linspace(4, 2, 100)
    loss[[7, 8]] = np.nan
    temp = np.r_[np.full(90, 70.0), np.full(10, 91.0)]
    throttle = np.zeros(100)
    throttle[3] = 0x4
    cache = _history(
        train__loss=loss, sys__gpu2__temp_c=temp, sys__gpu2__throttle=throttle, step_s=10.0
    )
    alerts = check_run(cache, REF, now=T0 + 990 + 200, th=Thresholds(quiet_min_s=1.0))
    by_kind = {a.kind: a for a in alerts}
    assert sorted(by_kind) == ["gpu_temp", "nan", "quiet", "throttled"]
    assert by_kind["nan"].message == "train/loss is NaN at step 7 (2 non-finite points)"
    assert by_kind["nan"].step == 7
    assert by_kind["gpu_temp"].step == 90 and "GPU2 reached 91 °C" in by_kind["gpu_temp"].message
    assert by_kind["throttled"].message == "GPU2 throttled (power cap)"
    assert "no new step for 3m20s (median step gap 10.00 s)" in by_kind["quiet"].message
