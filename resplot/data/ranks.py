"""What the Ranks page draws of one job: rank x step matrices of step time and of each phase,
grouped by host, with the job's stragglers and hang marked. No Qt, no matplotlib.

A job is the runs of one group across every source in the cache (schema/rules/ranks.py): each host's
store comes through its own source, and the group (torchrun's run id, or `init(group=)`) joins
them. Rows are ranks, ordered by host then rank; columns are step ranges a whole number of
rollup buckets wide, aligned on bucket edges, so each cell holds whole buckets and its extremes
are exact: the largest and smallest value the phase took in those steps (raw points when the
range is narrow enough, else the buckets' own extremes), as every chart draws them
(resplot/data/views.py). A cell's mean is the mean of its buckets' means (of its points, raw).

Stragglers are judged by schema/rules/stragglers.py on the data the matrices were made from: per
step on raw points, per bucket mean when zoomed out (`judged_per` says which; the rule's window then
counts buckets, about as many steps as on raw points), the excesses over the other ranks worked
out with numpy over the whole history at once (resplot/data/straggler_matrix.py); the hang by
schema/rules/hangs.py from the ranks' statuses, stall events and GPU readings in the cache.
"""

from __future__ import annotations

import math
import textwrap
import warnings
from dataclasses import dataclass, field

import numpy as np

from reslog.text import safe
from resplot.data import straggler_matrix
from resplot.data.cache import SeriesCache
from resplot.data.decimate import in_order
from resplot.data.model import RunInfo, RunRef
from resplot.data.views import (
    SeriesView,
    choose_level,
    fine_points,
    over_budget,
    series_view,
)
from schema.rules import hangs
from schema.rules.alerts import HANG, STRAGGLER
from schema.rules.ranks import STEP, jobs, key, own_work, phase_of, ranks_text
from schema.rules.stragglers import Straggler, StragglerRule
from schema.store import buckets
from schema.store.rollup import LAST, STEP_HI, STEP_LO
from schema.store.status import STALLED

# What a heatmap cell shows of the steps it holds: Matrix fields, and how the page says each.
STATS = {"max": "largest", "mean": "mean", "min": "smallest"}
HOVER_CHARS = 60  # an alert's message in a cell's hover is wrapped at this width
# A rank's own work: its step time minus its wait in collectives (`comm`), a matrix of its own.
OWN = "own work"
# Where a job's step time comes from (JobView.step_from).
STEP_LOGGED = "time/step"
STEP_INTERVALS = "log() intervals"


@dataclass
class Derived:
    """A series worked out from others, as _fill and _judged read a SeriesView: the rank's
    step time from the walls of its log() calls, its own work as step minus comm. At level 0
    one value a logged step; at a rollup level one a bucket, its mean (the extremes of the
    series it comes from do not give its own: a cell's largest and smallest are its mean)."""

    level: int
    steps: np.ndarray
    values: np.ndarray
    complete: bool = True

    @property
    def mid_steps(self) -> np.ndarray:
        return self.steps

    @property
    def means(self) -> np.ndarray:
        return self.values


def _points(sv) -> tuple[np.ndarray, np.ndarray]:
    """A view's values a logged step (level 0) or its bucket means at their middle steps."""
    if isinstance(sv, Derived) or sv.level == 0:
        return in_order(sv.steps, sv.values)
    return in_order(sv.mid_steps, sv.means)


def intervals(sv) -> Derived:
    """A rank's seconds a step from one of its series logged every log() call: the wall time
    between two logged steps over the steps between them (bucket middles, zoomed out)."""
    steps, walls = (sv.steps, sv.walls) if sv.level == 0 else (sv.mid_steps, sv.mid_walls)
    steps, walls = in_order(steps, walls)
    ds, dw = np.diff(steps), np.diff(walls)
    ok = ds > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return Derived(sv.level, steps[1:][ok], dw[ok] / ds[ok], sv.complete)


def own_work_of(step, comm) -> Derived:
    """Step minus comm at the steps (or buckets) both have."""
    (s1, v1), (s2, v2) = _points(step), _points(comm)
    common, i1, i2 = np.intersect1d(s1, s2, return_indices=True)
    complete = step.complete and comm.complete and step.level == comm.level
    return Derived(step.level, common, v1[i1] - v2[i2], complete)


@dataclass(frozen=True)
class RankRow:
    ref: RunRef
    rank: int
    host: str


@dataclass
class Matrix:
    """One phase over the job's ranks: rows as JobView.rows, columns as JobView.edges."""

    phase: str
    vmax: np.ndarray  # (rows, columns); NaN where the rank logged nothing in those steps
    vmin: np.ndarray
    mean: np.ndarray
    max_at: np.ndarray  # the step of each cell's largest value (-1: none)

    def values(self, stat: str) -> np.ndarray:
        """The cells' largest ("max"), smallest ("min") or mean ("mean") values."""
        return {"max": self.vmax, "min": self.vmin, "mean": self.mean}[stat]


@dataclass(frozen=True)
class Mark:
    """Something to mark on the heatmap: rows and a step range, what it is, what it says."""

    kind: str  # schema.rules.alerts: straggler, hang
    rows: tuple[int, ...]
    first: int
    last: int | None  # None: still going
    message: str


@dataclass
class JobView:
    group: str
    world_size: int
    rows: list[RankRow]
    hosts: list[tuple[str, range]]  # each host and its rows, in order
    edges: np.ndarray  # column c holds steps edges[c] <= step < edges[c + 1]
    level: int  # 0: raw points, else the rollup level the cells were made from
    complete: bool  # every cell from its wanted level (False while tiles load)
    matrices: dict[str, Matrix]  # "step" and each phase, in step order
    stragglers: list[Straggler] = field(default_factory=list)
    judged_per: int = 1  # steps per judgement of the straggler rule (1: every logged step)
    hang: hangs.Hang | None = None
    step_from: str = STEP_LOGGED  # or STEP_INTERVALS: no rank logged time/step

    def culprit(self) -> tuple[str, str]:
        """The matrix that tells the culprit, and what it is: a rank's own work (step minus
        its wait in comm) where comm is logged; else the phase the newest straggler is named
        in (own work cannot be told from waiting: a rank waiting for the straggler shows it in
        its backward); else the own-work phase whose ranks differ most."""
        if OWN in self.matrices:
            return OWN, "own work: step minus the wait in collectives (comm)"
        named = [s for s in self.stragglers if s.phase in self.matrices]
        if named:
            s = max(named, key=lambda s: (s.until is None, s.found_at))
            return s.phase, (
                f"{s.phase}, the phase rank {s.rank} is named in (no time/comm logged: a rank's "
                "own work cannot be told from its wait for the others)"
            )
        phases = [p for p in self.matrices if p not in (STEP, OWN, "comm")]
        if not phases:
            return STEP, "step"

        def spread(p: str) -> float:
            mean = self.matrices[p].mean
            if not np.isfinite(mean).any():
                return -1.0
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                gap = np.nanmax(mean, axis=0) - np.nanmedian(mean, axis=0)
            return float(np.nanmean(gap)) if np.isfinite(gap).any() else -1.0

        phase = max(phases, key=spread)
        return phase, f"{phase}, where the ranks differ most (no time/comm logged)"

    def scores(self, name: str, window: int = 20) -> list[tuple[float, float]]:
        """Each row's (relative, individual) performance score of matrix `name` at its worst
        stretch of `window` cells in view, as NVIDIA's straggler detector (nvidia-resiliency-ext)
        defines them, from what is stored (no collective): a stretch's time is the median of
        its cells' means; relative is the fastest rank's time over the rank's, at the same
        cells; individual is the rank's best (the 5th percentile of its cells) over its time.
        1 is the best, 0.5 twice as slow. NaN where a rank has no cell. A phase (no comm
        logged) is scored as a step that waits for no one: the rank's phase plus the shortest
        rest of a step (step minus the phase) of the ranks, the one that waited least; alone,
        a millisecond of data wait would score a healthy rank 0.7 against a faster one."""
        mean = self.matrices[name].mean
        if name not in (OWN, STEP) and STEP in self.matrices:
            with warnings.catch_warnings(), np.errstate(invalid="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                rest = np.nanmin(self.matrices[STEP].mean - mean, axis=0)
            mean = mean + np.where(np.isfinite(rest), rest, 0.0)[None, :]
        rows, cols = mean.shape
        out = [(math.nan, math.nan)] * rows
        if not cols or not np.isfinite(mean).any():
            return out
        k = max(1, min(window, cols))
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN stretches
            stretch = np.nanmedian(np.lib.stride_tricks.sliding_window_view(mean, k, axis=1), -1)
            rel = np.nanmin(stretch, axis=0)[None, :] / stretch
            best = np.nanpercentile(mean, 5, axis=1)
            ind = np.minimum(1.0, best[:, None] / stretch)
            worst_rel, worst_ind = np.nanmin(rel, axis=1), np.nanmin(ind, axis=1)
        return [(float(r), float(d)) for r, d in zip(worst_rel, worst_ind, strict=True)]

    @property
    def missing(self) -> list[int]:
        """Ranks of the job that no source in the cache holds."""
        held = {r.rank for r in self.rows}
        return [r for r in range(self.world_size) if r not in held]

    @property
    def marks(self) -> list[Mark]:
        index = {r.rank: i for i, r in enumerate(self.rows)}
        out = [
            Mark(STRAGGLER, (index[s.rank],), s.since, s.until, s.message())
            for s in self.stragglers
            if s.rank in index
        ]
        if self.hang is not None:
            # From the step the job hung after: the culprits' last cells, where they stopped.
            rows = tuple(index[r] for r in self.hang.culprits if r in index)
            at = self.hang.step or 0
            out.append(Mark(HANG, rows, at, None, self.hang.text()))
        return out

    def column_of(self, step: int) -> int | None:
        c = int(np.searchsorted(self.edges, step, side="right")) - 1
        return c if 0 <= c < len(self.edges) - 1 else None

    def cell(self, row: int, column: int) -> list[tuple[str, float, float, float]]:
        """The hover of a cell: (phase, smallest, largest, mean) seconds of each phase there."""
        out = []
        for name, m in self.matrices.items():
            if not math.isnan(m.vmax[row, column]):
                out.append((name, m.vmin[row, column], m.vmax[row, column], m.mean[row, column]))
        return out

    def cell_text(self, row: int, column: int) -> str:
        r = self.rows[row]
        lo, hi = int(self.edges[column]), int(self.edges[column + 1]) - 1
        head = f"rank {r.rank} on {safe(r.host)}, step {lo:,}" + (f"-{hi:,}" if hi > lo else "")
        lines = [head]
        for name, vmin, vmax, mean in self.cell(row, column):
            span = "" if vmin == vmax else f" ({_ms(vmin)}-{_ms(vmax)})"
            lines.append(f"  {safe(name)}: {_ms(mean)}{span}")
        return "\n".join(lines)

    def marks_at(self, row: int, column: int) -> list[Mark]:
        """The marks that cover a cell (a straggler's stretch, a hang from its step on)."""
        lo, hi = int(self.edges[column]), int(self.edges[column + 1]) - 1
        return [
            m
            for m in self.marks
            if row in m.rows and m.first <= hi and (m.last is None or m.last >= lo)
        ]

    def hover_text(self, row: int, column: int) -> str:
        """What hovering a cell shows: the rank's breakdown there (mean, and the range when the
        cell holds several steps), then every alert marked on it."""
        text = self.cell_text(row, column)
        for m in self.marks_at(row, column):
            said = textwrap.wrap(f"{m.kind}: {safe(m.message)}", HOVER_CHARS)
            text += "\n" + "\n  ".join(said)
        return text

    @property
    def cell_steps(self) -> int:
        return int(self.edges[1] - self.edges[0]) if len(self.edges) > 1 else 1

    def note(self) -> str:
        """What the page does not show as it is, said once: how many steps a cell holds (and
        from which rollup level), the straggler rule's resolution, the ranks no source holds,
        and tiles still on their way."""
        width = self.cell_steps
        parts = [f"a cell is {width:,} step{'s' if width != 1 else ''}"]
        if self.level > 0:
            parts[0] += f" (rollup level {self.level}: zoom in for single steps)"
        elif width > 1:
            parts[0] += " (its largest, mean and smallest of them; zoom in for single steps)"
        if self.step_from == STEP_INTERVALS:
            parts.append("step time: the interval between a rank's log() calls (no time/step)")
        if self.judged_per > 1:
            parts.append(f"stragglers judged on means of {self.judged_per:,} steps")
        if self.missing:
            parts.append(f"{ranks_text(self.missing)} of {self.world_size} in no source")
        if not self.complete:
            parts.append("finer cells loading…")
        return " · ".join(parts)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def jobs_in(cache: SeriesCache) -> dict[str, list[RunInfo]]:
    """group -> the runs of each multi-rank job in the cache, across sources, one per rank."""
    return jobs(cache.runs())


def newest_first(found: dict[str, list[RunInfo]]) -> list[str]:
    """The jobs' groups, the one started last first (what the Ranks page shows by default)."""
    return sorted(found, key=lambda g: (-max(r.created_at for r in found[g]), g))


def job_label(group: str, members: list[RunInfo]) -> str:
    """How the Ranks page and the run table name a job: its runs' common name (the trainer
    names ranks `NAME-rankR`), else its group; the ranks held of its world, and its hosts."""
    names = {r.name.rsplit("-rank", 1)[0] for r in members}
    name = names.pop() if len(names) == 1 else group
    world = max(r.world_size for r in members)
    held = len({r.rank for r in members})
    ranks = f"{world} ranks" if held >= world else f"{held} of {world} ranks"
    hosts = len({r.host for r in members})
    return f"{safe(name)} ({ranks}, {hosts} host{'s' if hosts != 1 else ''})"


def job_view(cache: SeriesCache, group: str, lo: float, hi: float, columns: int) -> JobView | None:
    """The job's matrices over steps [lo, hi] (infinite: the series' ends) for a heatmap
    `columns` cells wide. Asks the cache for the tiles it lacks (like a chart); None when the
    job is not in the cache or has no phase logged yet."""
    members = jobs_in(cache).get(group)
    if not members:
        return None
    host_first: dict[str, int] = {}  # hosts in the order of their lowest rank
    for r in members:
        host_first[r.host] = min(host_first.get(r.host, r.rank), r.rank)
    members = sorted(members, key=lambda r: (host_first[r.host], r.rank))
    rows = [RankRow(r.ref, r.rank, r.host) for r in members]
    phases = own_work({p for r in rows for k in cache.keys(r.ref) if (p := phase_of(k))})
    names = [STEP, *phases, *(["comm"] if _any_key(cache, rows, "comm") else [])]
    # A rank's step time: its time/step, else the walls of its log() calls, read from its
    # first phase (every key of one log() has that call's wall).
    step_logged = _any_key(cache, rows, STEP)
    step_keys: dict[RunRef, str] = {}
    for r in rows:
        have = [STEP] if step_logged else [p for p in phases if cache.summary(r.ref, key(p))]
        if have:
            step_keys[r.ref] = key(have[0])
    summaries = [
        s
        for r in rows
        if r.ref in step_keys
        if (s := cache.summary(r.ref, step_keys[r.ref])) is not None
    ]
    if not summaries:
        return None
    first = min(s.agg[STEP_LO] for s in summaries)
    last = max(s.agg[STEP_HI] for s in summaries)
    lo = first if lo == -math.inf else max(int(lo), first)
    hi = last if hi == math.inf else min(int(hi), last)
    hi = max(hi, lo)
    # A cell is whole buckets, so one bucket a cell is all a column needs; fine levels (read
    # raw on the host) while the job's views stay inside a page's budget, as on a chart page.
    per_cell = 1
    fine: dict[str, float] = {}
    for r in rows:
        for name in names:
            if (s := cache.summary(r.ref, key(name))) is not None:
                n = fine_points(s, lo, hi, columns, per_cell)
                fine[r.ref.source] = fine.get(r.ref.source, 0.0) + n
    if over_budget(cache, fine):
        per_cell = 0  # level 1: fewer buckets than cells, each still exact
    level = min(choose_level(s, lo, hi, columns, per_cell) for s in summaries)
    level = min([level, *(s.levels for s in summaries)])
    bw = buckets.width(level)
    width = bw * max(1, math.ceil((hi - lo + 1) / max(1, columns) / bw))
    start = (lo // bw) * bw
    ncols = max(1, math.ceil((hi + 1 - start) / width))
    edges = start + width * np.arange(ncols + 1, dtype=np.int64)
    view = JobView(
        group,
        max(r.world_size for r in members),
        rows,
        _hosts(rows),
        edges,
        level,
        True,
        {},
        step_from=STEP_LOGGED if step_logged else STEP_INTERVALS,
    )
    judged: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}  # for the rule
    kept: dict[tuple[int, str], SeriesView | Derived] = {}
    shape = (len(rows), ncols)
    for name in [*names, *([OWN] if "comm" in names else [])]:
        m = Matrix(name, *(np.full(shape, np.nan) for _ in range(3)), np.full(shape, -1, np.int64))
        views: list[tuple[int, SeriesView | Derived]] = []
        for i, row in enumerate(rows):
            if name == OWN:  # step minus comm: not judged (the rule judges the phases)
                step, comm = kept.get((i, STEP)), kept.get((i, "comm"))
                if step is not None and comm is not None:
                    views.append((i, own_work_of(step, comm)))
                continue
            name_key = step_keys.get(row.ref) if name == STEP else key(name)
            if name_key is None:
                continue
            sv = series_view(cache, row.ref, name_key, lo, hi, columns, level=level)
            if sv is None:
                if cache.summary(row.ref, name_key) is not None:
                    view.complete = False
                continue
            if name == STEP and not step_logged:
                sv = intervals(sv)
            view.complete &= sv.complete and sv.level == level
            views.append((i, sv))
            kept[(i, name)] = sv
            judged[(row.rank, name)] = _judged(sv, lo, hi)
        _fill(m, views, start, width, lo, hi)
        view.matrices[name] = m
    view.judged_per = bw
    # Zoomed out, each judgement is a bucket of bw steps: the rule's window shrinks to match, so
    # it spans about as many steps as on raw points.
    rule = StragglerRule(window=max(2, math.ceil(StragglerRule().window / bw)))
    view.stragglers = straggler_matrix.judge(judged, {r.rank: r.host for r in rows}, rule)
    view.hang = job_hang(cache, members)
    return view


def _hosts(rows: list[RankRow]) -> list[tuple[str, range]]:
    out: list[tuple[str, range]] = []
    for i, row in enumerate(rows):
        if out and out[-1][0] == row.host:
            out[-1] = (row.host, range(out[-1][1].start, i + 1))
        else:
            out.append((row.host, range(i, i + 1)))
    return out


def _any_key(cache: SeriesCache, rows: list[RankRow], phase: str) -> bool:
    return any(cache.summary(r.ref, key(phase)) is not None for r in rows)


def _fill(m: Matrix, views: list, start: int, width: int, lo: int, hi: int) -> None:
    """The matrix's rows from their series views ((row, view) pairs): extremes per column, and
    the mean of what each holds. All rows at once: a view's steps go up, so with the rows one
    after another each (row, column) is one run of the points, reduced with reduceat (ufunc.at,
    a call a row, took two thirds of a 64-rank refresh)."""
    rows, ncols = m.vmax.shape
    parts, mean_parts = [], []
    for i, sv in views:
        keep = (sv.steps >= lo) & (sv.steps <= hi)
        steps, values = sv.steps[keep], sv.values[keep]
        steps, values = in_order(steps, values)
        parts.append((np.full(len(steps), i), steps, values))
        # Means: of the points (raw), or of the buckets' means.
        mids, means = (steps, values) if sv.level == 0 else (sv.mid_steps, sv.means)
        inside = (mids >= lo) & (mids <= hi) & np.isfinite(means)
        mean_parts.append((np.full(int(inside.sum()), i), mids[inside], means[inside]))
    if not parts:
        return
    row, steps, values = (np.concatenate(p) for p in zip(*parts, strict=True))
    cols = (steps - start) // width
    ok = (cols >= 0) & (cols < ncols)
    cell, values, steps = (row * ncols + cols)[ok].astype(np.int64), values[ok], steps[ok]
    if len(cell):
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        at = cell[starts]
        vmax = np.fmax.reduceat(values, starts)
        m.vmax.reshape(-1)[at] = vmax
        m.vmin.reshape(-1)[at] = np.fmin.reduceat(values, starts)
        # Each cell's largest value at its smallest step (the rollup fold's rule for ties).
        segment = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(cell)]))
        index = np.where(values == vmax[segment], np.arange(len(values)), len(values))
        first = np.minimum.reduceat(index, starts)
        found = first < len(values)
        m.max_at.reshape(-1)[at[found]] = steps[first[found]]
    row, mids, means = (np.concatenate(p) for p in zip(*mean_parts, strict=True))
    mcols = ((mids - start) // width).astype(np.int64)
    ok = (mcols >= 0) & (mcols < ncols)
    mcell = (row.astype(np.int64) * ncols + mcols)[ok]
    sums = np.bincount(mcell, weights=means[ok], minlength=rows * ncols)
    counts = np.bincount(mcell, minlength=rows * ncols)
    with np.errstate(invalid="ignore", divide="ignore"):
        m.mean[:] = np.where(counts > 0, sums / counts, np.nan).reshape(rows, ncols)


def _judged(sv, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The values the straggler rule judges: each logged step raw, else each bucket's mean at
    its middle step."""
    steps, values = (sv.steps, sv.values) if sv.level == 0 else (sv.mid_steps, sv.means)
    inside = (steps >= lo) & (steps <= hi)
    return steps[inside], values[inside]


LIVE_STEPS = 60  # newest live steps per rank judged for an alert: the rule's window and more
SINCE_STEPS = 2000  # ... and, when one is named, how far back its start is looked for


def live_stragglers(cache: SeriesCache, members: list[RunInfo]) -> list[Straggler]:
    """The stragglers of a job still slow in the newest points seen live (for alerts and
    notifications; cheap while the job is healthy: LIVE_STEPS steps per rank are judged, and
    SINCE_STEPS only once one is named, to find where its stretch began)."""
    found = _judge_live(cache, members, LIVE_STEPS)
    if found:
        found = _judge_live(cache, members, SINCE_STEPS)
    return found


def _judge_live(cache: SeriesCache, members: list[RunInfo], steps: int) -> list[Straggler]:
    series: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    for run in members:
        for name in cache.keys(run.ref):
            phase = phase_of(name)
            live = cache.live(run.ref, name) if phase is not None else None
            if live is None or not len(live[0]):
                continue
            series[(run.rank, phase)] = (live[0][-steps:], live[2][-steps:])
    found = straggler_matrix.judge(series, {r.rank: r.host for r in members})
    return [s for s in found if s.until is None]  # still slow


def job_hang(cache: SeriesCache, members: list[RunInfo]) -> hangs.Hang | None:
    """The job's hang from what the cache holds: statuses, each stalled rank's newest stall event,
    each rank's newest step, the hosts' last GPU readings."""
    if not any(r.status == STALLED for r in members):
        return None
    states, gpus = [], []
    for run in members:
        summaries = cache.summaries(run.ref)
        stall = None
        if run.status == STALLED:
            stall = next(reversed(cache.events(run.ref, "stall")), None)
            if stall is not None and stall.level == "info":
                stall = None  # the newest says it resumed
        newest = max((s.agg[STEP_HI] for s in summaries.values()), default=None)
        states.append(
            hangs.RankStall(
                run.rank,
                run.host,
                run.status,
                stall.body if stall else None,
                stall.wall if stall else None,
                newest,
            )
        )
        gpus += hangs.gpu_readings(run.host, ((n, s.agg[LAST]) for n, s in summaries.items()))
    return hangs.join(states, max(r.world_size for r in members), gpus)
