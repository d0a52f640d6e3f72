"""Export runs from the raw store: points (CSV long/wide, Parquet) and the comparison table
(CSV, Markdown, LaTeX) — the hyper-parameter table people otherwise write by hand.

Pure functions over `RunData`; `reslog export`, `resplot export` and resplot's window all call
them, so an export never depends on what a chart decimated. Series may be lists or numpy arrays.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from sqlalchemy import Engine

from schema import read
from schema.records import RunInfo

POINT_FORMATS = ("csv", "csv-wide", "parquet")
TABLE_FORMATS = ("csv", "md", "latex")
# Metrics the comparison table shows when none are chosen (those that a run has).
DEFAULT_METRICS = ("train/loss", "valid/loss", "valid/ppl")
GPU_KEY = re.compile(r"^sys/gpu(\d+)/")

Series = tuple[Sequence[int], Sequence[float], Sequence[float]]


class ExportError(ValueError):
    """An export cannot be written as asked (format, missing pyarrow); the message says why."""


@dataclass
class RunData:
    run: RunInfo
    series: dict[str, Series]  # key -> (steps, walls, values), sorted by step
    all_keys: list[str] = field(default_factory=list)  # every key the run has (GPU count)


# ---- loading ---------------------------------------------------------------------------------


def select_keys(all_keys: Iterable[str], globs: list[str] | None) -> list[str]:
    """Keys matching any glob (fnmatch, case-sensitive), in glob order then name order.

    No globs (None or []) selects every key, sorted.
    """
    names = sorted(set(all_keys))
    if not globs:
        return names
    chosen: dict[str, None] = {}
    for glob in globs:
        for name in names:
            if fnmatch.fnmatchcase(name, glob):
                chosen.setdefault(name, None)
    return list(chosen)


def load_run_data(
    engine: Engine,
    runs: Iterable[int | str | RunInfo] | None = None,
    key_globs: list[str] | None = None,
    *,
    source: str = "local",
    store: str = "",
) -> list[RunData]:
    """Full-resolution series of the given runs (row id, uid, uid prefix, name or RunInfo;
    None = every run), restricted to keys matching `key_globs`. UnknownRun for a bad name."""
    with engine.connect() as conn:
        listed = read.list_runs(conn, source=source, store=store)
        if runs is None:
            chosen = listed
        else:
            by_id = dict(listed)
            chosen = []
            for r in runs:
                if isinstance(r, RunInfo):
                    chosen.append(read.find_run(conn, r.ref.uid, source=source, store=store))
                elif isinstance(r, int) and r in by_id:
                    chosen.append((r, by_id[r]))
                else:
                    chosen.append(read.find_run(conn, str(r), source=source, store=store))
        names = read.key_names(conn)
        key_ids = {row_id: read.run_key_ids(conn, row_id) for row_id, _ in chosen}
    out = []
    for row_id, info in chosen:
        ids_by_name = {names[k]: k for k in key_ids[row_id]}
        series = {
            name: read.series(engine, row_id, ids_by_name[name])
            for name in select_keys(ids_by_name, key_globs)
        }
        out.append(RunData(info, series, sorted(ids_by_name)))
    return out


# ---- the comparison table --------------------------------------------------------------------


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts → dotted keys ({"optim": {"lr": 1}} → {"optim.lr": 1}); lists stay values."""
    flat: dict[str, Any] = {}
    for k, v in config.items():
        name = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            flat.update(flatten(v, name + "."))
        else:
            flat[name] = v
    return flat


_MISSING = object()


def differing_config(runs: Sequence[RunInfo]) -> list[str]:
    """Flattened config keys whose values differ between the runs (absent counts as a value),
    in first-appearance order. One run or none: nothing differs."""
    flats = [flatten(r.config) for r in runs]
    order: dict[str, None] = {}
    for f in flats:
        order.update(dict.fromkeys(f))
    differing = []
    for name in order:
        seen = {json.dumps(f.get(name, _MISSING), sort_keys=True, default=repr) for f in flats}
        if len(seen) > 1:
            differing.append(name)
    return differing


def gpu_count(data: RunData) -> int:
    """GPUs the run used: distinct i in `sys/gpu{i}/...` keys, else the run's world_size."""
    gpus = {m.group(1) for k in (data.all_keys or data.series) if (m := GPU_KEY.match(k))}
    return len(gpus) if gpus else max(1, data.run.world_size)


def duration_s(run: RunInfo) -> float:
    """Seconds from creation to the end (or the last heartbeat while running or crashed)."""
    end = run.ended_at if run.ended_at is not None else run.heartbeat_at
    return max(0.0, end - run.created_at)


def metric_stats(series: Series | None) -> tuple[float | None, float | None, int | None]:
    """(last value, min ignoring NaN, step of that min); Nones when there is no point."""
    if series is None or len(series[0]) == 0:
        return None, None, None
    steps, _walls, values = series
    last = float(values[len(values) - 1])
    best, best_step = None, None
    for s, v in zip(steps, values, strict=True):
        v = float(v)
        if not math.isnan(v) and (best is None or v < best):
            best, best_step = v, int(s)
    return last, (math.nan if best is None else best), best_step


def comparison_table(
    runs: Sequence[RunData], metrics: list[str] | None = None
) -> tuple[list[str], list[list[object]]]:
    """(header, rows): one row per run with its name, the config keys that differ, the summary
    values, last / min / min-step of each metric, hours and GPU-hours.

    `metrics` are key names or globs; None = those of DEFAULT_METRICS that any run has.
    Missing cells are None.
    """
    config_keys = differing_config([d.run for d in runs])
    summary_keys: dict[str, None] = {}
    for d in runs:
        summary_keys.update(dict.fromkeys(flatten(d.run.summary)))
    present = {k for d in runs for k in d.series}
    if metrics is None:
        chosen = [m for m in DEFAULT_METRICS if m in present]
    else:
        chosen = select_keys(present, metrics)
    header = ["run", *config_keys, *summary_keys]
    for m in chosen:
        header += [f"{m} last", f"{m} min", f"{m} min step"]
    header += ["hours", "GPU-hours"]
    rows: list[list[object]] = []
    for d in runs:
        flat_config, flat_summary = flatten(d.run.config), flatten(d.run.summary)
        row: list[object] = [d.run.name]
        row += [flat_config.get(k) for k in config_keys]
        row += [flat_summary.get(k) for k in summary_keys]
        for m in chosen:
            row += list(metric_stats(d.series.get(m)))
        hours = duration_s(d.run) / 3600.0
        row += [hours, hours * gpu_count(d)]
        rows.append(row)
    return header, rows


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

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

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
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group(0)], text)


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
        # Write beside the target, then rename: a failed export never leaves half a file.
        target = os.fspath(path)
        tmp = f"{target}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", newline="", encoding="utf-8") as f:
                yield f
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def _keys_of(runs: Sequence[RunData], keys: list[str] | None) -> list[str]:
    return select_keys({k for d in runs for k in d.series}, keys)


def _write_long_csv(runs: Sequence[RunData], out: TextIO, keys: list[str]) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["run", "uid", "key", "step", "wall", "value"])
    for d in runs:
        for key in keys:
            if key not in d.series:
                continue
            steps, walls, values = d.series[key]
            for s, t, v in zip(steps, walls, values, strict=True):
                w.writerow(
                    [d.run.name, d.run.ref.uid, key, int(s), repr(float(t)), csv_value(float(v))]
                )


def _write_wide_csv(runs: Sequence[RunData], out: TextIO, keys: list[str]) -> None:
    """One row per (run, step); when a key has several points at one step (system samples
    share the training step) the row holds the last one."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["run", "uid", "step", *keys])
    for d in runs:
        grid: dict[int, dict[str, float]] = {}
        for key in keys:
            if key not in d.series:
                continue
            steps, _walls, values = d.series[key]
            for s, v in zip(steps, values, strict=True):
                grid.setdefault(int(s), {})[key] = float(v)
        for step in sorted(grid):
            cells = grid[step]
            w.writerow([d.run.name, d.run.ref.uid, step, *(csv_value(cells.get(k)) for k in keys)])


def _write_parquet(runs: Sequence[RunData], path: str | os.PathLike[str], keys: list[str]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "Parquet export needs pyarrow: pip install pyarrow (or reslog[gui] / reslog[train])"
        ) from None
    cols: dict[str, list] = {n: [] for n in ("run", "uid", "key", "step", "wall", "value")}
    for d in runs:
        for key in keys:
            if key not in d.series:
                continue
            steps, walls, values = d.series[key]
            n = len(steps)
            cols["run"] += [d.run.name] * n
            cols["uid"] += [d.run.ref.uid] * n
            cols["key"] += [key] * n
            cols["step"] += [int(s) for s in steps]
            cols["wall"] += [float(t) for t in walls]
            cols["value"] += [float(v) for v in values]
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
    table = pa.table(cols, schema=schema)
    target = os.fspath(path)
    tmp = f"{target}.tmp{os.getpid()}"
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_points(runs: Sequence[RunData], path, fmt: str, keys: list[str] | None = None) -> None:
    """Points of these runs: csv (long: run, uid, key, step, wall, value), csv-wide (one row per
    run and step, one column per key, empty where absent) or parquet (long, NaN kept).
    `keys`: names or globs (None = every key loaded). Path "-" writes text to stdout."""
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


def table_text(runs: Sequence[RunData], fmt: str, metrics: list[str] | None = None) -> str:
    """The comparison table as csv, md or latex text."""
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


def write_table(runs: Sequence[RunData], path, fmt: str, metrics: list[str] | None = None) -> None:
    """The comparison table (see comparison_table) as csv, md or latex; path "-" = stdout."""
    text = table_text(runs, fmt, metrics)
    with _text_out(path) as out:
        out.write(text)
