"""The run table's rows as plain data: one row per run, except that the runs of one multi-rank
job (its group, across every source: schema/rules/ranks.py) are one row, which unfolds into a row
per host and, under each host, its ranks' runs. No Qt: resplot/ui/run_table.py shows these.

A host row carries the host's telemetry: its GPUs as the job's runs on that host logged them
(the local rank 0's run, or the trainer's telemetry run of a host with `every_rank` off).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from reslog.text import safe
from resplot.data.cache import SeriesCache
from resplot.data.model import RunInfo, RunRef
from resplot.data.ranks import job_label
from schema.rules.alerts import gpu_key
from schema.rules.ranks import ranks_text
from schema.store.rollup import VMAX, VSUM, N
from schema.store.status import CRASHED, FAILED, FINISHED, KILLED, RUNNING, STALLED

# The order statuses are said in when a job's runs differ: what needs a look first.
URGENCY = (STALLED, CRASHED, FAILED, KILLED, RUNNING, FINISHED)


@dataclass
class Entry:
    """One row: a run, a job or a host of a job (`key` tells them apart across refreshes)."""

    key: tuple
    kind: str  # "run", "job" or "host"
    label: str
    run: RunInfo | None = None  # a run's own
    members: list[RunInfo] = field(default_factory=list)  # the runs it stands for
    children: list[Entry] = field(default_factory=list)

    @property
    def refs(self) -> list[RunRef]:
        return [r.ref for r in self.members]


def job_of(run: RunInfo) -> str | None:
    """The job a run belongs to in the table: its group, when it is one of several ranks."""
    return run.group if run.group and run.world_size > 1 else None


def entries(runs: Iterable[RunInfo]) -> list[Entry]:
    """The table's top rows in the order of `runs` (a job where its first run comes), each
    job with a row per host (in the order of their lowest rank) and the host's runs by rank."""
    runs = list(runs)
    by_job: dict[str, list[RunInfo]] = {}
    for run in runs:
        group = job_of(run)
        if group is not None:
            by_job.setdefault(group, []).append(run)
    out: list[Entry] = []
    for run in runs:
        group = job_of(run)
        if group is None:
            out.append(Entry(("run", run.ref), "run", run.name, run, [run]))
        elif by_job[group][0] is run:
            out.append(_job(group, by_job[group]))
    return out


def _job(group: str, members: list[RunInfo]) -> Entry:
    members = sorted(members, key=lambda r: (r.rank, r.created_at))
    first: dict[str, int] = {}
    for run in members:
        first.setdefault(run.host, run.rank)
    hosts = []
    for host in sorted(first, key=lambda h: first[h]):
        mine = [r for r in members if r.host == host]
        runs = [Entry(("run", r.ref), "run", r.name, r, [r]) for r in mine]
        label = f"{safe(host) or '(no host)'} · {ranks_text(r.rank for r in mine)}"
        hosts.append(Entry(("host", group, host), "host", label, None, mine, runs))
    return Entry(("job", group), "job", job_label(group, members), None, members, hosts)


def status_of(members: list[RunInfo]) -> str:
    """One status when the runs agree, else each with its count, most urgent first
    (`1 stalled, 3 running`)."""
    counts: dict[str, int] = {}
    for run in members:
        counts[run.status] = counts.get(run.status, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    order = sorted(counts, key=lambda s: (URGENCY.index(s) if s in URGENCY else -1, s))
    return ", ".join(f"{counts[s]} {s}" for s in order)


def worst_status(members: list[RunInfo]) -> str:
    """The most urgent status among the runs (its colour colours a job's status cell)."""
    statuses = {r.status for r in members}
    return min(statuses, key=lambda s: (URGENCY.index(s) if s in URGENCY else -1, s))


@dataclass(frozen=True)
class Gpu:
    host: str
    index: int
    util: float | None  # mean over the run, percent
    power_w: float | None  # mean over the run
    limit_w: float | None
    temp_c: float | None  # the highest seen


def gpus(cache: SeriesCache, members: list[RunInfo]) -> list[Gpu]:
    """Every GPU the runs' telemetry names, from the series summaries (no tile is read)."""
    out = []
    for run in members:
        found: dict[int, dict[str, tuple]] = {}
        for name, summary in cache.summaries(run.ref).items():
            parsed = gpu_key(name)
            if parsed is not None and parsed[1] in ("util", "power_w", "power_limit_w", "temp_c"):
                found.setdefault(parsed[0], {})[parsed[1]] = summary.agg
        for index, aggs in sorted(found.items()):
            out.append(
                Gpu(
                    run.host,
                    index,
                    _mean(aggs.get("util")),
                    _mean(aggs.get("power_w")),
                    _mean(aggs.get("power_limit_w")),
                    _max(aggs.get("temp_c")),
                )
            )
    return out


def _mean(agg: tuple | None) -> float | None:
    if agg is None or not agg[N] or agg[VSUM] is None:
        return None
    value = float(agg[VSUM]) / agg[N]
    return value if math.isfinite(value) else None


def _max(agg: tuple | None) -> float | None:
    return None if agg is None or agg[VMAX] is None else float(agg[VMAX])


def gpus_text(found: list[Gpu]) -> str:
    """A host's GPUs in one cell: `2× 96 % · 600 W · 69 °C` (mean utilisation and power a GPU
    over the run, the highest temperature); "" without telemetry."""
    if not found:
        return ""
    parts = [f"{len(found)}×"]
    utils = [g.util for g in found if g.util is not None]
    powers = [g.power_w for g in found if g.power_w is not None]
    temps = [g.temp_c for g in found if g.temp_c is not None]
    if utils:
        parts.append(f"{sum(utils) / len(utils):.0f} %")
    if powers:
        parts.append(f"{sum(powers) / len(powers):.0f} W")
    if temps:
        parts.append(f"{max(temps):.0f} °C")
    return " · ".join([" ".join(parts[:2]), *parts[2:]])


def gpus_detail(found: list[Gpu]) -> str:
    """The tooltip: each GPU on a line (means over the run, the highest temperature)."""
    lines = []
    for g in found:
        bits = []
        if g.util is not None:
            bits.append(f"{g.util:.0f} % util")
        if g.power_w is not None:
            limit = f" of {g.limit_w:.0f} W" if g.limit_w else ""
            bits.append(f"{g.power_w:.0f} W{limit}")
        if g.temp_c is not None:
            bits.append(f"up to {g.temp_c:.0f} °C")
        lines.append(f"{safe(g.host)} gpu{g.index}: {', '.join(bits)}")
    return "\n".join(["mean over the run:", *lines]) if lines else ""
