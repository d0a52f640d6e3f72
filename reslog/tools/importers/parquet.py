"""`reslog import parquet FILE...`: long-format Parquet, in one of two layouts (told apart by
their columns):

- **long** (reslog's own `export --format parquet`, and any table like it): `key`, `step`,
  `value`, and optionally `run` (one run per distinct value; else the file's stem), `uid` (runs
  told apart by it when names repeat) and `wall` (Unix seconds; else the file's time). A round
  trip gives back every point bit for bit, NaN and infinities included.
- **neptune** (the neptune-exporter's files, `<project>/<run>_part_<N>.parquet`, from
  neptune-ai/neptune-exporter's `model.SCHEMA`): `project_id`, `run_id`, `attribute_path`,
  `attribute_type`, `step` (decimal(18, 6)), `timestamp`, `int_value`, `float_value`,
  `string_value`, `bool_value`, `datetime_value`, `string_set_value`, `file_value`,
  `histogram_value`. One run per (project, run id), its parts read in order. `float_series`
  become points (Neptune's fractional steps scaled to integers by the smallest power of ten
  that makes them whole, said in the config as `neptune/step_multiplier`); `string_series`
  text events; single values (float, int, string, bool, datetime, string_set) the config
  under their attribute paths; `sys/tags` the tags, `sys/description` the notes,
  `sys/creation_time` the start, `sys/experiment/name` (else `sys/name`) the group. A fork is
  a run of its own with its parent in the config (`sys/forking/parent`, `sys/forking/step`,
  as exported). Files, file series and histograms are listed as not imported.

A folder argument means every `*.parquet` file under it. Needs pyarrow.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

from reslog.tools.importers import ImportError_
from reslog.tools.importers.runs import ImportedRun

LONG = ("key", "step", "value")
NEPTUNE = ("project_id", "run_id", "attribute_path", "attribute_type", "step")
PARAM_TYPES = ("float", "int", "string", "bool", "datetime", "string_set")
MAX_DECIMALS = 6  # Neptune steps are decimal(18, 6)


def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError_("reading Parquet needs pyarrow (pip install pyarrow)") from None
    return pq


def parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ImportError_(f"{path}: no such file or folder")
    return sorted(path.rglob("*.parquet"), key=_part_order)


def _part_order(path: Path) -> tuple:
    """Files by folder, then run, then part number (part_10 after part_9)."""
    stem, _, part = path.stem.rpartition("_part_")
    if stem and part.isdigit():
        return (str(path.parent), stem, int(part))
    return (str(path.parent), path.stem, -1)


def read_parquet(path: Path, project: str | None) -> Iterator[ImportedRun]:
    """The runs of every Parquet file under `path`, in the layout their columns say."""
    pq = _pyarrow()
    files = parquet_files(path.resolve())
    neptune: dict[tuple[str, str], tuple[ImportedRun, list]] = {}  # run, its series rows
    for file in files:
        try:
            table = pq.read_table(file)
        except Exception as exc:  # pyarrow's errors: not Parquet, truncated, ...
            raise ImportError_(f"{file}: not a readable Parquet file ({exc})") from None
        names = set(table.column_names)
        if set(NEPTUNE) <= names:
            _neptune_rows(table, file, project, neptune)
        elif set(LONG) <= names:
            yield from _long_runs(table, file, project)
        else:
            raise ImportError_(
                f"{file}: neither a long table (key, step, value) nor the neptune-exporter's "
                f"layout (columns: {', '.join(table.column_names)[:200]})"
            )
    for run, rows in neptune.values():
        yield _finish_neptune(run, rows)


# -- long ---------------------------------------------------------------------------------------


def _long_runs(table, file: Path, project: str | None) -> list[ImportedRun]:
    cols = {name: table.column(name).to_pylist() for name in table.column_names}
    keys, steps, values = cols["key"], cols["step"], cols["value"]
    walls = cols.get("wall") or [file.stat().st_mtime] * len(keys)
    run_names = cols.get("run") or [file.stem] * len(keys)
    uids = cols.get("uid") or run_names
    runs: dict[str, ImportedRun] = {}
    for i, (key, step, value) in enumerate(zip(keys, steps, values, strict=True)):
        ident = uids[i] or run_names[i]
        run = runs.get(ident)
        if run is None:
            name = run_names[i] or file.stem
            run = runs[ident] = ImportedRun(f"parquet:{file}#{ident}", project or "parquet", name)
            run.notes = f"imported from {file}"
        if key is None or step is None:
            raise ImportError_(f"{file}: row {i}: no key or step")
        if value is None:
            continue
        run.add(str(key), _step(step, file, i), float(walls[i]), float(value))
    return list(runs.values())


def _step(step: Any, file: Path, row: int) -> int:
    if isinstance(step, int):
        return step
    try:
        f = float(step)
    except (TypeError, ValueError):
        f = math.nan
    if not f.is_integer():
        raise ImportError_(f"{file}: row {row}: step {step!r} is not an integer")
    return int(f)


# -- neptune ------------------------------------------------------------------------------------


def _neptune_rows(table, file: Path, project: str | None, runs: dict) -> None:
    names = set(table.column_names)
    col = {n: table.column(n).to_pylist() for n in table.column_names if n != "timestamp"}
    if "timestamp" in names:  # ms since the epoch, without building datetimes
        import pyarrow as pa

        ts = table.column("timestamp")
        col["timestamp"] = ts.cast(pa.int64()).to_pylist() if len(ts) else []
    n = table.num_rows
    empty = [None] * n
    for i in range(n):
        ident = (col["project_id"][i], col["run_id"][i])
        found = runs.get(ident)
        if found is None:
            pid, rid = ident
            run = ImportedRun(f"neptune:{pid}/{rid}", project or str(pid), str(rid))
            run.notes = f"imported from the neptune-exporter's files ({file.parent})"
            run.config["neptune/project"], run.config["neptune/run_id"] = pid, rid
            found = runs[ident] = (run, [])  # series rows wait until the steps are scaled
        run, rows = found
        path, kind = col["attribute_path"][i], col["attribute_type"][i]
        wall = col.get("timestamp", empty)[i]
        if kind == "float_series":
            value = col.get("float_value", empty)[i]
            if value is not None:
                rows.append((path, col["step"][i], wall, float(value)))
        elif kind == "string_series":
            text = col.get("string_value", empty)[i]
            if text is not None:
                rows.append((path, col["step"][i], wall, str(text)))
        elif kind in PARAM_TYPES:
            value = _param(kind, col, i)
            if value is not None:
                run.config[str(path)] = value
        else:  # file, file_series, file_set, artifact, histogram_series, ...
            run.skip(str(path), str(kind))


def _param(kind: str, col: dict, i: int) -> Any:
    column = {"float": "float_value", "int": "int_value", "string": "string_value",
              "bool": "bool_value", "datetime": "datetime_value",
              "string_set": "string_set_value"}[kind]  # fmt: skip
    value = col.get(column, [None] * (i + 1))[i]
    if isinstance(value, datetime):
        return value.isoformat()
    if kind == "string_set" and value is not None:
        return sorted(value)
    return value


def _finish_neptune(run: ImportedRun, pending: list) -> ImportedRun:
    """Steps scaled to integers, series and texts added; the sys/ attributes read."""
    decimals = max((_decimals(step) for _p, step, _w, _v in pending), default=0)
    scale = 10**decimals
    if scale != 1:
        run.config["neptune/step_multiplier"] = scale
    created = _created(run.config.get("sys/creation_time"))
    fallback = created if created is not None else 0.0
    for path, step, wall_ms, value in pending:
        s = 0 if step is None else int(Decimal(step) * scale)
        wall = fallback if wall_ms is None else wall_ms / 1000.0
        if isinstance(value, str):
            run.events.append((wall, s, "text", "info", str(path), value))
        else:
            run.add(str(path), s, wall, value)
    if created is not None:
        run.created_at = created
    tags = run.config.get("sys/tags")
    if isinstance(tags, list):
        run.tags = [str(t) for t in tags]
    if isinstance(run.config.get("sys/description"), str) and run.config["sys/description"]:
        run.notes = run.config["sys/description"]
    group = run.config.get("sys/experiment/name") or run.config.get("sys/name")
    if isinstance(group, str):
        run.group = group
    parent = run.config.get("sys/forking/parent")
    if parent:
        run.notes += f"; forked from {parent} at step {run.config.get('sys/forking/step')}"
    return run


def _decimals(step: Any) -> int:
    if step is None:
        return 0
    d = Decimal(step).normalize()
    return min(MAX_DECIMALS, max(0, -d.as_tuple().exponent))  # type: ignore[operator]


def _created(value: Any) -> float | None:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    return None
