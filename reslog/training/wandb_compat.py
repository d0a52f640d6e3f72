"""The parts of a Run that make `import reslog as wandb` work beyond `log()`'s fast path: the
lenient slow path of `log()` (reslog.training.lenient) with wandb's `commit=False`,
`define_metric`, `watch`, config change events, and wandb's `alert`/`finish` arguments. A Run
owns one WandbCompat and delegates these calls to it.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections import deque
from collections.abc import Callable
from typing import Any

from reslog.redact import redact
from reslog.training.lenient import lenient_record
from reslog.training.model_watch import ModelWatch
from reslog.training.values import as_json, check_step, storable_text
from schema.store.status import FAILED, FINISHED

_LEVELS = {
    "info": "info",
    "warn": "warning",
    "warning": "warning",
    "error": "error",
}


def user_stacklevel() -> int:
    """warnings.warn's stacklevel of the first frame outside reslog (the user's log() call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and _ours(frame.f_globals.get("__name__", "")):
        frame, level = frame.f_back, level + 1
    return level


def _ours(module: str) -> bool:
    return module.startswith("reslog.") or module == "reslog"


def alert_level(level: Any) -> str | None:
    """An event level from reslog's or wandb's spelling ("WARN", AlertLevel.ERROR); None if
    it is neither."""
    text = getattr(level, "value", level)
    return _LEVELS.get(text.lower()) if isinstance(text, str) else None


def exit_status(status: Any, exit_code: Any) -> str | None:
    """finish()'s status from reslog's `status` or wandb's `exit_code` (also positional)."""
    if status is not None and not isinstance(status, str):
        status, exit_code = None, status  # wandb.finish(1)
    if status is None and exit_code is not None:
        return FINISHED if exit_code == 0 else FAILED
    return status


class WandbCompat:
    """A run's wandb-only state: what commit=False (and model watches) hold for the next
    committed log() call, the count of each skipped key, define_metric's options, the watches.

    Built from the run's collaborators: its known keys (shared with its writer), the writer's
    event queue (logged text goes straight into it) and the run's `event()` (skipped keys,
    metric and config changes are events)."""

    def __init__(self, known: set[str], events: deque, event: Callable[..., None]) -> None:
        self._known = known
        self._append_event = events.append
        self._event = event
        # The Run tests this very dict on log()'s fast path: it is emptied, never replaced.
        self.held: dict[str, Any] = {}
        self._held_texts: list[tuple[str, str]] = []
        self._held_step: Any = None
        self._skipped: dict[str, int] = {}
        self._behind: dict[str, list[int]] = {}  # key -> [values, lowest step, highest step]
        self.metrics: dict[str, dict[str, Any]] = {}
        self._watches: list[ModelWatch] = []

    # -- log(): the slow path ---------------------------------------------------------------------

    def record(
        self, metrics: Any, step: Any, commit: bool | None, next_step: int, top: int
    ) -> tuple[dict[str, Any] | None, Any]:
        """(the record one log() call stores, its step): the step given, else the one a
        commit=False call held, else None (the run's `next_step`). A None record: commit=False
        held it for the next call, or its step is behind `top`, the highest step logged."""
        record, texts = lenient_record(metrics, self._known, self._skip)
        if commit is False:
            self.held.update(record)
            self._held_texts += texts
            if step is not None:
                self._held_step = step
            return None, step
        if self.held:
            held = self.held.copy()
            self.held.clear()
            held.update(record)
            record = held
        if self._held_texts:
            texts, self._held_texts = self._held_texts + texts, []
        if self._held_step is not None:
            if step is None:
                step = self._held_step
            self._held_step = None
        if step is not None and check_step(step) < top:
            self.behind({**record, **dict(texts)}, step, top)
            return None, step
        if texts:
            self._log_texts(texts, next_step if step is None else check_step(step))
        return record, step

    def behind(self, record: dict[str, Any], step: int, top: int) -> None:
        """A log() call at a step below the highest one logged: not stored, as wandb does (a
        lower step would start a new take and hide the steps logged since). One warning and
        one event per key, naming the steps; end() counts them all."""
        new = []
        for key in record:
            seen = self._behind.get(key)
            if seen is None:
                self._behind[key] = [1, step, step]
                new.append(key)
            else:
                seen[0] += 1
                seen[1], seen[2] = min(seen[1], step), max(seen[2], step)
        if not new:
            return
        names = ", ".join(new[:8]) + (f" and {len(new) - 8} more" if len(new) > 8 else "")
        title = f"not stored: {names} at step {step}, behind step {top} logged before"
        warnings.warn(
            f"reslog: {title} (steps only go forward within a process, as in wandb; a run "
            "resumed with init(resume=...) may log from a lower step again). Later calls "
            "behind the current step are counted, not warned about, and reported at finish()",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        self._event("skipped", title[:2000], level="warning")

    def _log_texts(self, texts: list[tuple[str, str]], at: int) -> None:
        wall = time.time()
        for key, value in texts:
            self._append_event((wall, at, "text", "info", storable_text(key), storable_text(value)))

    def _skip(self, key: str, why: str) -> None:
        count = self._skipped.get(key, 0)
        self._skipped[key] = count + 1
        if count:
            return
        title = f"not logged: key {key!r}: {why}"
        warnings.warn(
            f"reslog: {title}; training goes on (further values of this key are counted, "
            "not warned about)",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        self._event("skipped", title[:2000], level="warning")

    def _report_skipped(self) -> None:
        """At finish: how many values each skipped key had (one event)."""
        if not self._skipped:
            return
        total = sum(self._skipped.values())
        body = "\n".join(f"{k}: {n}" for k, n in sorted(self._skipped.items()))
        title = f"{total} logged values were not stored ({len(self._skipped)} keys)"
        self._event("skipped", title, body=body, level="warning")

    def _report_behind(self) -> None:
        """At finish: the values of each key logged behind the current step (one event)."""
        if not self._behind:
            return
        total = sum(n for n, _lo, _hi in self._behind.values())
        body = "\n".join(
            f"{k}: {n} at steps {lo}-{hi}" if lo != hi else f"{k}: {n} at step {lo}"
            for k, (n, lo, hi) in sorted(self._behind.items())
        )
        title = (
            f"{total} logged values were not stored: their step was behind one already logged "
            f"({len(self._behind)} keys)"
        )
        self._event("skipped", title, body=body, level="warning")

    # -- config -----------------------------------------------------------------------------------

    def config_changed(self, changed: dict[str, Any]) -> None:
        names = ", ".join(list(changed)[:10]) + (", ..." if len(changed) > 10 else "")
        body = json.dumps(redact(changed), default=as_json)
        self._event("config", f"config updated: {names}"[:2000], body=body)

    # -- wandb calls ------------------------------------------------------------------------------

    def define_metric(self, name: str, options: dict[str, Any]) -> None:
        self.metrics[str(name)] = options
        self._event("metric", storable_text(name)[:2000], body=json.dumps(options))

    def watch(self, models: Any, log: str | None, log_freq: int) -> None:
        if log is None:
            return
        self._watches.append(ModelWatch(self.watch_values, models, log=log, log_freq=log_freq))

    def unwatch(self, models: Any = None) -> None:
        for w in list(self._watches):
            if models is None or w.watches(models):
                w.remove()
                self._watches.remove(w)

    def watch_values(self, values: dict[str, Any]) -> None:
        """Norms from model_watch: joined to the next committed log() call."""
        self.held.update(values)
        self._known.update(values)

    def end(self) -> None:
        for w in self._watches:
            w.remove()
        self._watches = []
        self._report_skipped()
        self._report_behind()
