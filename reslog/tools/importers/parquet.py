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

A folder argument means every `*.parquet` file under it. Needs pyarrow. Only regular files
are read (a FIFO named `x.parquet` is refused by name).

A long file is read row group by row group in batches of BATCH_ROWS rows and written as it is
read, all its runs in one transaction (memory does not grow with the file: 161 MB peak RSS for
3M rows, 156 MB for 1M, docs/benchmarks.md), so a bad row anywhere still leaves nothing of the
file written. Its columns' types are checked
first: `value`, `step` and `wall` must hold numbers, `key`, `run` and `uid` text (a string or
list column is refused in one line naming it). A key no store can hold (over 500 characters, a
NUL) is not imported: its values are counted and said once. Each run's rows are fingerprinted
(a digest of every row in order, recorded with the count in the run's `import` event), so a
file imported again is judged by its content, not its name: the same rows are "nothing new", a
file that grew (the rows imported before, then more) gets its new rows appended, and a file
rewritten with other rows is refused in one line naming it (`--replace` imports it again).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Engine, select

from reslog.tools.importers import ImportError_, exists_as_file, open_regular, shown
from reslog.tools.importers.runs import (
    ImportedRun,
    insert_events,
    key_problem,
    write_run,
)
from reslog.training.values import storable_text
from schema.store.rollup_writer import RollupWriter
from schema.store.status import FINISHED
from schema.store.tables import events, runs
from schema.store.writes import insert_run, resolve_keys

LONG = ("key", "step", "value")
NEPTUNE = ("project_id", "run_id", "attribute_path", "attribute_type", "step")
PARAM_TYPES = ("float", "int", "string", "bool", "datetime", "string_set")
MAX_DECIMALS = 6  # Neptune steps are decimal(18, 6)
BATCH_ROWS = 16_384  # rows a batch: memory is a few of these, whatever the file's size
# (run, outcome, points written, keys): what import_runs prints a line about
Imported = tuple[ImportedRun, str, int, int]


def _pyarrow():
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError_("reading Parquet needs pyarrow (pip install pyarrow)") from None
    return pq


def parquet_files(path: Path) -> list[Path]:
    if exists_as_file(path):  # a FIFO too: refused by name when it is opened
        return [path]
    if not path.is_dir():
        raise ImportError_(f"{shown(path)}: no such file or folder")
    return sorted(path.rglob("*.parquet"), key=_part_order)


def _part_order(path: Path) -> tuple:
    """Files by folder, then run, then part number (part_10 after part_9)."""
    stem, _, part = path.stem.rpartition("_part_")
    if stem and part.isdigit():
        return (str(path.parent), stem, int(part))
    return (str(path.parent), path.stem, -1)


def open_parquet(file: Path, stream: IO[bytes]):
    """A pyarrow ParquetFile of `stream` (the regular file `file`, open_regular)."""
    pq = _pyarrow()
    try:
        return pq.ParquetFile(stream)
    except Exception as exc:  # pyarrow's errors: not Parquet, truncated, ...
        raise ImportError_(f"{shown(file)}: not a readable Parquet file ({exc})") from None


def import_parquet(
    engine: Engine, path: Path, project: str | None, replace: bool, command: str
) -> Iterator[Imported]:
    """Import every Parquet file under `path`: long files as they are read (one transaction a
    file), the neptune-exporter's runs (which may span files) once all are read."""
    neptune: dict[tuple[str, str], tuple[ImportedRun, list]] = {}  # run, its series rows
    for file in parquet_files(path.resolve()):
        with os.fdopen(open_regular(file), "rb") as stream:
            pf = open_parquet(file, stream)
            names = set(pf.schema_arrow.names)
            if set(NEPTUNE) <= names:
                try:
                    table = pf.read()
                except Exception as exc:
                    raise ImportError_(f"{shown(file)}: cannot read it ({exc})") from None
                try:
                    _neptune_rows(table, file, project, neptune)
                except (TypeError, ValueError, ArithmeticError) as exc:
                    raise ImportError_(
                        f"{shown(file)}: a value of an unexpected type ({exc}); not imported"
                    ) from None
            elif set(LONG) <= names:
                mtime = os.fstat(stream.fileno()).st_mtime
                yield from LongFile(engine, pf, file, project, replace, command, mtime).write()
            else:
                shown_names = ", ".join(pf.schema_arrow.names)[:200]
                raise ImportError_(
                    f"{shown(file)}: neither a long table (key, step, value) nor the "
                    f"neptune-exporter's layout (columns: {shown_names})"
                )
    for run, rows in neptune.values():
        done = _finish_neptune(run, rows)
        outcome = write_run(engine, done, command, replace=replace)
        yield done, outcome, done.points(), len(done.series)


# -- long ---------------------------------------------------------------------------------------


def _long_types(schema, file: Path) -> None:
    """One line naming the first column whose type cannot hold what the layout puts there."""
    import pyarrow as pa

    def number(t) -> bool:
        return (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_boolean(t)
            or pa.types.is_decimal(t)
            or pa.types.is_null(t)
        )

    def textual(t) -> bool:
        if pa.types.is_dictionary(t):
            t = t.value_type
        return (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_integer(t)
            or pa.types.is_null(t)
            or str(t) == "string_view"
        )

    wants = {
        "key": (textual, "text"),
        "run": (textual, "text"),
        "uid": (textual, "text"),
        "step": (number, "integers"),
        "value": (number, "numbers"),
        "wall": (number, "Unix seconds"),
    }
    for name, (ok, what) in wants.items():
        if name in schema.names and not ok(schema.field(name).type):
            raise ImportError_(
                f"{shown(file)}: column {name!r} holds {schema.field(name).type} values, not "
                f"{what}: not imported (write {what} there)"
            )


_ROW = struct.Struct("<qdd?")  # step, wall (0.0 when the file has none), value, value is null


@dataclass
class _LongRun:
    """One run of a long file as it is written: where it stands against an earlier import."""

    run: ImportedRun
    outcome: str  # new, replaced, appended (so far: already), unknown
    run_id: int | None = None
    done_rows: int = 0  # rows of this run imported before (skipped, checked by the digest)
    done_digest: str = ""
    rows: int = 0  # rows of this run read so far
    points: int = 0  # points written
    wall_lo: float = math.inf
    wall_hi: float = -math.inf
    digest: Any = field(default_factory=lambda: hashlib.blake2b(digest_size=16))
    writer: RollupWriter | None = None
    staged: list[tuple] = field(default_factory=list)  # (key, step, wall, value) to write
    keys: set[str] = field(default_factory=set)  # keys given points


class LongFile:
    """The runs of one long file, written as its batches are read, in one transaction."""

    def __init__(
        self,
        engine: Engine,
        pf,
        file: Path,
        project: str | None,
        replace: bool,
        command: str,
        mtime: float,
    ) -> None:
        self.engine, self.pf, self.file = engine, pf, file
        self.default_wall = mtime  # for a file without a `wall` column
        self.where = shown(file)
        self.project, self.replace, self.command = project, replace, command
        self.runs: dict[Any, _LongRun] = {}
        self.key_ids: dict[str, int] = {}

    def write(self) -> list[Imported]:
        import pyarrow as pa

        names = self.pf.schema_arrow.names
        _long_types(self.pf.schema_arrow, self.file)
        columns = [c for c in ("key", "step", "value", "wall", "run", "uid") if c in names]
        row = 0
        with self.engine.begin() as conn:
            try:
                # One reader per row group: one over the whole file kept growing with it
                # (15 MB a million rows), the row groups' pages held (pyarrow 26).
                for group in range(self.pf.num_row_groups):
                    batches = self.pf.iter_batches(
                        batch_size=BATCH_ROWS, row_groups=[group], columns=columns
                    )
                    for batch in batches:
                        self._batch(conn, batch, row)
                        row += batch.num_rows
            except (pa.ArrowException, OSError) as exc:  # a corrupt page, a cut file
                # (the store's own errors go up as they are: they name the store, not the file)
                raise ImportError_(
                    f"{self.where}: cannot read it past row {row} ({exc}); nothing of it imported"
                ) from None
            for state in self.runs.values():
                self._finish(conn, state)
        return [(s.run, s.outcome, s.points, len(s.keys)) for s in self.runs.values()]

    def _batch(self, conn, batch, first_row: int) -> None:
        cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        keys, steps, values = cols["key"], cols["step"], cols["value"]
        walls = cols.get("wall")
        run_names = cols.get("run")
        uids = cols.get("uid") or run_names
        stem = self.file.stem
        touched: dict[int, _LongRun] = {}
        for i in range(len(keys)):
            ident = (
                (uids[i] if uids is not None else None)
                or (run_names[i] if run_names is not None else None)
                or stem
            )
            state = self.runs.get(ident)
            if state is None:
                name = (run_names[i] if run_names is not None else None) or stem
                state = self.runs[ident] = self._open(conn, ident, str(name))
            key, step, value = keys[i], steps[i], values[i]
            if key is None or step is None:
                raise ImportError_(f"{self.where}: row {first_row + i}: no key or step")
            step = _step(step, self.file, first_row + i)
            wall = walls[i] if walls is not None else None
            try:
                record = _ROW.pack(
                    step,
                    float(wall or 0.0),
                    math.nan if value is None else float(value),
                    value is None,
                )
            except (struct.error, OverflowError) as exc:
                raise ImportError_(
                    f"{self.where}: row {first_row + i}: a number out of range ({exc})"
                ) from None
            key = str(key)
            state.digest.update(record)
            state.digest.update(key.encode("utf-8", "surrogateescape") + b"\0")
            state.rows += 1
            if state.rows <= state.done_rows:
                if state.rows == state.done_rows:
                    self._check_prefix(state)
                continue
            if state.outcome == "unknown" or value is None:
                continue
            state.staged.append(
                (key, step, self.default_wall if wall is None else float(wall), float(value))
            )
            touched[id(state)] = state
        for state in touched.values():
            self._flush(conn, state)

    def _check_prefix(self, state: _LongRun) -> None:
        if state.digest.copy().hexdigest() != state.done_digest:
            raise ImportError_(
                f"{self.where}: run {state.run.name!r} was imported from this file before and "
                f"its first {state.done_rows:,} rows have changed since (the file was "
                "rewritten); nothing of the file imported (--replace imports it again whole)"
            )

    def _open(self, conn, ident: Any, name: str) -> _LongRun:
        run = ImportedRun(f"parquet:{self.file}#{ident}", self.project or "parquet", name)
        run.notes = f"imported from {self.where}"
        run.by_content = True
        found = conn.execute(
            select(runs.c.id, runs.c.heartbeat_at).where(runs.c.uid == run.uid)
        ).first()
        if found is not None and self.replace:
            conn.execute(runs.delete().where(runs.c.id == found.id))  # points &c. cascade
            return self._new(conn, run, "replaced")
        if found is not None:
            record = _parquet_record(conn, found.id)
            if record is None:
                return _LongRun(run, "unknown", found.id)
            state = _LongRun(run, "already", found.id, done_rows=record[0], done_digest=record[1])
            state.wall_hi = found.heartbeat_at if found.heartbeat_at is not None else -math.inf
            return state
        return self._new(conn, run, "new")

    def _new(self, conn, run: ImportedRun, outcome: str) -> _LongRun:
        now = time.time()
        row = {
            "uid": run.uid,
            "project": storable_text(run.project)[:200],
            "name": storable_text(run.name)[:200],
            "status": FINISHED,
            "created_at": now,
            "heartbeat_at": now,
            "ended_at": now,
            "host": "",
            "pid": None,
            "command": self.command,
            "config": "{}",
            "summary": "{}",
            "tags": "[]",
            "notes": storable_text(run.notes),
            "run_group": "",
            "job_type": "",
        }
        return _LongRun(run, outcome, insert_run(conn, row))

    def _flush(self, conn, state: _LongRun) -> None:
        """The staged points of `state`'s run into the store (and its rollups)."""
        per_key: dict[str, tuple[list, list, list]] = {}
        for key, step, wall, value in state.staged:
            s = per_key.get(key)
            if s is None:
                why = key_problem(key)
                if why:
                    state.run.bad_keys.setdefault(key, [why, 0])[1] += 1
                    continue
                s = per_key[key] = ([], [], [])
            s[0].append(step)
            s[1].append(wall)
            s[2].append(value)
        state.staged = []
        if not per_key:
            return
        missing = [k for k in per_key if k not in self.key_ids]
        if missing:
            self.key_ids.update(resolve_keys(conn, missing))
        rows: list[tuple] = []
        groups = []
        for key, (steps, walls, values) in per_key.items():
            kid = self.key_ids[key]
            state.keys.add(key)
            stored = [None if v != v else v for v in values]  # NaN is NULL (schema.store.tables)
            rows += zip(
                [state.run_id] * len(steps), [kid] * len(steps), steps, walls, stored, strict=True
            )
            groups.append((steps, walls, {kid: stored}))
            state.wall_lo = min(state.wall_lo, min(walls))
            state.wall_hi = max(state.wall_hi, max(walls))
        if state.writer is None:
            state.writer = RollupWriter(self.engine.dialect, state.run_id)
        # Accepted at once: the whole file is one transaction, and a failure drops the writer.
        state.writer.accept(state.writer.insert(conn, rows, groups))
        state.points += len(rows)
        if state.outcome == "already":
            state.outcome = "appended"

    def _finish(self, conn, state: _LongRun) -> None:
        if state.outcome == "unknown":
            return
        if state.rows < state.done_rows:
            raise ImportError_(
                f"{self.where}: run {state.run.name!r} had {state.done_rows:,} rows when it was "
                f"imported, the file now holds {state.rows:,} (it was rewritten); nothing of "
                "the file imported (--replace imports it again whole)"
            )
        if state.outcome == "already" and not state.run.bad_keys:
            return  # the same rows: nothing new
        values: dict[str, Any] = {}
        if state.outcome in ("new", "replaced"):
            lo = state.wall_lo if state.wall_lo != math.inf else self.default_wall
            hi = state.wall_hi if state.wall_hi != -math.inf else lo
            values = {"created_at": lo, "heartbeat_at": hi, "ended_at": hi}
        elif state.wall_hi != -math.inf:
            values = {"heartbeat_at": state.wall_hi, "ended_at": state.wall_hi}
        if values:
            conn.execute(runs.update().where(runs.c.id == state.run_id).values(**values))
        record = {"parquet": {"rows": state.rows, "digest": state.digest.hexdigest()}}
        title = f"imported {state.rows} rows of {self.where}"
        extra = [e for e in state.run._extra_events(time.time()) if e[2] != "import"]
        extra.append((time.time(), None, "import", "info", title, json.dumps(record)))
        insert_events(conn, self.engine, state.run_id, extra)


def _parquet_record(conn, run_id: int) -> tuple[int, str] | None:
    """(rows, digest) the last import of a long file recorded for run `run_id`, else None."""
    body = conn.execute(
        select(events.c.body)
        .where(events.c.run_id == run_id, events.c.kind == "import")
        .order_by(events.c.id.desc())
        .limit(1)
    ).scalar()
    try:
        found = json.loads(body or "{}")["parquet"]
        return int(found["rows"]), str(found["digest"])
    except (ValueError, KeyError, TypeError):
        return None


def _step(step: Any, file: Path, row: int) -> int:
    if isinstance(step, int):
        return step
    try:
        f = float(step)
    except (TypeError, ValueError):
        f = math.nan
    if not f.is_integer():
        raise ImportError_(f"{shown(file)}: row {row}: step {step!r} is not an integer")
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
    column = {
        "float": "float_value",
        "int": "int_value",
        "string": "string_value",
        "bool": "bool_value",
        "datetime": "datetime_value",
        "string_set": "string_set_value",
    }[kind]
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
