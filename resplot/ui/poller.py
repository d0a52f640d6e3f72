"""Polls sources off the GUI thread and reports through Qt signals.

Each source gets its own worker QThread, so a host that hangs in a connect timeout or keeps
failing never delays the others; failures retry with capped exponential backoff. Workers write
into the shared SeriesCache (its own lock) and emit signals; Qt queues them to the GUI thread.
resplot/sources/polling.py is the equivalent without Qt for `resplot snapshot` and `resplot export`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from PyQt5.QtCore import QObject, QThread, pyqtSignal

from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.sources import open_source, unique_label
from resplot.sources.base import AuthFailed, PollResult, Source, SourceState
from resplot.sources.polling import backoff_s
from resplot.sources.spec import Spec
from resplot.ssh.options import SSHOptions
from schema.store.errors import StoreError

AUTH_BACKOFF_S = 60.0  # the same keys will not start working by themselves


def classify(exc: BaseException) -> str:
    """The SourceState.state a failure puts a source in."""
    if isinstance(exc, AuthFailed):
        return "auth_failed"
    if isinstance(exc, StoreError):
        return "error"  # the store itself is wrong (missing, newer schema): retried slowly
    return "retrying"


class _Stopped(Exception):
    """Raised from the progress callback to end a poll early when the worker is stopping."""


class _SourceWorker(QThread):
    def __init__(self, poller: Poller, source: Source) -> None:
        super().__init__()
        self.poller = poller
        self.source = source
        self.wake = threading.Event()
        self.stopping = False
        self.removed = False
        self.failures = 0
        self.last_error: str | None = None
        self.state = SourceState("connecting")

    def run(self) -> None:
        poller, label = self.poller, self.source.label
        poller.sourceState.emit(label, self.state)
        try:
            while not self.stopping:
                delay = poller.interval if poller.paused else self.poll_once()
                self.wake.wait(delay)
                self.wake.clear()
        finally:
            self.source.close()
            if self.removed:
                poller.cache.drop_source(label)
                poller.runsChanged.emit()

    def poll_once(self) -> float:
        poller, label = self.poller, self.source.label
        try:
            result = self.source.poll(poller.cache, self.progress)
        except Exception as exc:
            if self.stopping:
                return 0.0
            self.failures += 1
            kind = classify(exc)
            delay = AUTH_BACKOFF_S if kind == "auth_failed" else backoff_s(self.failures)
            message = f"{label}: {exc}"
            self.state = SourceState(kind, None, str(exc), delay)
            poller.sourceState.emit(label, self.state)
            if message != self.last_error:
                self.last_error = message
                poller.errored.emit(message)
            return delay
        self.failures = 0
        self.last_error = None
        state = SourceState("live", self.source.rtt_ms, "; ".join(result.errors) or None, None)
        if state != self.state:
            self.state = state
            poller.sourceState.emit(label, state)
        return poller.interval

    def progress(self, step: PollResult) -> None:
        poller = self.poller
        if self.stopping:
            raise _Stopped  # abandon a long backlog read; what was applied stays applied
        if step.runs_changed:
            poller.runsChanged.emit()
        if step.refs:
            refs = set(step.refs)
            poller.work_ahead(refs)
            poller.dataArrived.emit(refs)
        if step.events:
            poller.eventsArrived.emit(list(step.events))
        for message in step.errors:
            poller.errored.emit(f"{self.source.label}: {message}")


class Poller(QObject):
    runsChanged = pyqtSignal()
    dataArrived = pyqtSignal(object)  # set[RunRef] that got new points
    eventsArrived = pyqtSignal(object)  # list[Event]
    sourceState = pyqtSignal(str, object)  # label, SourceState
    errored = pyqtSignal(str)

    def __init__(
        self,
        cache: SeriesCache | None = None,
        interval: float = 1.0,
        ssh: SSHOptions | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.cache = cache if cache is not None else SeriesCache()
        self.interval = max(0.05, float(interval))
        # For every SSH source added without its own: who is asked about unknown host keys
        # and logins, the ssh config file (-F), the timeouts.
        self.ssh = ssh or SSHOptions()
        self.paused = False
        # Called on a worker's thread with the runs that got new points, before dataArrived:
        # the window works out their series' views there (MainWindow.work_ahead), off the GUI
        # thread. A failure of it is said once; the redraw does that work itself then.
        self.ahead: Callable[[set[RunRef]], None] | None = None
        self._ahead_failed = False
        self._workers: dict[str, _SourceWorker] = {}
        self._retired: list[_SourceWorker] = []
        self._started = False

    def work_ahead(self, refs: set[RunRef]) -> None:
        ahead = self.ahead
        if ahead is None:
            return
        try:
            ahead(refs)
        except Exception as exc:  # never into the poll: the data are in, the redraw copes
            if not self._ahead_failed:
                self._ahead_failed = True
                self.errored.emit(f"working out new points' views off the GUI thread: {exc!r}")

    def labels(self) -> list[str]:
        return list(self._workers)

    def source(self, label: str) -> Source:
        return self._workers[label].source

    def add_source(self, spec: Spec, ssh: SSHOptions | None = None, **opts) -> str:
        """Add a source (no I/O here); returns its label. The same spec twice is one source.
        `ssh` replaces the poller's SSH options for this source; `opts` go to the source."""
        for label, worker in self._workers.items():
            if worker.source.spec == spec:
                return label
        source = open_source(spec, ssh or self.ssh, **opts)
        source.label = unique_label(source.label, self._workers)
        worker = _SourceWorker(self, source)
        self._workers[source.label] = worker
        if self._started:
            worker.start()
        return source.label

    def remove_source(self, label: str) -> None:
        """Stop polling it; its runs leave the cache once the worker has stopped."""
        worker = self._workers.pop(label, None)
        if worker is None:
            return
        worker.removed = True
        worker.stopping = True
        worker.wake.set()
        self._retired.append(worker)
        if not worker.isRunning():
            self.cache.drop_source(label)
            self.runsChanged.emit()

    def set_interval(self, seconds: float) -> None:
        self.interval = max(0.05, float(seconds))
        self.poll_now()

    def set_paused(self, paused: bool) -> None:
        self.paused = bool(paused)
        if not paused:
            self.poll_now()

    def poll_now(self) -> None:
        for worker in self._workers.values():
            worker.wake.set()

    def start(self) -> None:
        self._started = True
        for worker in self._workers.values():
            if not worker.isRunning():
                worker.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop every worker; True when all joined within `timeout` seconds."""
        workers = [*self._workers.values(), *self._retired]
        for worker in workers:
            worker.stopping = True
            worker.wake.set()
        deadline = time.monotonic() + timeout
        joined = True
        for worker in workers:
            left_ms = max(0, int((deadline - time.monotonic()) * 1000))
            if not worker.wait(left_ms):
                # Blocked in I/O: closing the transport from here makes the read fail.
                worker.source.close()
                joined = worker.wait(500) and joined
        self._retired = [w for w in self._retired if w.isRunning()]
        self._started = False
        return joined
