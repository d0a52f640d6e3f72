"""The hover readout's layout, as the best dashboards lay it out for a sweep: one row per run,
its series on the chart side by side in columns (train and valid of a run on one row), the
hovered run first and emphasised, then the others by value (the order their lines cross the
pointer, top first) or by name, runs that ended before the hovered x greyed at the end, and no
more rows than fit ("+N more"). No Qt here: resplot/ui/crosshair.py shows the text and places it.

The values come from resplot.data.hover.readings() (the value lookup); this only arranges them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from resplot.data.hover import Reading, value_text
from resplot.data.model import RunRef
from resplot.data.names import fit_names
from resplot.data.state import HOVER_ORDERS

MAX_COLUMNS = 4  # more series of a run on one chart (8 GPUs): a row per series instead
ENDED = "#9a9a9a"  # the text of a run that ended before the hovered x


@dataclass(frozen=True)
class Row:
    ref: RunRef
    name: str
    color: str
    cells: dict[str, Reading]  # column -> reading
    ended: bool  # every series of the run ends before the hovered x
    hovered: bool


@dataclass(frozen=True)
class Readout:
    title: str
    where: str  # "step 12,000", "wall time 2024-05-01 12:00"
    columns: list[str]  # "" is the one column of a chart with one series per run
    rows: list[Row]  # the rows shown
    more: int  # rows that did not fit
    at_step: int | None  # the hovered step (the step axis); None: a step column per row
    step_slack: int  # a cell this many steps or fewer from at_step does not say its own step
    envelope: bool  # some value is a bucket extreme (zoomed out)
    smoothed: bool  # some value is smoothed (the raw one is beside it)


def _value(r: Reading) -> float:
    return r.smoothed if r.smoothed is not None else r.raw


def layout(
    title: str,
    found: Sequence[Reading],
    *,
    x: float,
    where: str,
    names: Mapping[RunRef, str],
    ends: Mapping[object, float],
    tolerance: float,
    hovered: RunRef | None = None,
    by: str = "value",
    max_rows: int = 20,
    at_step: int | None = None,
    step_slack: int = 0,
    columns: Sequence[str] = (),
) -> Readout:
    """Rows from `found` (the readings at `x` of one chart). `names`: run names; `ends`: each
    Item's last x with data; a run whose every series ends more than `tolerance` before `x`
    has ended. `hovered`: the run under the pointer (listed first). `by`: "value" or "name".
    At most `max_rows` rows, the last of them given to "+N more" when some are left out.
    `columns`: the order of the series parts (the chart's, train before valid); `at_step`: the
    hovered step on the step axis, where a value read more than `step_slack` steps away (a
    run's nearest logged step: validation every 500 steps) says its step."""
    if by not in HOVER_ORDERS:
        raise ValueError(f"readout order must be one of {', '.join(HOVER_ORDERS)}, got {by!r}")
    present = {r.item.part for r in found}
    parts = [c for c in dict.fromkeys(columns) if c in present]
    parts += [p for p in dict.fromkeys(r.item.part for r in found) if p not in parts]
    per_run: dict[RunRef, list[Reading]] = {}
    for r in found:
        per_run.setdefault(r.item.ref, []).append(r)
    split = len(parts) > MAX_COLUMNS or any(
        len({r.item.part for r in rs}) < len(rs) for rs in per_run.values()
    )
    rows = []
    for ref, rs in per_run.items():
        groups = [[r] for r in rs] if split else [rs]
        for group in groups:
            name = names.get(ref, ref.uid[:8])
            if split and group[0].item.part:
                name = f"{name} {group[0].item.part}"
            ended = all(x - ends.get(r.item, x) > tolerance for r in group)
            cells = {("" if split else r.item.part): r for r in group}
            rows.append(Row(ref, name, group[0].item.color, cells, ended, ref == hovered))
    column_names = [""] if split else parts

    def first_value(row: Row) -> float:
        return next((_value(row.cells[c]) for c in column_names if c in row.cells), math.nan)

    if by == "name":
        rows.sort(key=lambda r: r.name.lower())
    else:
        rows.sort(key=lambda r: (math.isnan(v := first_value(r)), -v))
    rows.sort(key=lambda r: (not r.hovered, r.ended))  # stable: the order above within each
    shown = rows if len(rows) <= max_rows else rows[: max(0, max_rows - 1)]
    return Readout(
        title,
        where,
        column_names,
        shown,
        len(rows) - len(shown),
        at_step,
        step_slack,
        envelope=any(r.envelope for r in found),
        smoothed=any(r.smoothed is not None for r in found),
    )


@dataclass(frozen=True)
class Span:
    """A piece of text in the readout: a value is bold, a detail (raw value, step) grey."""

    text: str
    bold: bool = False
    grey: bool = False


@dataclass(frozen=True)
class Line:
    row: Row
    name: str  # cut to fit
    cells: list[list[Span]]  # one per column ([] where the run has no such series)


@dataclass(frozen=True)
class Text:
    """What the readout widget paints: a header, column heads, one line per row, notes."""

    head: list[Span]
    columns: list[str]
    lines: list[Line]
    notes: list[str]

    def plain(self) -> str:
        """The whole readout as plain text, a line per line (tests, accessibility)."""
        out = [" ".join(s.text for s in self.head)]
        if any(self.columns):
            out.append(" ".join(self.columns))
        for line in self.lines:
            cells = " | ".join(" ".join(s.text for s in c) for c in line.cells)
            out.append(f"{line.name} | {cells}")
        return "\n".join(out + self.notes)


def _cell(r: Reading, readout: Readout, raw: bool, steps: bool) -> list[Span]:
    """A value (smoothed where smoothing applies; the raw one beside it when `raw`), and the
    step it was read at when that is far from the hovered step (and `steps`)."""
    value = value_text(_value(r))
    out = [Span("NaN" if value == "nan" else value, bold=True)]
    if raw and r.smoothed is not None:
        out.append(Span(value_text(r.raw), grey=True))
    # On a steps axis the point's x is its step (a run placed by its step counter: the
    # counter's value, not the logging call it was logged at).
    at = round(r.x) if math.isfinite(r.x) else r.step
    if steps and readout.at_step is not None and abs(at - readout.at_step) > readout.step_slack:
        out.append(Span(f"@{at:,}", grey=True))
    return out


@functools.lru_cache(maxsize=64)
def fitted_names(names: tuple[str, ...], chars: int) -> dict[str, str]:
    """fit_names, remembered: a pointer move lays out the same runs' names again and again
    (and the readout's fit tries several lengths); only the values change. Read only."""
    return fit_names(names, chars)


def render(
    readout: Readout,
    name_chars: int = 40,
    *,
    raw: bool = True,
    steps: bool = True,
    max_columns: int | None = None,
) -> Text:
    """The readout's text, names cut to `name_chars` characters (the part that tells a sweep's
    names apart stays). To fit a narrow chart the caller drops, in turn: the hovered run's raw
    value (`raw`), the steps of values read away from the hovered step (`steps`), and the
    columns after the first ones (`max_columns`: the notes say how many were dropped)."""
    columns = readout.columns[:max_columns] if max_columns else readout.columns
    step_column = readout.at_step is None
    heads = [*columns, *(["step"] if step_column else [])]
    fitted = fitted_names(tuple(r.name for r in readout.rows), name_chars)
    title = fitted_names((readout.title,), name_chars + 8)[readout.title]
    head = [Span(title, bold=True), Span("· " + readout.where)]
    if readout.smoothed:
        head.append(Span("· smoothed", grey=True))
    lines = []
    for row in readout.rows:
        cells = [
            _cell(row.cells[c], readout, raw and row.hovered, steps) if c in row.cells else []
            for c in columns
        ]
        if step_column:
            first = next(row.cells[c] for c in readout.columns if c in row.cells)
            cells.append([Span(f"{first.step:,}")])
        lines.append(Line(row, fitted[row.name], cells))
    notes = []
    if readout.more:
        notes.append(f"+{readout.more} more")
    if len(columns) < len(readout.columns):
        notes.append(f"{', '.join(readout.columns[len(columns) :])}: chart too narrow")
    if any(r.ended for r in readout.rows):
        notes.append("grey: ended before here")
    if readout.envelope:
        notes.append("zoomed out: bucket min/max until the logged values load")
    return Text(head, heads, lines, notes)
