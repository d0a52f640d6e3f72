"""`reslog import tensorboard LOGDIR`: every scalar of every event file, with its step and wall
time; one run per folder holding `events.out.tfevents.*` files, named by the folder's path
under LOGDIR.

The TFRecord framing and the few protobuf messages involved (Event, Summary, Summary.Value,
TensorProto) are parsed here with the stdlib: no TensorFlow, no protobuf, and fast enough for
millions of points (docs/benchmarks.md, "Importers"). Scalars are `simple_value`s (what
`SummaryWriter.add_scalar` writes) and 0-d numeric tensors (`new_style=True`, tf.summary);
images, histograms, text and other non-scalar values are counted and reported, not stored.

Checks: a file must start with a valid TFRecord header (length CRC32C verified on the first
record: "not a TensorBoard event file" otherwise); a record that runs past the end of the file
(a truncated file) or does not parse is an error naming the file and the byte offset. The CRCs
of the other records are not verified: a pure-Python CRC32C would cost more than the import.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from reslog.tools.importers import ImportError_
from reslog.tools.importers.protobuf import ProtobufError, skip, varint
from reslog.tools.importers.runs import ImportedRun

EVENT_FILE = "tfevents"
_D = struct.Struct("<d").unpack_from
_F = struct.Struct("<f").unpack_from
_Q = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I").unpack_from
# TensorProto dtypes read as scalars: DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL, DT_HALF
# (half: tensor_content or half_val), DT_BFLOAT16 (half_val).
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL, DT_HALF, DT_BF16 = 1, 2, 3, 9, 10, 19, 14
_CONTENT = {DT_FLOAT: "<f", DT_DOUBLE: "<d", DT_INT32: "<i", DT_INT64: "<q", DT_BOOL: "<?",
            DT_HALF: "<e"}  # fmt: skip


class _Bad(Exception):
    pass


def event_dirs(logdir: Path) -> list[tuple[Path, list[Path]]]:
    """(folder, its event files in name order, i.e. creation order) for every folder under
    `logdir` (itself included) holding event files."""
    if logdir.is_file():
        return [(logdir.parent, [logdir])]
    if not logdir.is_dir():
        raise ImportError_(f"{logdir}: no such folder")
    found: list[tuple[Path, list[Path]]] = []
    for folder, _dirs, files in sorted(os.walk(logdir)):
        names = sorted(f for f in files if EVENT_FILE in f and not f.endswith(".profile-empty"))
        if names:
            found.append((Path(folder), [Path(folder) / f for f in names]))
    return found


def read_logdir(logdir: Path, project: str) -> Iterator[tuple[ImportedRun, int]]:
    """(run, values skipped as non-scalar) per event folder; ImportError_ on bad input."""
    logdir = logdir.resolve()
    for folder, files in event_dirs(logdir):
        rel = folder.relative_to(logdir).as_posix() if folder != logdir else ""
        name = rel or logdir.name
        run = ImportedRun(source=f"tensorboard:{folder}", project=project, name=name)
        run.notes = f"imported from TensorBoard event files in {folder}"
        skipped = 0
        for path in files:
            skipped += read_event_file(path, run)
        yield run, skipped


def read_event_file(path: Path, run: ImportedRun) -> int:
    """Add the file's scalars to `run`; the number of non-scalar values skipped."""
    data = path.read_bytes()
    if not data:
        return 0
    end = len(data)
    if end < 12 or _masked_crc32c(data[:8]) != _I(data, 8)[0]:
        raise ImportError_(f"{path}: not a TensorBoard event file (bad TFRecord header)")
    pos = 0
    skipped = 0
    add = run.add
    try:
        while pos < end:
            if pos + 12 > end:
                raise ImportError_(f"{path}: truncated at byte {pos} (incomplete record header)")
            (length,) = _Q(data, pos)
            start = pos + 12
            stop = start + length
            if stop + 4 > end:
                raise ImportError_(
                    f"{path}: truncated at byte {pos} (a {length}-byte record runs past the "
                    f"end of the {end}-byte file)"
                )
            skipped += _event(data, start, stop, add)
            pos = stop + 4
    except (_Bad, ProtobufError, IndexError, struct.error) as exc:
        raise ImportError_(
            f"{path}: cannot parse the record at byte {pos} ({exc or 'bad protobuf'})"
        ) from None
    return skipped


def _event(buf: bytes, pos: int, end: int, add) -> int:
    """Event: wall_time = 1 (double), step = 2 (int64), summary = 5 (Summary)."""
    wall = 0.0
    step = 0
    summary = None
    while pos < end:
        key = buf[pos]
        pos += 1
        if key == 0x09:
            wall = _D(buf, pos)[0]
            pos += 8
        elif key == 0x10:
            step, pos = varint(buf, pos)
            if step >= 1 << 63:
                step -= 1 << 64
        elif key == 0x2A:
            n, pos = varint(buf, pos)
            summary = (pos, pos + n)
            pos += n
        else:
            if key >= 0x80:
                key, pos = varint(buf, pos - 1)
            pos = skip(buf, pos, key & 7)
    if pos != end:
        raise _Bad("field runs past the record")
    if summary is None:
        return 0
    return _summary(buf, summary[0], summary[1], wall, step, add)


def _summary(buf: bytes, pos: int, end: int, wall: float, step: int, add) -> int:
    """Summary: repeated value = 1 (Summary.Value)."""
    skipped = 0
    while pos < end:
        key = buf[pos]
        pos += 1
        if key != 0x0A:
            pos = skip(buf, pos, key & 7) if key < 0x80 else skip(buf, *_rekey(buf, pos))
            continue
        n, pos = varint(buf, pos)
        if not _value(buf, pos, pos + n, wall, step, add):
            skipped += 1
        pos += n
    return skipped


def _rekey(buf: bytes, pos: int) -> tuple[int, int]:
    key, pos = varint(buf, pos - 1)
    return pos, key & 7


def _value(buf: bytes, pos: int, end: int, wall: float, step: int, add) -> bool:
    """Summary.Value: tag = 1, simple_value = 2 (float), tensor = 8; others are not scalars.
    True when a scalar was added (or the value carried metadata only)."""
    tag = None
    value = None
    other = False
    while pos < end:
        key = buf[pos]
        pos += 1
        if key == 0x0A:
            n, pos = varint(buf, pos)
            tag = buf[pos : pos + n].decode("utf-8", "backslashreplace")
            pos += n
        elif key == 0x15:
            value = _F(buf, pos)[0]
            pos += 4
        elif key == 0x42:
            n, pos = varint(buf, pos)
            value = _tensor(buf, pos, pos + n)
            other = value is None
            pos += n
        else:
            if key >= 0x80:
                key, pos = varint(buf, pos - 1)
            other = other or (key >> 3) in (3, 4, 5, 6)  # histo, image, audio
            pos = skip(buf, pos, key & 7)
    if tag is None or value is None:
        return not other
    add(tag, step, wall, value)
    return True


def _tensor(buf: bytes, pos: int, end: int) -> float | None:
    """A 0-d numeric TensorProto's value, else None. dtype = 1, tensor_shape = 2,
    tensor_content = 4, half_val = 13, float_val = 5, double_val = 6, int_val = 7,
    int64_val = 10, bool_val = 11 (packed or not)."""
    dtype = 0
    shaped = False
    content = None
    vals: list[float] = []
    while pos < end:
        key = buf[pos]
        pos += 1
        field, wire = key >> 3, key & 7
        if key >= 0x80:
            key, pos = varint(buf, pos - 1)
            field, wire = key >> 3, key & 7
        if field == 1 and wire == 0:
            dtype, pos = varint(buf, pos)
        elif field == 2 and wire == 2:
            n, pos = varint(buf, pos)
            shaped = n > 0  # TensorShapeProto with dims: not a scalar
            pos += n
        elif field == 4 and wire == 2:
            n, pos = varint(buf, pos)
            content = buf[pos : pos + n]
            pos += n
        elif field == 5:
            pos = _repeated(buf, pos, wire, 5, "<f", vals)
        elif field == 6:
            pos = _repeated(buf, pos, wire, 1, "<d", vals)
        elif field in (7, 10, 11, 13):
            pos = _repeated(buf, pos, wire, 0, "", vals, signed=field != 13, half=field == 13,
                            dtype=dtype)  # fmt: skip
        else:
            pos = skip(buf, pos, wire)
    if shaped:
        return None
    if content is not None:
        fmt = _CONTENT.get(dtype)
        if fmt is None or len(content) != struct.calcsize(fmt):
            return None
        return float(struct.unpack(fmt, content)[0])
    if len(vals) == 1 and dtype in (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL, DT_HALF,
                                    DT_BF16):  # fmt: skip
        return vals[0]
    return None


def _repeated(buf, pos, wire, fixed_wire, fmt, out, signed=True, half=False, dtype=0) -> int:
    if wire == 2:  # packed
        n, pos = varint(buf, pos)
        stop = pos + n
        if fmt:
            out.extend(float(v) for (v,) in struct.iter_unpack(fmt, buf[pos:stop]))
            return stop
        while pos < stop:
            v, pos = varint(buf, pos)
            out.append(_int_value(v, signed, half, dtype))
        return stop
    if wire == fixed_wire and fmt:
        size = struct.calcsize(fmt)
        out.append(float(struct.unpack_from(fmt, buf, pos)[0]))
        return pos + size
    if wire == 0 and not fmt:
        v, pos = varint(buf, pos)
        out.append(_int_value(v, signed, half, dtype))
        return pos
    return skip(buf, pos, wire)


def _int_value(v: int, signed: bool, half: bool, dtype: int) -> float:
    if half:  # half_val holds the 16 bits of a half or a bfloat16
        if dtype == DT_BF16:
            return struct.unpack("<f", struct.pack("<I", (v & 0xFFFF) << 16))[0]
        return struct.unpack("<e", struct.pack("<H", v & 0xFFFF))[0]
    if signed and v >= 1 << 63:
        v -= 1 << 64
    return float(v)


# -- CRC32C (Castagnoli), masked as TFRecord does; used for the first header only --------------


def _crc_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
