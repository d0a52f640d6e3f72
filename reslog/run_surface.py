"""The parts of a Run that make `import reslog as wandb` work: identity (`id`, `dir`, `url`),
`config`, `define_metric`, `watch`, wandb's `alert`/`finish` arguments, and the lenient slow
path of `log()` (reslog.lenient). Mixed into reslog.tracked_run.Run.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any

from reslog.lenient import lenient_record
from reslog.values import as_json, redact, storable_text

if TYPE_CHECKING:
    from reslog.model_watch import ModelWatch
    from reslog.run_config import Config

_LEVELS = {
    "info": "info",
    "warn": "warning",
    "warning": "warning",
    "error": "error",
}


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel of the first frame outside reslog (the user's log() call)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("reslog."):
        frame, level = frame.f_back, level + 1
    return level


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
        return "finished" if exit_code == 0 else "failed"
    return status


class WandbSurface:
    """Mixin: needs the Run's uid, _known, _writer, _step, _closed, event()."""

    config: Config
    _dir: str
    _url: str
    group: str
    job_type: str
    _partial: dict[str, Any]
    _partial_texts: list[tuple[str, str]]
    _partial_step: int | None
    _skipped: dict[str, int]
    _metrics: dict[str, dict[str, Any]]
    _watches: list[ModelWatch]

    def _init_surface(self, config: Config, dir: str, url: str, group: str, job_type: str) -> None:
        self.config = config
        self._dir, self._url = dir, url
        self.group, self.job_type = group, job_type
        self._partial = {}
        self._partial_texts = []
        self._partial_step = None
        self._skipped = {}
        self._metrics = {}
        self._watches = []

    @property
    def id(self) -> str:
        """wandb's run id: this run's uid (init(id=...) chooses it)."""
        return self.uid  # type: ignore[attr-defined]

    @property
    def dir(self) -> str:
        """A local folder for the run's files: init(dir=...), else the SQLite store's folder,
        else the working directory."""
        return self._dir

    @property
    def url(self) -> str:
        """Where the run is: "<store>#<uid>" (a local path for a SQLite store)."""
        return self._url

    # -- log(): the slow path ---------------------------------------------------------------------

    def _lenient(self, metrics: Any, step: Any, commit: bool | None) -> dict[str, Any] | None:
        """The record one log() call stores (None: commit=False held it for the next call)."""
        record, texts = lenient_record(metrics, self._known, self._skip)  # type: ignore[attr-defined]
        if commit is False:
            self._partial.update(record)
            self._partial_texts += texts
            if step is not None:
                self._partial_step = step
            return None
        if self._partial:
            held, self._partial = self._partial, {}
            held.update(record)
            record = held
        if self._partial_texts:
            texts, self._partial_texts = self._partial_texts + texts, []
        if self._partial_step is not None:
            if step is None:  # log() takes self._step as the default step, after this
                step = self._step = self._partial_step  # type: ignore[attr-defined]
            self._partial_step = None
        if texts:
            self._log_texts(texts, step)
        return record

    def _log_texts(self, texts: list[tuple[str, str]], step: Any) -> None:
        from reslog.tracked_run import _check_step

        at = self._step if step is None else _check_step(step)  # type: ignore[attr-defined]
        wall = time.time()
        append = self._writer.events.append  # type: ignore[attr-defined]
        for key, value in texts:
            append((wall, at, "text", "info", storable_text(key), storable_text(value)))

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
            stacklevel=_user_stacklevel(),
        )
        self.event("skipped", title[:2000], level="warning")  # type: ignore[attr-defined]

    def _report_skipped(self) -> None:
        """At finish: how many values each skipped key had (one event)."""
        if not self._skipped:
            return
        total = sum(self._skipped.values())
        body = "\n".join(f"{k}: {n}" for k, n in sorted(self._skipped.items()))
        title = f"{total} logged values were not stored ({len(self._skipped)} keys)"
        self.event("skipped", title, body=body, level="warning")  # type: ignore[attr-defined]

    # -- config -----------------------------------------------------------------------------------

    def _config_changed(self, changed: dict[str, Any]) -> None:
        if self._closed:  # type: ignore[attr-defined]
            return
        names = ", ".join(list(changed)[:10]) + (", ..." if len(changed) > 10 else "")
        body = json.dumps(redact(changed), default=as_json)
        self.event("config", f"config updated: {names}"[:2000], body=body)  # type: ignore[attr-defined]

    # -- wandb calls ------------------------------------------------------------------------------

    def define_metric(
        self,
        name: str,
        step_metric: str | None = None,
        *,
        step_sync: bool | None = None,
        hidden: bool | None = None,
        summary: str | None = None,
        goal: str | None = None,
        overwrite: bool | None = None,
    ) -> None:
        """Record how a key (or glob, "train/*") is charted: `step_metric` is its default x
        axis. Stored as a "metric" event; the other wandb options are kept with it."""
        options = {
            k: v
            for k, v in {
                "step_metric": step_metric,
                "hidden": hidden,
                "summary": summary,
                "goal": goal,
            }.items()
            if v is not None
        }
        self._metrics[str(name)] = options
        self.event("metric", storable_text(name)[:2000], body=json.dumps(options))  # type: ignore[attr-defined]

    def watch(
        self,
        models: Any,
        criterion: Any = None,
        log: str | None = "gradients",
        log_freq: int = 1000,
        idx: int | None = None,
        log_graph: bool = False,
    ) -> None:
        """Log per-parameter gradient and/or parameter L2 norms every `log_freq` forward calls
        (reslog.model_watch)."""
        from reslog.model_watch import ModelWatch

        if log is None:
            return
        self._watches.append(ModelWatch(self, models, log=log, log_freq=log_freq))

    def unwatch(self, models: Any = None) -> None:
        for w in list(self._watches):
            if models is None or w.watches(models):
                w.remove()
                self._watches.remove(w)

    def _watch_values(self, values: dict[str, Any]) -> None:
        """Norms from model_watch: joined to the next committed log() call."""
        self._partial.update(values)
        self._known.update(values)  # type: ignore[attr-defined]

    def _label(self, **_: Any) -> None:
        """wandb-internal telemetry that Hugging Face's WandbCallback calls: nothing to record."""

    def _end_surface(self) -> None:
        for w in self._watches:
            w.remove()
        self._watches = []
        self._report_skipped()
