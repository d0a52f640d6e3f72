"""`reslog watch`: follow every run of a store and say, once, each thing worth a human's attention.

One poll reads the run rows (status as readers derive it: crashed, stalled...), the events added
since the last poll, and the series rows of live runs (NaN/inf counts, the last GPU throttle
reading): O(runs + new events + live series), whatever the number of points. What was already
so when the watch started is its baseline, not news, except a job's straggler or hang going on
at that moment: it is said first (reslog/tools/jobs.py).

A notice is one line on stdout; with `--exec CMD` it also runs CMD through the shell with
RESLOG_RUN (name), RESLOG_RUN_ID (uid), RESLOG_PROJECT, RESLOG_STATUS (the new status, or the
alert's kind: nan, throttled, alert, stall, drop, writer; schema/rules/alerts.py says what each
means), RESLOG_MESSAGE and RESLOG_STORE in its environment (controls escaped, each at most ENV_LIMIT
characters). Hooks run in the background: a slow webhook never delays the next poll;
`reslog notify` (reslog/tools/notify.py) posts a notice to a chat webhook with its JSON built
safely.

The runs of a multi-rank job (one group, reslog/tools/jobs.py) are also watched as one job, across
every store given (`reslog watch hostA.db hostB.db`): a straggler (kind straggler, then
straggler_end) and a hung collective (kind hang) are said once, naming the rank and its host.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, func, select

from reslog import text
from reslog.tools.jobs import JobWatch, Store
from schema.rules.alerts import (
    CRASHED,
    FINISHED,
    NAN,
    RUNNING,
    STALLED,
    THROTTLED,
    WATCHED_EVENTS,
    gpu_key,
)
from schema.rules.throttle import slowdown_reasons
from schema.store import read
from schema.store.records import RunInfo
from schema.store.status import LIVE_STATUSES
from schema.store.tables import events, keys, series


@dataclass(frozen=True)
class Notice:
    run: RunInfo
    status: str  # the run's new status, or the kind of alert
    message: str
    wall: float

    def line(self) -> str:
        """One line a terminal shows as it reads (controls escaped, long names cut)."""
        who = f"{text.cell(self.run.name)} ({text.cell(self.run.ref.uid[:8])})"
        what, message = text.cell(self.status.upper()), text.cell(self.message, text.VALUE_LIMIT)
        return f"{text.clock(self.wall)}  {who}  {what}  {message}"


class Watcher:
    """The state of a store as of the last poll; `poll()` returns what changed since."""

    def __init__(self, engine: Engine, label: str) -> None:
        self.engine = engine
        self.label = label
        self.status: dict[int, str] = {}
        self.event_cursor = 0
        self.nonfinite: dict[tuple[int, int], int] = {}
        self.throttled: dict[tuple[int, int], int] = {}
        self.runs: dict[int, RunInfo] = {}  # as of the last poll
        self.started = False

    def poll(self, now: float | None = None) -> list[Notice]:
        now = time.time() if now is None else now
        with self.engine.connect() as conn:
            runs = dict(read.list_runs(conn, store=self.label))
            self.runs = runs
            notices, ended = self._statuses(runs, now)
            notices += self._events(conn, runs)
            # Runs that ended in this poll still count: their last NaN or throttle readings.
            live = [i for i, r in runs.items() if r.status in LIVE_STATUSES or i in ended]
            notices += self._series(conn, runs, live, now)
        self.started = True
        return notices

    def _statuses(self, runs: dict[int, RunInfo], now: float) -> tuple[list[Notice], set[int]]:
        out, ended = [], set()
        for run_id, run in runs.items():
            before = self.status.get(run_id)
            self.status[run_id] = run.status
            if before == run.status or not self.started:
                continue
            if before is None:
                message = f"started on {run.host} (pid {run.pid})"
            elif run.status == RUNNING and before == STALLED:
                message = "logging steps again"
            else:
                message = _status_message(run, now)
            if run.status not in LIVE_STATUSES:
                ended.add(run_id)
            out.append(Notice(run, run.status, message, now))
        return out, ended

    def _events(self, conn, runs: dict[int, RunInfo]) -> list[Notice]:
        query = (
            select(events.c.id, events.c.run_id, events.c.wall, events.c.kind, events.c.title)
            .where(events.c.id > self.event_cursor)
            .order_by(events.c.id)
        )
        if not self.started:  # the baseline: only where the cursor stands
            self.event_cursor = conn.execute(select(func.max(events.c.id))).scalar() or 0
            return []
        out = []
        for event_id, run_id, wall, kind, title in conn.execute(query):
            self.event_cursor = event_id
            run = runs.get(run_id)
            if run is not None and kind in WATCHED_EVENTS:
                out.append(Notice(run, kind, title, wall))
        return out

    def _series(self, conn, runs: dict[int, RunInfo], live: list[int], now: float) -> list[Notice]:
        if not live:
            return []
        cols = series.c
        query = (
            select(
                cols.run_id,
                cols.key_id,
                keys.c.name,
                cols.nan,
                cols.posinf,
                cols.neginf,
                cols.nonfinite_at,
                cols.last,
            )
            .join(keys, keys.c.id == cols.key_id)
            .where(cols.run_id.in_(live))
        )
        out = []
        for run_id, key_id, name, nan, posinf, neginf, first_at, last in conn.execute(query):
            run, at = runs[run_id], (run_id, key_id)
            bad = nan + posinf + neginf
            if bad > self.nonfinite.get(at, 0) and self.started and not name.startswith("sys/"):
                counts = {"NaN": nan, "+inf": posinf, "-inf": neginf}
                what = ", ".join(f"{n} {label}" for label, n in counts.items() if n)
                message = f"{name} is not finite ({what}; first at step {first_at})"
                out.append(Notice(run, NAN, message, now))
            self.nonfinite[at] = bad
            gpu = gpu_key(name)
            if gpu is None or gpu[1] != "throttle":
                continue
            reasons = slowdown_reasons(last)
            held = self.throttled.get(at, 0)
            if reasons and not held and self.started:
                message = f"GPU {gpu[0]} throttled: {', '.join(reasons)}"
                out.append(Notice(run, THROTTLED, message, now))
            self.throttled[at] = 1 if reasons else 0
        return out


class StoresWatcher:
    """Every store's Watcher, and the jobs whose ranks they hold, followed as one."""

    def __init__(self, watchers: Sequence[Watcher]) -> None:
        self.watchers = list(watchers)
        self.jobs = JobWatch()

    @property
    def status(self) -> dict[tuple[str, int], str]:
        return {(w.label, i): s for w in self.watchers for i, s in w.status.items()}

    def poll(self, now: float | None = None) -> list[Notice]:
        now = time.time() if now is None else now
        notices = [n for w in self.watchers for n in w.poll(now)]
        if not any(r.group and r.world_size > 1 for w in self.watchers for r in w.runs.values()):
            return notices
        with contextlib.ExitStack() as stack:
            stores = [
                Store(stack.enter_context(w.engine.connect()), w.label, w.runs)
                for w in self.watchers
            ]
            for job in self.jobs.poll(stores):
                notices.append(Notice(job.run, job.kind, job.message, now))
        return notices


def _status_message(run: RunInfo, now: float) -> str:
    if run.status == CRASHED:
        return (
            f"process {run.pid} on {run.host} is gone, or no heartbeat for "
            f"{text.duration(now - run.heartbeat_at)} (kill -9, OOM, host lost)"
        )
    if run.status == STALLED:
        return "alive but no step logged lately; `reslog show` has every thread's stack"
    if run.status == FINISHED:
        return f"finished after {text.duration((run.ended_at or now) - run.created_at)}"
    return f"ended {run.status}"


ENV_LIMIT = 4096  # characters of one RESLOG_* value (Linux refuses one over 128 KiB)


def env_value(value: object) -> str:
    """A hook's environment value: controls escaped (a NUL cannot be in the environment at
    all; an escape sequence would reach whatever terminal or chat shows it), cut to ENV_LIMIT."""
    return text.cell(value, ENV_LIMIT)


class Hooks:
    """`--exec CMD` for each notice, in the background; failures are said on stderr."""

    def __init__(self, command: str, store: str, err=sys.stderr) -> None:
        self.command = command
        self.store = store
        self.err = err
        self.running: list[tuple[subprocess.Popen, Notice]] = []

    def run(self, notice: Notice) -> None:
        fields = {
            "RESLOG_RUN": notice.run.name,
            "RESLOG_RUN_ID": notice.run.ref.uid,
            "RESLOG_PROJECT": notice.run.project,
            "RESLOG_STATUS": notice.status,
            "RESLOG_MESSAGE": notice.message,
            "RESLOG_STORE": notice.run.ref.store or self.store,  # several: the run's own
        }
        env = {**os.environ, **{k: env_value(v) for k, v in fields.items()}}
        try:
            proc = subprocess.Popen(self.command, shell=True, env=env, stdin=subprocess.DEVNULL)
        except (OSError, ValueError) as exc:  # never the end of the watch
            print(f"reslog watch: cannot run --exec command: {exc}", file=self.err, flush=True)
            return
        self.running.append((proc, notice))

    def reap(self, wait: float = 0.0) -> None:
        deadline = time.monotonic() + wait
        still = []
        for proc, notice in self.running:
            try:
                left = max(0.0, deadline - time.monotonic())
                code = proc.wait(timeout=left) if wait else proc.poll()
            except subprocess.TimeoutExpired:
                code = None
            if code is None:
                still.append((proc, notice))
            elif code != 0:
                print(
                    f"reslog watch: --exec exited with status {code} for "
                    f"{notice.run.name} {notice.status}",
                    file=self.err,
                    flush=True,
                )
        self.running = still


def watch(
    engine: Engine,
    label: str,
    *,
    interval: float = 1.0,
    command: str | None = None,
    out=sys.stdout,
    should_stop: Callable[[], bool] = lambda: False,
    more: Sequence[tuple[Engine, str]] = (),
) -> int:
    """Follow `engine`'s store, and the stores in `more` beside it (a job's other hosts)."""
    watcher = StoresWatcher([Watcher(e, lab) for e, lab in [(engine, label), *more]])
    labels = ", ".join([label, *(lab for _, lab in more)])
    hooks = Hooks(command, labels) if command else None
    ongoing = watcher.poll()  # the baseline: a job's straggler or hang going on now
    live = sum(1 for s in watcher.status.values() if s in LIVE_STATUSES)
    print(f"watching {labels}: {len(watcher.status)} runs, {live} live", file=out, flush=True)
    try:
        while True:
            for notice in ongoing:
                print(notice.line(), file=out, flush=True)
                if hooks is not None:
                    hooks.run(notice)
            if hooks is not None:
                hooks.reap()
            if should_stop():
                break
            time.sleep(interval)
            ongoing = watcher.poll()
    finally:
        if hooks is not None:
            hooks.reap(wait=10.0)
    return 0
