"""Export runs from the raw store: points (CSV long/wide, Parquet) and the comparison table
(CSV, Markdown, LaTeX) — the hyper-parameter table people otherwise write by hand.

Points stream: each series is read in bounded chunks (`ExportRun.scan`) and written as it
comes, so an export of 10^8 points needs no more memory than one chunk (a wide CSV joins the
keys of a run one step window at a time). The comparison table comes from the series rows
(schema.rules.compare), never from a decimated view. `reslog export`, `resplot export` and resplot's
window all call these functions, on a local store (`load_runs`) or through resplot's sources.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from reslog.text import safe
from schema.rules.compare import RunSummary, comparison_table, select_keys
from schema.store.envelope import agg_of
from schema.store.reader import StoreReader
from schema.store.records import RunInfo
from schema.store.rollup import STEP_HI, STEP_LO, N
from schema.store.user_files import replacing

POINT_FORMATS = ("csv", "csv-wide", "parquet")
TABLE_FORMATS = ("csv", "md", "latex")
Point = tuple[int, float, float]  # step, wall, value (NaN kept)
Scan = Callable[[str, int | None, int | None], Iterable[list[Point]]]
WINDOW_POINTS = 200_000  # points of one run joined at a time by the wide CSV


class ExportError(ValueError):
    """An export cannot be written as asked (format, missing pyarrow); the message says why."""


@dataclass
class ExportRun(RunSummary):
    """A run to export: its info, its series' aggregates, and `scan(key, start, stop)`, which
    yields the series' points with start <= step < stop (None: no bound) by step, in chunks."""

    scan: Scan | None = None


def load_runs(
    reader: StoreReader,
    runs: Iterable[int | str | RunInfo] | None = None,
    key_globs: Sequence[str] | None = None,
) -> list[ExportRun]:
    """The given runs (row id, uid, uid prefix, name or RunInfo; None = every run) of a store,
    with the aggregates of their keys matching `key_globs` (None = all). UnknownRun for a bad
    name. Reads O(series); the points are read when written."""
    listed = reader.runs()
    if runs is None:
        chosen = listed
    else:
        by_id = dict(listed)
        chosen = []
        for r in runs:
            if isinstance(r, RunInfo):
                chosen.append(reader.find(r.ref.uid))
            elif isinstance(r, int) and r in by_id:
                chosen.append((r, by_id[r]))
            else:
                chosen.append(reader.find(str(r)))
    rows = reader.series_rows([row_id for row_id, _ in chosen])
    ids = {name: key for key, name in reader.key_names().items()}
    out = []
    for row_id, info in chosen:
        per_key = rows.get(row_id, {})
        wanted = set(select_keys(per_key, key_globs))
        series = {name: agg_of(row, 2) for name, row in per_key.items() if name in wanted}

        def scan(key, start, stop, _run=row_id):
            return reader.scan(_run, ids[key], start, stop)

        out.append(ExportRun(info, series, scan))
    return out


# ---- text rendering --------------------------------------------------------------------------


def format_number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def format_cell(value: object) -> str:
    """A cell as a person reads it: 4 significant digits, booleans and lists as in Python/JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, default=repr)


def _numeric(column: list[object]) -> bool:
    cells = [c for c in column if c is not None]
    return bool(cells) and all(
        isinstance(c, int | float) and not isinstance(c, bool) for c in cells
    )


def render_markdown(header: list[str], rows: list[list[object]]) -> str:
    """A GitHub pipe table; numeric columns right-aligned."""

    def cell(text: str) -> str:  # whole, but no control reaches a terminal that shows it
        return safe(text.replace("\n", " ")).replace("|", "\\|")

    columns = list(zip(*rows, strict=True)) if rows else [()] * len(header)
    align = ["---:" if _numeric(list(c)) else "---" for c in columns]
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell(format_cell(v)) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_LATEX_RE = re.compile("|".join(re.escape(c) for c in _LATEX_SPECIAL))


def latex_escape(text: str) -> str:
    """TeX's specials escaped; controls and bidi marks shown as escapes (text.safe) first."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], safe(text))


def render_latex(header: list[str], rows: list[list[object]]) -> str:
    """A booktabs tabular (needs \\usepackage{booktabs}); numeric columns right-aligned."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(header)
    spec = "".join("r" if _numeric(list(c)) else "l" for c in columns)
    lines = [
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        " & ".join(latex_escape(h) for h in header) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(latex_escape(format_cell(v)) for v in row) + " \\\\" for row in rows]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


# ---- writing ---------------------------------------------------------------------------------


def csv_value(value: object) -> object:
    """Floats exactly (repr round-trips) and NaN/inf as nan/inf/-inf; None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, float):
        return format_number(value) if not math.isfinite(value) else repr(value)
    if isinstance(value, list | dict):
        return json.dumps(value)
    return value


@contextmanager
def _text_out(path: str | os.PathLike[str] | TextIO) -> Iterator[TextIO]:
    """A path ("-" = stdout) or an open text stream."""
    if hasattr(path, "write"):
        yield path  # type: ignore[misc]
    elif os.fspath(path) == "-":
        yield sys.stdout
    else:
        # A fresh file beside the target, renamed over it: a failed export never leaves half a
        # file, and a link planted at the target (or at any name) is never written through.
        with replacing(path, "w", newline="", encoding="utf-8") as f:
            yield f


def _keys_of(runs: Sequence[ExportRun], keys: Sequence[str] | None) -> list[str]:
    return select_keys({k for d in runs for k in d.series}, keys)


def _chunks(d: ExportRun, key: str, start=None, stop=None) -> Iterator[list[Point]]:
    if d.scan is None:
        raise ExportError(f"run {d.run.name}: no way to read its points")
    yield from d.scan(key, start, stop)


def _write_long_csv(runs: Sequence[ExportRun], out: TextIO, keys: list[str]) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["run", "uid", "key", "step", "wall", "value"])
    for d in runs:
        name, uid = d.run.name, d.run.ref.uid
        for key in keys:
            if key not in d.series:
                continue
            for chunk in _chunks(d, key):
                w.writerows(
                    [name, uid, key, int(s), repr(float(t)), csv_value(float(v))]
                    for s, t, v in chunk
                )


def step_windows(series: Sequence[tuple], points: int = WINDOW_POINTS) -> list[tuple[int, int]]:
    """[start, stop) step windows covering series (aggregates) holding about `points` points
    each between them."""
    if not series:
        return []
    lo = min(a[STEP_LO] for a in series)
    hi = max(a[STEP_HI] for a in series) + 1
    total = sum(a[N] for a in series)
    width = max(1, (hi - lo) * points // max(1, total))
    return [(a, min(hi, a + width)) for a in range(lo, hi, width)]


def _write_wide_csv(runs: Sequence[ExportRun], out: TextIO, keys: list[str]) -> None:
    """One row per (run, step); when a key has several points at one step (system samples
    share the training step) the row holds the last one."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["run", "uid", "step", *keys])
    for d in runs:
        present = [k for k in keys if k in d.series]
        for start, stop in step_windows([d.series[k] for k in present]):
            grid: dict[int, dict[str, float]] = {}
            for key in present:
                for chunk in _chunks(d, key, start, stop):
                    for s, _t, v in chunk:
                        grid.setdefault(int(s), {})[key] = float(v)
            for step in sorted(grid):
                cells = grid[step]
                w.writerow(
                    [d.run.name, d.run.ref.uid, step, *(csv_value(cells.get(k)) for k in keys)]
                )


def _write_parquet(runs: Sequence[ExportRun], path: str | os.PathLike[str], keys: list[str]):
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "Parquet export needs pyarrow: pip install pyarrow (or reslog[gui] / reslog[train])"
        ) from None
    schema = pa.schema(
        [
            ("run", pa.string()),
            ("uid", pa.string()),
            ("key", pa.string()),
            ("step", pa.int64()),
            ("wall", pa.float64()),
            ("value", pa.float64()),  # NaN stays NaN (not null)
        ]
    )
    with replacing(path, "wb") as out, pq.ParquetWriter(out, schema) as writer:
        for d in runs:
            for key in keys:
                if key not in d.series:
                    continue
                for chunk in _chunks(d, key):  # one row group per chunk: bounded memory
                    n = len(chunk)
                    steps, walls, values = zip(*chunk, strict=True) if n else ((), (), ())
                    writer.write_table(
                        pa.table(
                            {
                                "run": [d.run.name] * n,
                                "uid": [d.run.ref.uid] * n,
                                "key": [key] * n,
                                "step": [int(s) for s in steps],
                                "wall": [float(t) for t in walls],
                                "value": [float(v) for v in values],
                            },
                            schema=schema,
                        )
                    )


def write_points(
    runs: Sequence[ExportRun], path, fmt: str, keys: Sequence[str] | None = None
) -> None:
    """Points of these runs, streamed: csv (long: run, uid, key, step, wall, value), csv-wide
    (one row per run and step, one column per key, empty where absent) or parquet (long, NaN
    kept). `keys`: names or globs (None = every key loaded). Path "-" writes text to stdout."""
    if fmt not in POINT_FORMATS:
        raise ExportError(
            f"unknown points format {fmt!r}; choose one of {', '.join(POINT_FORMATS)}"
        )
    chosen = _keys_of(runs, keys)
    if fmt == "parquet":
        if hasattr(path, "write") or os.fspath(path) == "-":
            raise ExportError("Parquet is binary: give a file name with -o")
        _write_parquet(runs, path, chosen)
        return
    with _text_out(path) as out:
        (_write_long_csv if fmt == "csv" else _write_wide_csv)(runs, out, chosen)


def table_text(runs: Sequence[RunSummary], fmt: str, metrics: Sequence[str] | None = None) -> str:
    """The comparison table (schema.rules.compare.comparison_table) as csv, md or latex text."""
    if fmt not in TABLE_FORMATS:
        raise ExportError(f"unknown table format {fmt!r}; choose one of {', '.join(TABLE_FORMATS)}")
    header, rows = comparison_table(runs, metrics)
    if fmt == "md":
        return render_markdown(header, rows)
    if fmt == "latex":
        return render_latex(header, rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows([[csv_value(v) for v in row] for row in rows])
    return buf.getvalue()


def write_table(
    runs: Sequence[RunSummary], path, fmt: str, metrics: Sequence[str] | None = None
) -> None:
    """The comparison table as csv, md or latex; path "-" = stdout."""
    text = table_text(runs, fmt, metrics)
    with _text_out(path) as out:
        out.write(text)
