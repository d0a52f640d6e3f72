"""What `reslog show` and `reslog tail` print about a run, the job it is a rank of, its keys and
its events: text from a store escaped through reslog.text (controls and bidi marks visible),
values cut at a limit unless `--full`."""

from __future__ import annotations

import math

from reslog import text
from reslog.tools import export
from reslog.tools.jobs import JobReport
from schema.rules.compare import duration_s, flatten, highest, lowest
from schema.rules.ranks import own_work, ranks_text
from schema.store.records import RunInfo
from schema.store.rollup import LAST, NAN, STEP_HI, N


def _extreme(value: float) -> str:
    return text.number(None if math.isnan(value) else value)


def key_stats(series: dict[str, tuple]) -> list[list[object]]:
    """Per key of one run, from its aggregates: name, points, NaNs, last step, last value, min,
    max (NaN left out of min and max, ±inf kept)."""
    out = []
    for name in sorted(series):
        agg = series[name]
        last = math.nan if agg[LAST] is None else agg[LAST]
        out.append(
            [
                name,
                agg[N],
                agg[NAN],
                agg[STEP_HI],
                text.number(last),
                _extreme(lowest(agg)),
                _extreme(highest(agg)),
            ]
        )
    return out


def describe_run(run: RunInfo, limit: int | None = text.VALUE_LIMIT) -> list[str]:
    """What `reslog show` says about a run; each value escaped and cut at `limit` characters."""

    def v(value: object) -> str:
        return text.cell(value, limit)

    lines = [
        f"run       {v(run.name)}  ({v(run.ref.uid)})",
        f"project   {v(run.project)}",
        f"status    {v(run.status)}",
        f"host      {v(run.host)}  pid {run.pid if run.pid is not None else '-'}  "
        f"rank {run.rank}/{run.world_size}",
        f"created   {text.clock(run.created_at)}",
        f"heartbeat {text.clock(run.heartbeat_at)} ({text.age(run.heartbeat_at)})",
        f"ended     {text.clock(run.ended_at)}",
        f"duration  {text.duration(duration_s(run))}",
    ]
    if run.command:
        lines.append(f"command   {v(run.command)}")
    if run.git_commit:
        lines.append(f"git       {v(run.git_commit)}")
    if run.group or run.job_type:
        lines.append(f"group     {v(run.group or '-')}  job type {v(run.job_type or '-')}")
    if run.tags:
        lines.append(f"tags      {v(', '.join(map(str, run.tags)))}")
    if run.notes:
        lines.append(f"notes     {v(run.notes)}")
    for title, mapping in (("config", run.config), ("summary", run.summary)):
        flat = {v(k): v(export.format_cell(x)) for k, x in flatten(mapping).items()}
        lines.append(f"\n{title}" + ("" if flat else "   (empty)"))
        width = max((len(k) for k in flat), default=0)
        lines += [f"  {k.ljust(width)}  {x}" for k, x in flat.items()]
    return lines


def describe_job(report: JobReport) -> list[str]:
    """The job a run is one rank of: its ranks here with their mean phases, its stragglers over
    the newest logged steps, and its hang if it is hung now (reslog/tools/jobs.py)."""
    held = len(report.ranks)
    where = f"{held} of {report.world_size} ranks in this store"
    if report.missing:
        where += f" ({ranks_text(report.missing)} elsewhere)"
    lines = [f"\njob       {report.group}: {where}"]
    phases = own_work({p for r in report.ranks for p in r.means})
    phases += [p for p in ("comm", "step") if any(p in r.means for r in report.ranks)]
    rows = [
        [r.run.rank, r.run.host, r.run.status, "-" if r.last_step is None else r.last_step]
        + [f"{r.means[p] * 1000:.1f}" if p in r.means else "-" for p in phases]
        for r in report.ranks
    ]
    header = ["rank", "host", "status", "last step", *(f"{p} ms" for p in phases)]
    lines.append(f"  mean per step over each rank's newest {report.steps:,} logged steps at most")
    right = frozenset({0, *range(3, len(header))})
    lines += ["  " + ln for ln in text.table(header, rows, right=right).split("\n")]
    if report.stragglers:
        lines.append("  stragglers:")
        lines += [f"    {text.safe(s.message())}" for s in report.stragglers]
    else:
        lines.append("  stragglers: none")
    if report.hang is not None:
        lines.append(f"  hang: {text.safe(report.hang.text())}")
    return lines


def format_event(ev, limit: int | None = text.VALUE_LIMIT) -> str:
    """One event; a body keeps its lines (a traceback), every control else escaped."""
    step = "-" if ev.step is None else ev.step
    kind = text.cell(f"{ev.kind}/{ev.level}", limit)
    line = f"{text.clock(ev.wall)}  step {step}  {kind}  {text.cell(ev.title, limit)}"
    return line + (f" — {text.safe(ev.body, lines=True)}" if ev.body else "")
