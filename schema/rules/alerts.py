"""What the trackers alert on: every alert kind with what it means, the GPU key parse and reslog's
per-GPU series.

`reslog watch` prints a run's new status or an alert kind (its hooks get it as RESLOG_STATUS);
the viewer shows alerts in its run table and status bar (resplot/data/alerts.py) and says each
one, and a run's end, once as a desktop notification (resplot/ui/notify.py, where the kind is
also what a user mutes). A kind means one thing wherever it is said: "stalled" is the run status
of schema/store/status.py and nothing else; a chart that merely went quiet is QUIET.
"""

from __future__ import annotations

import re

from schema.store.status import (  # noqa: F401 (END_STATUSES re-exported: the notifications' list)
    CRASHED,
    END_STATUSES,
    FAILED,
    FINISHED,
    KILLED,
    RUNNING,
    STALLED,
)

# Run statuses (schema.store.status) are kinds too, said when a run enters them; a run's end
# (END_STATUSES) is news once, never an alert that stays.

# Alerts read from a run's series and events. `reslog watch` and the viewer read the same store
# at different moments (watch: as points arrive; the viewer: over the whole run), and say the
# same thing under the same kind.
NAN = "nan"
QUIET = "quiet"
THROTTLED = "throttled"
GPU_UTIL_DROP = "gpu_util_drop"
GPU_TEMP = "gpu_temp"
ALERT = "alert"  # run.alert(): also the kind of the event it writes
# A job's ranks (schema/rules/ranks.py), judged across its runs by schema/rules/stragglers.py and
# hangs.py.
STRAGGLER = "straggler"
STRAGGLER_END = "straggler_end"
HANG = "hang"
# The run's own events (events.kind) a person wants to hear about as they happen: `reslog watch`
# passes them on under their kind. The rest (checkpoints, notes) are not news.
WATCHED_EVENTS = (ALERT, "stall", "drop", "writer")

KINDS: dict[str, str] = {
    RUNNING: "run status: a new run (reslog watch), or one logging steps again after a stall",
    STALLED: "run status: running, but its writer saw no log() for stall_after, or its process "
    "is alive on its host and its heartbeat stopped (schema/store/status.py)",
    CRASHED: "run status: its process is gone, or (seen from another host) no heartbeat for "
    "stale_after",
    FINISHED: "run status: finish(), or the program ended normally",
    FAILED: "run status: an uncaught exception, or sys.exit with a non-zero code",
    KILLED: "run status: SIGTERM, SIGHUP or Ctrl+C",
    NAN: "a key outside sys/ gained NaN or ±inf points (reslog watch); the viewer keeps it as an "
    "error while train/loss or valid/loss holds one",
    QUIET: "viewer: a running run has logged no new step for 5× its median time between steps "
    "(and at least 30 s); a guess from the chart, not a status",
    THROTTLED: "a GPU's sys/gpuN/throttle reading gained a slowdown reason (reslog watch: the "
    "newest reading; the viewer: at any point of the run)",
    GPU_UTIL_DROP: "viewer: a busy GPU's utilisation over the last minute fell under half its "
    "mean over the run",
    GPU_TEMP: "viewer: a GPU reached 85 °C",
    ALERT: "the run called run.alert() (an event of kind alert)",
    STRAGGLER: "a job's rank whose own work (data, forward, backward, optimizer; not its wait in "
    "collectives) was slower than the other ranks' for a sustained stretch: names rank, host, "
    "phase, how much and from which step (schema/rules/stragglers.py)",
    STRAGGLER_END: "a straggler's phase is back in line with the other ranks'",
    HANG: "a job's ranks stalled with some inside a collective: names the rank(s) that never "
    "entered it, with their innermost frames (schema/rules/hangs.py)",
    "stall": "reslog watch: the writer's stall event, with every thread's stack",
    "drop": "reslog watch: the run's buffer was full and points were dropped",
    "writer": "reslog watch: the store was unwritable for a while, or its file was deleted and "
    "restored",
}

# Kinds as earlier versions named them: a muted kind saved in settings is read through this.
RENAMED = {"nan_loss": NAN, "gpu_throttle": THROTTLED, "logged": ALERT}

_GPU_KEY = re.compile(r"sys/gpu(\d+)/(.*)", re.DOTALL)


def gpu_key(name: str) -> tuple[int, str] | None:
    """(GPU ordinal, what) of a per-GPU system key `sys/gpu{i}/{what}`; None for another key."""
    m = _GPU_KEY.match(name)
    return None if m is None else (int(m.group(1)), m.group(2))


# reslog's per-GPU series, `sys/gpu{i}/{name}`: name -> (what it measures, its unit). reslog's
# telemetry writes them (reslog/training/system.py reads each from NVML); the viewer's System
# page finds them by these names (resplot/data/key_roles.py). docs/system-metrics.md says more.
GPU_SERIES: dict[str, tuple[str, str]] = {
    "util": ("util", "%"),
    "mem_used_gib": ("mem_used", "GiB"),
    "mem_total_gib": ("mem_total", "GiB"),
    "temp_c": ("temp", "°C"),
    "power_w": ("power", "W"),
    "power_limit_w": ("power_limit", "W"),
    "fan_pct": ("fan", "%"),
    "sm_clock_mhz": ("sm_clock", "MHz"),
    "throttle": ("throttle", ""),
}
