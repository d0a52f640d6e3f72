"""A run being logged: `Run.log()` only appends to memory; the writer thread does the rest.

`reslog.init()` (reslog.training.start) makes one."""

from __future__ import annotations

import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from reslog.training import lifecycle
from reslog.training.artifacts import Artifact, RunFiles, artifact_from
from reslog.training.config import Config
from reslog.training.store_file import StoreFile
from reslog.training.summary import Summary, summary_ops
from reslog.training.values import (
    MAX_STEP,
    MIN_STEP,
    PLAIN,
    check_key,
    check_step,
    checked,
    storable_text,
)
from reslog.training.wandb_compat import (
    WandbCompat,
    alert_level,
    exit_status,
    user_stacklevel,
)
from reslog.training.writer import DeviceRecord, Writer
from schema import EVENT_LEVELS
from schema.store.status import END_STATUSES, FAILED, FINISHED, KILLED, RUNNING

DEFAULT_WAKE_POINTS = 100_000


class Timer:
    """`with run.timer("forward"):` adds the elapsed seconds to `time/forward` of the next log()."""

    __slots__ = ("_key", "_run", "_t0")

    def __init__(self, run: Run, key: str) -> None:
        self._run = run
        self._key = key
        self._t0 = 0.0

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self._t0
        timers = self._run._timers
        timers[self._key] = timers.get(self._key, 0.0) + elapsed


class RunHooks:
    """The run as the process-exit machinery (reslog/training/lifecycle.py) sees it."""

    __slots__ = ("run",)

    def __init__(self, run: Run) -> None:
        self.run = run

    def on_exit(self, status: str | None, error: BaseException | None, reason: str) -> None:
        self.run._finish_from_hook(status, error, reason=reason)

    def on_thread_exception(self, args: threading.ExceptHookArgs) -> None:
        self.run._thread_failed(args)

    def on_interrupt(self) -> None:
        self.run._interrupted = True

    def on_fork_child(self) -> None:
        self.run._detach_after_fork()


class Run:
    """One training run being logged. Made by `reslog.init()`; see docs/reslog.md."""

    def __init__(
        self,
        engine,
        run_id: int,
        uid: str,
        *,
        project: str,
        name: str,
        step: int,
        summary: Summary,
        flush_interval: float,
        max_buffer_points: int,
        finish_timeout: float,
        rank: int,
        world_size: int,
        label: str,
        on_full: str = "drop",
        stall_after: float | None = None,
        store_file: StoreFile | None = None,
        write_timeout: float | None = None,
        config: Config,
        dir: str,
        url: str,
        group: str,
        job_type: str,
    ) -> None:
        self.uid = uid
        self.project = project
        self.name = name
        self.rank = rank
        self.world_size = world_size
        self.store = label
        self.summary = summary
        # The bare C dict.update (no version change) until the summary has hand-set keys or
        # aggregates to keep (Summary.fold); it says when.
        self._summarise = summary.fold if summary.watching else dict.update.__get__(summary)
        summary.on_watch = self._summary_watched
        self.finish_timeout = float(finish_timeout)
        self._engine = engine
        self._run_id = run_id
        self._step = step
        self._last_step: int | None = step - 1 if step > 0 else None
        # The highest step this process logged: a lower one is behind and not stored (as
        # wandb). A new process may start below the stored steps: a resume from a checkpoint,
        # which the writer's restart rule makes a new take (schema.store.rollup.is_restart).
        self._top = MIN_STEP
        self._known: set[str] = set()
        self._timers: dict[str, float] = {}
        self._timer_keys: dict[str, str] = {}
        self._closed = False
        self._finishing = False
        self._interrupted = False
        self._warned_closed = False
        self._status: str | None = None
        self._owner = threading.current_thread()
        self._pid = os.getpid()
        self._forked_from: int | None = None  # in a forked child: the parent's pid
        self._writer = Writer(
            engine,
            run_id,
            summary,
            interval=flush_interval,
            max_points=max_buffer_points,
            wake_points=min(DEFAULT_WAKE_POINTS, max(1, max_buffer_points // 4)),
            label=label,
            known=self._known,
            on_full=on_full,
            store_file=store_file,
            uid=uid,
            stall_after=stall_after,
            owner=self._owner,
            write_timeout=write_timeout,
        )
        self._put = self._writer.put
        self._sampler: Any = None
        self._compat = WandbCompat(self._known, self._writer.events, self.event)
        self._held = self._compat.held  # log() takes its fast path only while nothing is held
        self.config = config
        object.__setattr__(config, "_on_change", self._config_changed)
        self._writer.config = config
        self._dir, self._url = dir, url
        self._run_files: RunFiles | None = None  # run.save / log_artifact, on first use
        # Called first thing in finish() (integrations that feed the run, e.g. TensorBoard sync).
        self._finish_hooks: list[Callable[[], None]] = []
        self.group, self.job_type = group, job_type

    # -- the hot path -----------------------------------------------------------------------------

    def log(
        self, metrics: Mapping[str, Any], step: int | None = None, commit: bool | None = None
    ) -> None:
        """Record metrics at `step` (default: the next step). No I/O; a value never raises
        (reslog.training.lenient); commit=False holds them for the next call."""
        if self._closed:
            self._log_after_finish()
            return
        if (
            type(metrics) is dict
            and commit is None
            and not self._held
            and self._known.issuperset(metrics)
            and PLAIN.issuperset(map(type, metrics.values()))
        ):
            record = dict(metrics)
            device = False
        else:
            record, step = self._compat.record(metrics, step, commit, self._step, self._top)
            if record is None:
                return
            device = not PLAIN.issuperset(map(type, record.values()))
        if step is None:
            step = self._step
        elif type(step) is not int or not MIN_STEP <= step <= MAX_STEP:
            step = check_step(step)
        if step < self._top:
            self._compat.behind(record, step, self._top)
            return
        if self._timers:  # after every check: a rejected call must not consume the timers
            self._take_timers(record)
        self._step = step + 1
        self._last_step = self._top = step
        entry = (step, time.time(), record)
        self._put(DeviceRecord(entry) if device else entry, len(record))
        self._summarise(record)  # wandb's summary: each key's last value

    def timer(self, name: str) -> Timer:
        key = self._timer_keys.get(name)
        if key is None:
            key = check_key("time/" + check_key(name))
            self._known.add(key)
            self._timer_keys[name] = key
        return Timer(self, key)

    def _take_timers(self, record: dict[str, Any]) -> None:
        timers, self._timers = self._timers, {}
        for key, seconds in timers.items():
            record.setdefault(key, seconds)

    @property
    def step(self) -> int:
        """The step the next log() without an explicit step will use."""
        return self._step

    # -- wandb's run attributes -------------------------------------------------------------------

    @property
    def id(self) -> str:
        """wandb's run id: this run's uid (init(id=...) chooses it)."""
        return self.uid

    @property
    def dir(self) -> str:
        """A local folder for the run's files: init(dir=...), else the SQLite store's folder,
        else the working directory."""
        return self._dir

    @property
    def url(self) -> str:
        """Where the run is: "<store>#<uid>" (a local path for a SQLite store)."""
        return self._url

    # -- events and status ------------------------------------------------------------------------

    def event(self, kind: str, title: str, body: str = "", level: str = "info") -> None:
        """Record an event (checkpoint, schedule, note, …) at the last logged step."""
        if not isinstance(kind, str) or not 0 < len(kind) <= 32:
            raise ValueError(f"reslog: event kind must be a str of 1-32 characters, got {kind!r}")
        if level not in EVENT_LEVELS:
            raise ValueError(f"reslog: event level must be one of {EVENT_LEVELS}, got {level!r}")
        if self._closed:
            self._log_after_finish()
            return
        record = (
            time.time(),
            self._last_step,
            kind,
            level,
            storable_text(title),
            storable_text(body),
        )
        self._writer.events.append(record)

    def alert(
        self,
        title: str,
        level: Any = "warning",
        body: str = "",
        *,
        text: str | None = None,
        wait_duration: Any = None,
    ) -> None:
        """An event of kind "alert" (viewers highlight these). wandb's spelling works too:
        alert(title=, text=, level="WARN"), and alert(title, text, level) positionally."""
        if alert_level(level) is None and (alert_level(body) is not None or body == ""):
            level, body = body or "warning", level  # wandb's order: (title, text, level)
        self.event(
            "alert",
            title,
            body=body if text is None else text,
            level=alert_level(level) or "warning",
        )

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
        axis. Stored as a "metric" event; the other wandb options are kept with it.
        `summary` ("min", "max", "mean", "first", "last", "best" with `goal`, "none", or
        several: "min,last") makes the key's summary entry those aggregates, as wandb."""
        ops = None if summary is None else summary_ops(summary, goal)
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
        self._compat.define_metric(name, options)
        if summary is not None:
            self.summary.define(str(name), ops)

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
        (reslog.training.model_watch)."""
        self._compat.watch(models, log, log_freq)

    def unwatch(self, models: Any = None) -> None:
        self._compat.unwatch(models)

    def save(
        self,
        glob_str: str | os.PathLike[str],
        base_path: str | os.PathLike[str] | None = None,
        policy: str = "live",
    ) -> list[str]:
        """wandb.save: copy the files matching `glob_str` into `<run.dir>/files/<uid>/`
        (paths relative to `base_path`), each recorded as a `file` event with its SHA-256.
        policy "now", "end" (at finish) or "live" (now, and at finish if changed). Returns
        the copies' paths (reslog.training.artifacts)."""
        if self._closed:
            self._log_after_finish()
            return []
        return self._files().save(os.fspath(glob_str), base_path, policy)

    def log_artifact(
        self,
        artifact_or_path: Any,
        name: str | None = None,
        type: str | None = None,
        aliases: list[str] | None = None,
        tags: list[str] | None = None,
    ) -> Artifact:
        """wandb.log_artifact: an `artifact` event listing the artifact's files with their
        paths, sizes and SHA-256 (nothing is uploaded; reslog.training.artifacts)."""
        artifact = artifact_from(artifact_or_path, name, type)
        if self._closed:
            self._log_after_finish()
            return artifact
        self._files().log_artifact(artifact, list(aliases or []), list(tags or []))
        return artifact

    def mark_preempting(self) -> None:
        """wandb.mark_preempting: a `preempting` event; the run is expected to stop soon and
        to be resumed (init(id=..., resume="allow"))."""
        self.event(
            "preempting",
            "marked as preempting: a stop is expected, and a resume of this run",
            level="warning",
        )

    def _files(self) -> RunFiles:
        if self._run_files is None:
            self._run_files = RunFiles(Path(self._dir) / "files" / self.uid, self.event)
        return self._run_files

    def _label(self, **_: Any) -> None:
        """wandb-internal telemetry that Hugging Face's WandbCallback calls: nothing to record."""

    def _config_changed(self, changed: dict[str, Any]) -> None:
        if not self._closed:
            self._compat.config_changed(changed)

    def finish(
        self,
        status: str | None = None,
        timeout: float | None = None,
        *,
        exit_code: int | None = None,
        quiet: bool | None = None,
    ) -> bool:
        """End the run: final flush and status, within `timeout` s (default finish_timeout).

        status: "finished" (default), "failed" or "killed". Returns False when the store could
        not take everything in time (a warning then says how much was lost). Idempotent.
        wandb's exit_code (also positional): 0 is "finished", anything else "failed".
        """
        status = exit_status(status, exit_code)
        if status is not None and status not in END_STATUSES:
            raise ValueError(
                f"reslog: finish status must be finished, failed or killed: {status!r}"
            )
        if self._closed or self._finishing:
            return self._status is not None or self._forked_from is not None
        self._finishing = True
        for hook in self._finish_hooks:
            try:
                hook()
            except Exception as exc:  # finish() must end the run whatever a hook does
                warnings.warn(f"reslog: at finish: {exc!r}", RuntimeWarning, stacklevel=2)
        limit = self.finish_timeout if timeout is None else float(timeout)
        deadline = time.monotonic() + limit
        if self._run_files is not None and not self._run_files.finish(limit / 2):
            warnings.warn(
                f"reslog: run {self.uid}: saving files did not end within {limit / 2:.0f} s; "
                "the copies still running are not recorded",
                RuntimeWarning,
                stacklevel=2,
            )
        self._compat.end()
        if self._sampler is not None:
            self._sampler.stop(timeout=min(2.0, limit / 4))
        if self._timers:
            record: dict[str, Any] = {}
            self._take_timers(record)
            step = self._last_step if self._last_step is not None else self._step
            self._put((step, time.time(), record), len(record))
        self._closed = True
        final = status or (KILLED if self._interrupted else FINISHED)
        ok = self._writer.close(final, time.time(), max(0.0, deadline - time.monotonic()))
        self._status = final
        lifecycle.unregister(self)
        dropped = self._writer.dropped + self._writer.side_dropped
        if dropped:
            warnings.warn(
                f"reslog: run {self.uid} dropped {dropped} points in all because its in-memory "
                f"buffer was full (max_buffer_points={self._writer.max_points}; "
                "init(on_full='block') waits instead)",
                RuntimeWarning,
                stacklevel=2,
            )
        if ok:
            self._engine.dispose()
        else:
            warnings.warn(
                f"reslog: finish() gave up after {limit:.0f} s; {self._writer.pending_points()} "
                f"points of run {self.uid} were not written to {self.store} "
                f"(last error: {self._writer.last_error})",
                RuntimeWarning,
                stacklevel=2,
            )
        return ok

    def _finish_from_hook(
        self, status: str | None, error: BaseException | None = None, reason: str = ""
    ) -> None:
        if self._closed or self._finishing:
            return
        if error is not None:
            self._record_error(error, status or FAILED)
        elif reason:
            self.event("note", f"run {status}: {reason}", level="warning")
        self.finish(status)

    def _record_error(self, error: BaseException, status: str) -> None:
        title = traceback.format_exception_only(type(error), error)[-1].strip()
        body = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.event("alert", f"run {status}: {title}"[:2000], body=body[-20000:], level="error")

    def _thread_failed(self, args) -> None:
        if args.thread is self._owner and self._owner is not threading.main_thread():
            self._finish_from_hook(FAILED, args.exc_value)
        elif not self._closed and args.exc_value is not None:
            name = getattr(args.thread, "name", "?")
            title = traceback.format_exception_only(args.exc_type, args.exc_value)[-1].strip()
            self.alert(f"exception in thread {name}: {title}"[:2000], level="error")

    def _detach_after_fork(self) -> None:
        self._closed = True
        self._forked_from = self._pid
        self._pid = os.getpid()
        self._warned_closed = False
        self._writer.abandon()

    def _log_after_finish(self) -> None:
        if self._warned_closed:
            return
        self._warned_closed = True
        if self._forked_from is not None:
            why = (
                f"this process (pid {self._pid}) is a fork of pid {self._forked_from}, which "
                f"logs run {self.uid}; log() and event() calls here are ignored (call "
                "reslog.init() in the child to log a run from it)"
            )
        else:
            why = f"run {self.uid} is finished; further log() calls are ignored"
        warnings.warn(f"reslog: {why}", RuntimeWarning, stacklevel=user_stacklevel())

    # -- system metrics ---------------------------------------------------------------------------

    def _emit_system(self, metrics: dict[str, float], wall: float) -> None:
        """The system sampler's emit: its thread, the run's current step, the step unchanged."""
        if self._closed:
            return
        record = checked(metrics, self._known)
        step = self._last_step if self._last_step is not None else self._step
        self._writer.put_side((step, wall, record), len(record))

    def _summary_watched(self) -> None:
        self._summarise = self.summary.fold

    def _emit_at(self, step: int, wall: float, metrics: dict[str, Any]) -> None:
        """Values from another writer in this process (TensorBoard sync) at their own step:
        the writer's side path, so the run's step and forward-only rule are not touched.
        Raises TypeError/ValueError for a bad key or value (the caller skips it)."""
        if self._closed:
            return
        record = checked(metrics, self._known)
        self._writer.put_side((step, wall, record), len(record))
        self._summarise(record)

    def _start_system(self, interval: float) -> None:
        try:
            from reslog.training.system import SystemSampler
        except ImportError as exc:
            warnings.warn(
                f"reslog: system metrics unavailable ({exc})", RuntimeWarning, stacklevel=3
            )
            return
        self._sampler = SystemSampler(self._emit_system, interval=interval)
        self._sampler.start()

    # -- with reslog.init(...) as run: ------------------------------------------------------------

    def __enter__(self) -> Run:
        return self

    def __exit__(self, tp, value, tb) -> None:
        if value is None:
            self.finish()
        elif isinstance(value, SystemExit):  # sys.exit(code) inside the block: as at exit
            reason = lifecycle.exit_failure(value.code)
            if reason is None:
                self.finish()
            else:
                self._finish_from_hook(FAILED, reason=reason)
        elif isinstance(value, KeyboardInterrupt):
            self._finish_from_hook(KILLED, value)
        else:
            self._finish_from_hook(FAILED, value)

    def __repr__(self) -> str:
        state = self._status or RUNNING
        return f"<reslog.Run {self.uid[:8]} {self.project}/{self.name} step={self._step} {state}>"
