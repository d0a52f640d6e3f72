"""`reslog import wandb DIR`: wandb offline runs (`wandb/offline-run-*/run-<id>.wandb`): history,
config, summary, alerts and the exit status.

The `.wandb` file is LevelDB's log format (32 KiB blocks of CRC-framed chunks) after a 7-byte
":W&B" header, holding wandb's `Record` protobuf messages. Both are read here with the stdlib:
no wandb install is needed to import. Field numbers are those of wandb's
`wandb_internal.proto` (checked by the tests against files written by the real wandb).

History rows: numbers become points at the row's `_step` and `_timestamp`; bools 0/1; strings
become `text` events (as `log()` does); `None` and NaN as in the store; rich values (tables,
images, histograms: JSON objects with a `_type`) are counted and reported, not stored.
Nested keys join with "/". A truncated file (the process was killed) is an error naming the
file, unless `.wandb` ends exactly on a record boundary (a run still being written also does).

Every chunk's checksum is verified (wandb's writers, the Python datastore and wandb-core, put
`zlib.crc32` of the chunk's type byte and data where LevelDB puts a masked CRC32C): a chunk that
fails is skipped up to the next offset in its 32 KiB block where a chunk checks (its length is
not to be trusted; the next block starts a chunk afresh, as LevelDB's reader knows), and so is
a record missing its first or last chunk; each is counted on the run (`ImportedRun.corrupt`)
and said once, and the rest of the file is imported. Only regular files are read (a FIFO
named `run-x.wandb` is refused by name).
"""

from __future__ import annotations

import json
import math
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reslog.tools.importers import ImportError_, exists_as_file, read_regular, shown
from reslog.tools.importers.protobuf import ProtobufError, fields, signed, text
from reslog.tools.importers.runs import ImportedRun
from schema.store.status import CRASHED, FAILED

HEADER = b":W&B"
BLOCK = 32768
CHUNK_HEADER = 7  # crc32c (4), length (2), type (1)
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
# wandb_internal.proto
R_HISTORY, R_SUMMARY, R_CONFIG, R_ALERT, R_RUN, R_EXIT = 2, 3, 5, 10, 17, 18
ALERT_LEVELS = {"INFO": "info", "WARN": "warning", "ERROR": "error"}


def run_dirs(path: Path) -> list[Path]:
    """`.wandb` files under `path`: a wandb/ folder, one run folder, or the file itself."""
    if exists_as_file(path):  # a FIFO too: refused by name when it is read
        return [path]
    if not path.is_dir():
        raise ImportError_(f"{shown(path)}: no such folder")
    return sorted(path.glob("**/run-*.wandb"))


def read_wandb_dir(path: Path, project: str | None) -> Iterator[ImportedRun]:
    for file in run_dirs(path.resolve()):
        yield read_wandb_file(file, project)


# The checksum of a chunk of each type starts from the CRC of its type byte.
_TYPE_CRC = {kind: zlib.crc32(bytes([kind])) for kind in (FULL, FIRST, MIDDLE, LAST)}


def records(path: Path, corrupt: list[tuple[str, int, int]] | None = None) -> Iterator[bytes]:
    """The records of a `.wandb` file; chunks failing their checksum (and records missing a
    chunk) are skipped and added to `corrupt` as (file, byte offset, bytes skipped)."""
    data = read_regular(path)
    where = shown(path)
    if len(data) < 7 or data[:4] != HEADER:
        raise ImportError_(f"{where}: not a wandb run file (no :W&B header)")
    pos, end = 7, len(data)
    parts: list[bytes] = []
    began = pos  # where the record being assembled started

    def skipped(at: int, size: int) -> None:
        if corrupt is None:
            raise ImportError_(f"{where}: corrupt chunk at byte {at} (checksum mismatch)")
        if corrupt and corrupt[-1][0] == where and sum(corrupt[-1][1:]) == at:
            corrupt[-1] = (where, corrupt[-1][1], corrupt[-1][2] + size)  # one stretch
        else:
            corrupt.append((where, at, size))

    while pos < end:
        left = BLOCK - pos % BLOCK
        if left < CHUNK_HEADER:  # block trailer: zero padding
            pos += left
            continue
        if pos + CHUNK_HEADER > end:
            raise ImportError_(f"{where}: truncated at byte {pos} (incomplete chunk header)")
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0 and length == 0:  # zero padding up to the block end (a preallocated tail)
            pos += left
            continue
        start = pos + CHUNK_HEADER
        if start + length > end and kind in _TYPE_CRC and length <= left - CHUNK_HEADER:
            raise ImportError_(
                f"{where}: truncated at byte {pos} (a {length}-byte chunk runs past the end "
                f"of the {end}-byte file)"
            )
        chunk = data[start : start + length]
        if (
            kind not in _TYPE_CRC
            or length > left - CHUNK_HEADER
            or zlib.crc32(chunk, _TYPE_CRC[kind]) != crc
        ):
            if parts:  # the record being assembled loses a chunk: all of it goes
                skipped(began, pos - began)
                parts = []
            found = _next_chunk(data, pos + 1, min(pos + left, end))
            skipped(pos, found - pos)
            pos = found
            continue
        if kind in (FULL, FIRST):
            if parts:  # a record whose last chunk never came
                skipped(began, pos - began)
                parts = []
            began = pos
        elif not parts:  # MIDDLE or LAST without the FIRST (lost to corruption)
            skipped(pos, start + length - pos)
            pos = start + length
            continue
        parts.append(chunk)
        pos = start + length
        if kind in (FULL, LAST):
            yield b"".join(parts)
            parts = []
    if parts:
        raise ImportError_(f"{where}: truncated (the last record is incomplete)")


def _chunk_checks(data: bytes, pos: int, stop: int) -> bool:
    crc, length, kind = struct.unpack_from("<IHB", data, pos)
    start = pos + CHUNK_HEADER
    return (
        kind in _TYPE_CRC
        and start + length <= stop
        and zlib.crc32(data[start : start + length], _TYPE_CRC[kind]) == crc
    )


def _next_chunk(data: bytes, pos: int, block_end: int) -> int:
    """The first offset from `pos` on, in this block, where a chunk checks, else the block's
    end (the next block starts a chunk afresh): the length of a chunk that failed is not to be
    trusted."""
    while pos + CHUNK_HEADER <= block_end:
        if _chunk_checks(data, pos, block_end):
            return pos
        pos += 1
    return block_end


def _items(buf: bytes, span: tuple[int, int], number: int = 1) -> Iterator[tuple[str, Any]]:
    """(key, value) of the HistoryItem/ConfigItem/SummaryItem fields `number` of a message."""
    for f, _w, v in fields(buf, *span):
        if f == number:
            yield _item(buf, v)  # type: ignore[arg-type]


_MISSING = object()


def _item(buf: bytes, span: tuple[int, int]) -> tuple[str, Any]:
    key = ""
    nested: list[str] = []
    value: Any = _MISSING
    for f, w, v in fields(buf, *span):
        if f == 1:
            key = text(buf, v)
        elif f == 2:
            nested.append(text(buf, v))
        elif f == 16 or f in (7, 8):  # value_json; text; json
            raw = text(buf, v)
            value = raw if f == 7 else _json(raw)
        elif f == 3:
            value = None
        elif f == 4:
            value = bool(v)
        elif f == 5:
            value = (v >> 1) ^ -(v & 1)  # type: ignore[operator]
        elif f == 6 and w == 1:
            value = struct.unpack("<d", v)[0]  # type: ignore[arg-type]
    name = "/".join(nested) if nested else key
    return name, (None if value is _MISSING else value)


def _json(raw: str) -> Any:
    try:
        return json.loads(raw)  # NaN, Infinity are accepted by json.loads
    except ValueError:
        return raw


def read_wandb_file(path: Path, project: str | None) -> ImportedRun:
    run_id = shown(path.stem.removeprefix("run-"))
    run = ImportedRun(source=f"wandb:{path}", project=project or "wandb", name=run_id)
    run.notes = f"imported from wandb offline run {shown(path.parent)}"
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    exit_code = None
    start_time = None
    try:
        for rec in records(path, run.corrupt):
            for f, _w, v in fields(rec):
                if f == R_HISTORY:
                    _history(rec, v, run)  # type: ignore[arg-type]
                elif f == R_RUN:
                    start_time = _run_record(rec, v, run, config, summary, project)  # type: ignore[arg-type]
                elif f == R_CONFIG:
                    config.update(_items(rec, v))  # type: ignore[arg-type]
                elif f == R_SUMMARY:
                    summary.update(_items(rec, v))  # type: ignore[arg-type]
                elif f == R_ALERT:
                    run.events.append(_alert(rec, v))  # type: ignore[arg-type]
                elif f == R_EXIT:
                    exit_code = 0
                    for ef, _ew, ev in fields(rec, *v):  # type: ignore[misc]
                        if ef == 1:
                            exit_code = signed(ev)  # type: ignore[arg-type]
    except (ProtobufError, IndexError, struct.error) as exc:
        raise ImportError_(f"{shown(path)}: cannot parse a record ({exc})") from None
    run.config = {k: v for k, v in config.items() if not k.startswith("_wandb")}
    rich = _rich(summary)
    run.summary = {
        k: v
        for k, v in summary.items()
        if not k.startswith("_") and k.rpartition("/")[0] not in rich
    }
    if start_time is not None:
        run.created_at = start_time
    if exit_code is None:
        run.status = CRASHED  # no exit record: the process died or is still running
        run.events.append(
            (
                run.created_at or 0.0,
                None,
                "note",
                "warning",
                "no exit record in the wandb file",
                "the run never finished (killed, crashed or still running) when it was imported",
            )
        )
    elif exit_code != 0:
        run.status = FAILED
    return run


def _run_record(buf, span, run: ImportedRun, config, summary, project) -> float | None:
    start = None
    for f, _w, v in fields(buf, *span):
        if f == 1 and run.name == "":
            run.name = text(buf, v)
        elif f == 3 and project is None:
            run.project = text(buf, v)
        elif f == 4:
            config.update(_items(buf, v))
        elif f == 5:
            summary.update(_items(buf, v))
        elif f == 6:
            run.group = text(buf, v)
        elif f == 7:
            run.job_type = text(buf, v)
        elif f == 8:
            run.name = text(buf, v) or run.name
        elif f == 9:
            run.notes = text(buf, v)
        elif f == 10:
            run.tags.append(text(buf, v))
        elif f == 13:
            run.host = text(buf, v)
        elif f == 17:
            secs = nanos = 0
            for tf, _tw, tv in fields(buf, *v):
                if tf == 1:
                    secs = signed(tv)
                elif tf == 2:
                    nanos = tv
            start = secs + nanos / 1e9
    return start


def _alert(buf, span) -> tuple:
    title = body = ""
    level = "warning"
    for f, _w, v in fields(buf, *span):
        if f == 1:
            title = text(buf, v)
        elif f == 2:
            body = text(buf, v)
        elif f == 3:
            level = ALERT_LEVELS.get(text(buf, v).upper(), "warning")
    return (0.0, None, "alert", level, title, body)


def _history(buf: bytes, span: tuple[int, int], run: ImportedRun) -> None:
    row = dict(_items(buf, span))
    step = row.pop("_step", None)
    wall = row.pop("_timestamp", None)
    row.pop("_runtime", None)
    if not isinstance(step, int) or isinstance(step, bool):
        for f, _w, v in fields(buf, *span):
            if f == 2:  # HistoryStep
                step = next((signed(sv) for sf, _sw, sv in fields(buf, *v) if sf == 1), 0)  # type: ignore[misc,arg-type]
        step = step if isinstance(step, int) else 0
    wall = float(wall) if isinstance(wall, (int, float)) else run.created_at or 0.0
    rich = _rich(row)
    for key in rich:
        run.skip(key, str(row.get(f"{key}/_type") or "rich value"))
    for key, value in row.items():
        if key.startswith("_wandb") or key.rpartition("/")[0] in rich:
            continue
        if isinstance(value, bool):
            run.add(key, step, wall, float(value))
        elif isinstance(value, (int, float)):
            run.add(key, step, wall, _float(value))
        elif isinstance(value, str):
            run.events.append((wall, step, "text", "info", key, value))
        elif value is not None:
            run.skip(key, type(value).__name__)


def _rich(row: dict[str, Any]) -> set[str]:
    """Keys of rich values (a histogram, an image, a table): wandb writes them as nested items
    under the key, one of them `_type`."""
    return {k.rpartition("/")[0] for k in row if k.endswith("/_type")}


def _float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
