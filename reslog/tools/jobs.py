"""The ranks of a job read from one or more stores: stragglers and hangs, for `reslog watch` and
`reslog show`.

A job's runs are joined by group (schema/rules/ranks.py) across every store given, so two hosts that
each keep their own SQLite file are one job here. `JobWatch.poll()` reads only what is new since
the last poll: each rank's phase points after its step cursor (chunks by step range),
the stall event of a rank that is stalled now, and the last GPU readings from the series rows.
The rules are schema's: schema/rules/stragglers.py names a straggler, schema/rules/hangs.py joins
the stalls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sqlalchemy import Connection, desc, func, select

from schema.rules import hangs
from schema.rules.alerts import HANG, STRAGGLER, STRAGGLER_END
from schema.rules.ranks import jobs, phase_of
from schema.rules.stragglers import Straggler, StragglerDetector, StragglerRule
from schema.store import chunk_read, read
from schema.store.records import RunInfo, RunRef
from schema.store.status import LIVE_STATUSES, STALLED
from schema.store.tables import events, keys, series

BASELINE_STEPS = 200  # logged steps per rank a watch reads back when it starts
MAX_ROWS = 200_000  # phase points read per rank and poll, at most (the next poll goes on)
_NO_STEP = 2**63 - 1  # past every step: no upper bound


@dataclass
class Store:
    """One store as a poll sees it: an open connection, its label and its runs by row id."""

    conn: Connection
    label: str
    runs: dict[int, RunInfo]
    phase_keys: dict[int, str] = field(default_factory=dict)  # key id -> phase

    def __post_init__(self) -> None:
        self.phase_keys = {
            kid: phase
            for kid, name in read.key_names(self.conn).items()
            if (phase := phase_of(name)) is not None
        }


@dataclass(frozen=True)
class JobNotice:
    group: str
    kind: str  # schema.rules.alerts: straggler, straggler_end, hang
    run: RunInfo  # the run it is about: the straggler's, the rank that never came, else rank 0's
    message: str


def phase_rows(
    conn: Connection, run_id: int, phase_keys: dict[int, str], after: int, limit: int = MAX_ROWS
) -> tuple[list[tuple[int, dict[str, float]]], int]:
    """(step, {phase: seconds}) of a run's steps after `after`, oldest first, and the new cursor.
    A step cut by `limit` is left for the next read, so no step arrives in parts."""
    if not phase_keys:
        return [], after
    cur, p = read.dbapi_cursor(conn)
    rows = []  # (step, id, key id, value) of every phase point after the cursor
    for key_id in phase_keys:
        series = chunk_read.Series(cur, p, run_id, key_id, False)
        found = chunk_read.series_rows(series, after + 1, _NO_STEP, chunk_read.Page(limit=limit))
        rows += [(step, pid, key_id, value) for pid, step, _wall, value in found]
    rows.sort()
    rows = rows[:limit]
    cut = len(rows) >= limit
    out: dict[int, dict[str, float]] = {}
    for step, _pid, key_id, value in rows:
        out.setdefault(step, {})[phase_keys[key_id]] = math.nan if value is None else value
    steps = sorted(out)
    if cut and len(steps) > 1:
        steps = steps[:-1]
    return [(s, out[s]) for s in steps], (steps[-1] if steps else after)


def baseline_cursor(conn: Connection, run_id: int, phase_keys: dict[int, str], back: int) -> int:
    """The step `back` logged steps before a run's newest phase point (-1: from the start).
    Counted on `time/step`, else on any phase (a job that logs no `time/step`)."""
    step_key = next(
        (k for k, p in phase_keys.items() if p == "step"), min(phase_keys, default=None)
    )
    if step_key is None:
        return -1
    cur, p = read.dbapi_cursor(conn)
    # Superseded points count, as every phase point does in phase_rows.
    steps = [r[1] for r in chunk_read.series_all(cur, p, run_id, step_key)]
    steps.sort(reverse=True)
    return steps[back] if 0 <= back < len(steps) else -1


def open_stall(conn: Connection, run_id: int) -> tuple[float, str] | None:
    """(wall, body) of a run's newest stall event when it is a stall, not a resumption."""
    row = conn.execute(
        select(events.c.wall, events.c.level, events.c.body)
        .where(events.c.run_id == run_id, events.c.kind == "stall")
        .order_by(desc(events.c.id))
        .limit(1)
    ).first()
    if row is None or row.level == "info":
        return None
    return row.wall, row.body


def last_step(conn: Connection, run_id: int) -> int | None:
    """The newest step a run logged, from its series rows."""
    return conn.execute(
        select(func.max(series.c.step_hi)).where(series.c.run_id == run_id)
    ).scalar()


def gpu_readings(conn: Connection, hosts: dict[int, str]) -> list[hangs.GpuReading]:
    """Each GPU's last utilisation, power and power limit from the series rows of the runs
    `hosts` names (run id -> host), by run then GPU."""
    lasts: dict[int, list[tuple[str, float | None]]] = {}
    query = (
        select(series.c.run_id, keys.c.name, series.c.last)
        .join(keys, keys.c.id == series.c.key_id)
        .where(series.c.run_id.in_(list(hosts)), keys.c.name.like("sys/gpu%"))
    )
    for run_id, name, last in conn.execute(query):
        lasts.setdefault(run_id, []).append((name, last))
    return [
        gpu for run_id in sorted(lasts) for gpu in hangs.gpu_readings(hosts[run_id], lasts[run_id])
    ]


class _Job:
    def __init__(self, rule: StragglerRule | None) -> None:
        self.rule = rule
        self.detector: StragglerDetector | None = None
        self.cursors: dict[RunRef, int] = {}
        self.retired: set[int] = set()
        self.hang_said: tuple | None = None
        self.done = False  # every rank ended and read: nothing to read until one goes on


class JobWatch:
    """Follows the jobs of some stores; `poll()` returns what is news since the last poll.

    The first poll is the baseline: it reads the last BASELINE_STEPS logged steps of each rank
    and says only what is going on at that moment (a straggler still slow, a hang), so that
    each later STRAGGLER_END follows its STRAGGLER; after it, what changes."""

    def __init__(self, rule: StragglerRule | None = None, baseline: int = BASELINE_STEPS) -> None:
        self.rule = rule
        self.baseline = baseline
        self.jobs: dict[str, _Job] = {}
        self.started = False

    def poll(self, stores: list[Store]) -> list[JobNotice]:
        where: dict[RunRef, tuple[Store, int]] = {}
        for store in stores:
            for run_id, run in store.runs.items():
                where[run.ref] = (store, run_id)
        out: list[JobNotice] = []
        for group, job_runs in jobs(run for s in stores for run in s.runs.values()).items():
            job = self.jobs.setdefault(group, _Job(self.rule))
            out += self._poll_job(group, job, job_runs, where)
        self.started = True
        return out

    def _poll_job(self, group, job: _Job, runs: list[RunInfo], where) -> list[JobNotice]:
        by_rank = {r.rank: r for r in runs}
        live = [r for r in runs if r.status in LIVE_STATUSES]
        if not live and (job.done or not self.started):
            # A job that had ended (or had, when the watch started) costs nothing per poll:
            # its cursors wait at each run's end, for a rank that is resumed.
            for run in runs:
                if run.ref not in job.cursors:
                    store, run_id = where[run.ref]
                    job.cursors[run.ref] = last_step(store.conn, run_id) or -1
            job.done = True
            return []
        job.done = not live  # ended in this poll: its last points are read now, then no more
        if job.detector is None:
            job.detector = StragglerDetector({r.rank: r.host for r in runs}, job.rule)
        det = job.detector
        for run in runs:
            if run.status in LIVE_STATUSES and run.rank in job.retired:  # resumed: judged again
                job.retired.discard(run.rank)
                det.hosts[run.rank] = run.host
            det.hosts.setdefault(run.rank, run.host)
        rows: list[tuple[int, int, dict[str, float]]] = []
        for run in runs:
            store, run_id = where[run.ref]
            cursor = job.cursors.get(run.ref)
            if cursor is None:
                cursor = -1
                if not self.started and self.baseline:
                    back = baseline_cursor(store.conn, run_id, store.phase_keys, self.baseline)
                    cursor = max(cursor, back)
            got, job.cursors[run.ref] = phase_rows(store.conn, run_id, store.phase_keys, cursor)
            rows += [(run.rank, step, phases) for step, phases in got]
        rows.sort(key=lambda row: row[1])
        changed = det.add_many(rows)
        for run in runs:  # an ended rank is judged without from here on
            if run.status not in LIVE_STATUSES and run.rank not in job.retired:
                job.retired.add(run.rank)
                changed += det.retire(run.rank)
        if not self.started:
            # The baseline says what is going on now, not its history: a straggler still slow
            # (else its STRAGGLER_END would be the first the watch says of it) and a hang.
            changed = [s for s in det.found if s.until is None]
        out = [self._straggler_notice(group, s, by_rank, self.started) for s in changed]
        hang = job_hang(runs, where)
        if hang is None:
            job.hang_said = None
        elif job.hang_said != (tuple(hang.inside), tuple(hang.culprits)):
            job.hang_said = (tuple(hang.inside), tuple(hang.culprits))
            about = by_rank.get(hang.culprits[0]) if hang.culprits else None
            out.append(JobNotice(group, HANG, about or runs[0], hang.text()))
        return out

    @staticmethod
    def _straggler_notice(
        group: str, s: Straggler, by_rank: dict[int, RunInfo], started: bool = True
    ) -> JobNotice:
        run = by_rank.get(s.rank) or next(iter(by_rank.values()))
        if s.until is None:
            ongoing = "" if started else "ongoing when the watch started: "
            return JobNotice(group, STRAGGLER, run, ongoing + s.message())
        return JobNotice(group, STRAGGLER_END, run, f"recovered: {s.message()}")


def job_hang(runs: list[RunInfo], where: dict[RunRef, tuple[Store, int]]) -> hangs.Hang | None:
    """The job's hang as schema/rules/hangs.py joins it, or None; `where`: each run's store and
    row."""
    if not any(r.status == STALLED for r in runs):
        return None
    states, gpus = [], []
    hosts: dict[str, tuple[Store, dict[int, str]]] = {}
    for run in runs:
        store, run_id = where[run.ref]
        hosts.setdefault(store.label, (store, {}))[1][run_id] = run.host
        stall = open_stall(store.conn, run_id) if run.status == STALLED else None
        states.append(
            hangs.RankStall(
                run.rank,
                run.host,
                run.status,
                stall[1] if stall else None,
                stall[0] if stall else None,
                last_step(store.conn, run_id),
            )
        )
    for store, ids in hosts.values():
        gpus += gpu_readings(store.conn, ids)
    return hangs.join(states, max(r.world_size for r in runs), gpus)


SHOW_STEPS = 5000  # logged steps per rank `reslog show` judges, the newest


@dataclass
class RankRow:
    run: RunInfo
    last_step: int | None
    means: dict[str, float]  # phase -> mean seconds over the steps read


@dataclass
class JobReport:
    group: str
    world_size: int
    ranks: list[RankRow]
    steps: int  # logged steps per rank read (the newest)
    stragglers: list[Straggler]
    hang: hangs.Hang | None

    @property
    def missing(self) -> list[int]:
        held = {r.run.rank for r in self.ranks}
        return [r for r in range(self.world_size) if r not in held]


def job_report(store: Store, group: str, steps: int = SHOW_STEPS) -> JobReport | None:
    """A job's ranks in one store: each rank's mean phases, the stragglers found over their
    newest `steps` logged steps, and the hang if the job is hung now. None: no such job here."""
    members = jobs(store.runs.values()).get(group)
    if not members:
        return None
    ids = {run.ref: run_id for run_id, run in store.runs.items()}
    det = StragglerDetector({r.rank: r.host for r in members})
    rows, table = [], []
    for run in members:
        cursor = baseline_cursor(store.conn, ids[run.ref], store.phase_keys, steps)
        got, _ = phase_rows(store.conn, ids[run.ref], store.phase_keys, cursor, limit=10**9)
        rows += [(run.rank, step, values) for step, values in got]
        sums: dict[str, float] = {}
        for _, values in got:
            for phase, v in values.items():
                if math.isfinite(v):
                    sums[phase] = sums.get(phase, 0.0) + v
        means = {p: v / len(got) for p, v in sums.items()} if got else {}
        table.append(RankRow(run, last_step(store.conn, ids[run.ref]), means))
    rows.sort(key=lambda row: row[1])
    det.add_many(rows)
    det.finish()
    where = {run.ref: (store, ids[run.ref]) for run in members}
    return JobReport(
        group,
        max(r.world_size for r in members),
        table,
        steps,
        list(det.found),
        job_hang(members, where),
    )
