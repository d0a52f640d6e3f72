"""`reslog import tensorboard LOGDIR`: every scalar of every event file, with its step and wall
time; one run per folder holding `events.out.tfevents.*` files, named by the folder's path
under LOGDIR.

The TFRecord framing and the few protobuf messages involved (Event, Summary, Summary.Value,
TensorProto, SummaryMetadata, the hparams plugin's data) are parsed here with the stdlib: no
TensorFlow, no protobuf, and fast enough for millions of points (docs/benchmarks.md,
"Importers"). Scalars are `simple_value`s (what `SummaryWriter.add_scalar` writes) and 0-d
numeric tensors (`new_style=True`, tf.summary). Hyper-parameters (the hparams plugin's session
start info) become the config of the run that holds the curves: PyTorch's `add_hparams` writes
them into a timestamped session folder below the run's (read into the run: its one point a
metric too), Keras' HParams callback into the folder above its `train/` and `validation/` (given
to each), `hp.hparams` beside the scalars (`hparams_config`'s experiment definition, at the top,
is no run). Types as the file holds them: bool, string, and numbers (whole ones as int). Images,
histograms, audio, text and other non-scalar values are not stored: counted by tag and kind
(`RunState.skip`).

Incremental: `read_event_file` starts at a byte offset (where the last import stopped, checked
to be a record boundary) and returns where it stopped. The newest file of a folder may end in
a record still being written: it is left for the next import, not an error; a torn record
anywhere else is one.

Checks: only regular files are read (a FIFO named like an event file is refused by name). A
file must start with a valid TFRecord header (its length's masked CRC32C: "not a TensorBoard
event file" otherwise). Every record's two checksums are verified, its length's and its data's:
a record whose data fails is skipped (a flipped bit would otherwise import step 100 as 100.5),
one whose length fails is skipped up to the next offset where a record checks whole again; each
is counted on the run (`ImportedRun.corrupt`: file, byte offset, bytes skipped) and said once,
and the rest of the file is imported. A record that runs past the end of the file (a truncated
file) or checks but does not parse is an error naming the file and the byte offset.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from reslog.tools.importers import ImportError_, exists_as_file, read_regular, shown
from reslog.tools.importers.crc import masked_crc32c
from reslog.tools.importers.protobuf import (
    ProtobufError,
    fields,
    skip,
    span,
    text,
    varint,
    whole_key,
)
from reslog.tools.importers.runs import ImportedRun

EVENT_FILE = "tfevents"
_D = struct.Struct("<d").unpack_from
_F = struct.Struct("<f").unpack_from
_Q = struct.Struct("<Q").unpack_from
_I = struct.Struct("<I").unpack_from
DT_BF16 = 14  # DT_BFLOAT16: its 16 bits come in half_val only
# The TensorProto dtypes read as scalars, by number, with the struct format of a tensor_content
# holding one value (None: that dtype has no tensor_content form here).
_SCALAR_DTYPES: dict[int, str | None] = {
    1: "<f",  # DT_FLOAT
    2: "<d",  # DT_DOUBLE
    3: "<i",  # DT_INT32
    9: "<q",  # DT_INT64
    10: "<?",  # DT_BOOL
    19: "<e",  # DT_HALF (tensor_content or half_val)
    DT_BF16: None,
}
# Summary.Value's legacy non-scalar fields, by number, as TensorBoard's plugins name them.
_LEGACY = {3: "histograms", 4: "images", 5: "histograms", 6: "audio"}
HPARAMS_PLUGIN = "hparams"

# What a parse reports besides scalars: not_stored(tag, kind) for a value not stored,
# hparams(dict) for a session's hyper-parameters (not the experiment's definition).
Skip = Callable[[str, str], None]
HParams = Callable[[dict], None]


class _Bad(Exception):
    pass


def event_dirs(logdir: Path) -> list[tuple[Path, list[Path]]]:
    """(folder, its event files in name order, i.e. creation order) for every folder under
    `logdir` (itself included) holding event files."""
    if exists_as_file(logdir):  # a FIFO too: refused by name when it is read
        return [(logdir.parent, [logdir])]
    if not logdir.is_dir():
        raise ImportError_(f"{shown(logdir)}: no such folder")
    found: list[tuple[Path, list[Path]]] = []
    for folder, _dirs, files in sorted(os.walk(logdir)):
        names = sorted(f for f in files if EVENT_FILE in f and not f.endswith(".profile-empty"))
        if names:
            found.append((Path(folder), [Path(folder) / f for f in names]))
    return found


def folder_run(logdir: Path, folder: Path, project: str) -> ImportedRun:
    rel = folder.relative_to(logdir).as_posix() if folder != logdir else ""
    name = shown(rel or logdir.name)
    run = ImportedRun(source=f"tensorboard:{folder}", project=project, name=name)
    run.notes = f"imported from TensorBoard event files in {shown(folder)}"
    return run


def read_logdir(
    logdir: Path, project: str, offsets: Callable[[str], dict[str, int]] | None = None
) -> Iterator[ImportedRun]:
    """One run per event folder, read one at a time, each holding what its files hold past
    `offsets(uid)` (the byte offset per file name where the last import stopped; None: from
    the start), with `run.offsets` where this read stopped. Hyper-parameters go to the run that
    holds the curves: a folder holding hyper-parameters and no scalars (Keras) gives them to
    the runs in the folders below it (their own win) and is no run itself; a session folder
    that PyTorch's `add_hparams` writes below a folder of scalars (hyper-parameters and at most
    one point a metric) is read into that folder's run, its files' offsets under `child/file`.
    ImportError_ on bad input."""
    logdir = logdir.resolve()
    found = event_dirs(logdir)
    if exists_as_file(logdir):  # one event file: its run is named for its folder
        logdir = logdir.parent
    inherited: dict[Path, dict] = {}  # hparams of folders without scalars, for those below
    merged: set[Path] = set()  # add_hparams session folders read into their parent's run
    for folder, files in found:
        if folder in merged:
            continue
        run = folder_run(logdir, folder, project)
        done = offsets(run.uid) if offsets is not None else {}
        run.offsets = dict(done)
        _read_files(run, files, done)
        if run.series or any("/" not in name for name in done):  # a folder of scalars
            for child, child_files in found:
                if child.parent == folder and _read_session(run, child, child_files, done):
                    merged.add(child)
        above = [c for f, c in inherited.items() if folder.is_relative_to(f)]
        below = any(f != folder and f.is_relative_to(folder) for f, _ in found)
        if run.config and not run.series and not done and below:
            inherited[folder] = run.config
            continue
        for config in reversed(above):  # the nearest folder's first
            run.config = {**config, **run.config}
        if run.series or run.config or run.skipped or done:
            yield run


def _read_files(
    run: ImportedRun, files: list[Path], done: dict[str, int], prefix: str = ""
) -> None:
    for i, path in enumerate(files):
        name = prefix + path.name
        end, torn = read_event_file(path, run, done.get(name, 0), i == len(files) - 1)
        run.offsets[name] = end
        if torn:
            run.torn.append((path, torn))


def _read_session(run: ImportedRun, child: Path, files: list[Path], done: dict[str, int]) -> bool:
    """Read `child` into `run` when it is an `add_hparams` session folder (or was read into it
    before): hyper-parameters, and at most one point of each metric. False: left as it is."""
    prefix = child.name + "/"
    before = any(name.startswith(prefix) for name in done)
    probe = ImportedRun(source="", project=run.project, name="")
    _read_files(probe, files, done, prefix)
    if not before and not (probe.config and all(len(s[0]) <= 1 for s in probe.series.values())):
        return False
    run.config.update(probe.config)  # the session's (a later add_hparams wins)
    for key, (steps, walls, values) in probe.series.items():
        for point in zip(steps, walls, values, strict=True):
            run.add(key, *point)
    for what, n in probe.skipped.items():
        run.skipped[what] = run.skipped.get(what, 0) + n
    run.offsets.update(probe.offsets)
    run.torn += probe.torn
    return True


def read_event_file(
    path: Path, run: ImportedRun, start: int = 0, last: bool = True
) -> tuple[int, int]:
    """Add the file's scalars from byte `start` on to `run` (skipped values and hparams too);
    (the offset after the last whole record, the bytes of a record still being written after
    it). Only the newest file of a folder (`last`) may end in such a record."""
    data = read_regular(path)
    end = len(data)
    where = shown(path)
    if start > end:
        raise ImportError_(
            f"{where}: {end} bytes, shorter than the {start} already imported: the file was "
            "replaced (import with --replace to read the folder again)"
        )
    if end == start:
        return start, 0
    if end < start + 12 or masked_crc32c(data[start : start + 8]) != _I(data, start + 8)[0]:
        if start == 0:
            raise ImportError_(f"{where}: not a TensorBoard event file (bad TFRecord header)")
        if last and end < start + 12:
            return start, end - start
        raise ImportError_(
            f"{where}: no record starts at byte {start}, where the last import stopped: the "
            "file was rewritten (import with --replace to read the folder again)"
        )
    pos = start
    add = run.add

    try:
        while pos < end:
            if pos + 12 > end:
                if last:
                    return pos, end - pos
                raise ImportError_(f"{where}: truncated at byte {pos} (incomplete record header)")
            (length,) = _Q(data, pos)
            if masked_crc32c(data[pos : pos + 8]) != _I(data, pos + 8)[0]:
                found = next_record(data, pos + 1)  # the length is not to be trusted
                run.corrupt.append((where, pos, found - pos))
                pos = found
                continue
            begin = pos + 12
            stop = begin + length
            if stop + 4 > end:
                if last:
                    return pos, end - pos
                raise ImportError_(
                    f"{where}: truncated at byte {pos} (a {length}-byte record runs past the "
                    f"end of the {end}-byte file)"
                )
            if masked_crc32c(data[begin:stop]) != _I(data, stop)[0]:
                run.corrupt.append((where, pos, stop + 4 - pos))
            else:
                _event(data, begin, stop, add, run.skip, run.config.update)
            pos = stop + 4
    except (_Bad, ProtobufError, IndexError, struct.error) as exc:
        raise ImportError_(
            f"{where}: cannot parse the record at byte {pos} ({exc or 'bad protobuf'})"
        ) from None
    return pos, 0


def next_record(data: bytes, pos: int) -> int:
    """The first offset from `pos` on where a whole record checks (its length's and its data's
    CRC), else the end of `data`: where reading goes on after a corrupt length."""
    end = len(data)
    while pos + 16 <= end:
        if masked_crc32c(data[pos : pos + 8]) == _I(data, pos + 8)[0]:
            stop = pos + 12 + _Q(data, pos)[0]
            if stop + 4 <= end and masked_crc32c(data[pos + 12 : stop]) == _I(data, stop)[0]:
                return pos
        pos += 1
    return end


def read_event(record: bytes, add, not_stored: Skip, hparams: HParams) -> None:
    """One serialized Event (a TFRecord's payload): its scalars to `add(tag, step, wall,
    value)`, a session's hyper-parameters to `hparams(dict)`, other values to `not_stored(tag,
    kind)` (reslog.integrations.tensorboard feeds a live run this way)."""
    _event(record, 0, len(record), add, not_stored, hparams)


def _event(buf: bytes, pos: int, end: int, add, not_stored: Skip, hparams: HParams) -> None:
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
            summary = span(buf, pos)
            pos = summary[1]
        else:
            key, pos = whole_key(buf, pos, key)
            pos = skip(buf, pos, key & 7)
    if pos != end:
        raise _Bad("field runs past the record")
    if summary is not None:
        _summary(buf, summary[0], summary[1], wall, step, add, not_stored, hparams)


def _summary(
    buf: bytes, pos: int, end: int, wall: float, step: int, add, not_stored: Skip, hparams: HParams
) -> None:
    """Summary: repeated value = 1 (Summary.Value)."""
    while pos < end:
        key = buf[pos]
        pos += 1
        if key != 0x0A:
            pos = skip(buf, pos, key & 7) if key < 0x80 else skip(buf, *_rekey(buf, pos))
            continue
        n, pos = varint(buf, pos)
        _value(buf, pos, pos + n, wall, step, add, not_stored, hparams)
        pos += n


def _rekey(buf: bytes, pos: int) -> tuple[int, int]:
    key, pos = varint(buf, pos - 1)
    return pos, key & 7


def _value(
    buf: bytes, pos: int, end: int, wall: float, step: int, add, not_stored: Skip, hparams: HParams
) -> None:
    """Summary.Value: tag = 1, simple_value = 2 (float), tensor = 8, metadata = 9; the legacy
    image, histogram and audio fields are not scalars."""
    tag = None
    value = None
    kind = None  # what the value holds when it is not a scalar
    meta = None
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
            if value is None:
                kind = "tensor"
            pos += n
        elif key == 0x4A:
            meta = span(buf, pos)
            pos = meta[1]
        else:
            key, pos = whole_key(buf, pos, key)
            kind = _LEGACY.get(key >> 3, kind)
            pos = skip(buf, pos, key & 7)
    if tag is None:
        return
    if value is not None:
        add(tag, step, wall, value)
        return
    plugin, content = _plugin(buf, meta) if meta is not None else ("", None)
    if plugin == HPARAMS_PLUGIN and content is not None:
        found = hparams_of(buf[content[0] : content[1]])
        if found:
            hparams(found)
    elif kind is not None:
        not_stored(tag, plugin or kind)


def _plugin(buf: bytes, meta: tuple[int, int]) -> tuple[str, tuple[int, int] | None]:
    """SummaryMetadata: plugin_data = 1 (PluginData: plugin_name = 1, content = 2)."""
    name, content = "", None
    for f, w, v in fields(buf, *meta):
        if f == 1 and w == 2:
            for pf, pw, pv in fields(buf, *v):  # type: ignore[misc]
                if pf == 1 and pw == 2:
                    name = text(buf, pv)
                elif pf == 2 and pw == 2:
                    content = pv  # type: ignore[assignment]
    return name, content


def hparams_of(content: bytes) -> dict | None:
    """The hyper-parameters of an hparams plugin payload (HParamsPluginData: version = 1,
    session_start_info = 3: SessionStartInfo: hparams = 1, a map of string to
    google.protobuf.Value); None when it holds something else (the experiment's definition,
    a session's end)."""
    out: dict = {}
    found = False
    for f, w, v in fields(content):
        if f != 3 or w != 2:
            continue
        found = True
        for sf, sw, sv in fields(content, *v):  # type: ignore[misc]
            if sf == 1 and sw == 2:
                key, value = _map_entry(content, sv)  # type: ignore[arg-type]
                if key is not None:
                    out[key] = value
    return out if found else None


def _map_entry(buf: bytes, span: tuple[int, int]) -> tuple[str | None, object]:
    key, value = None, None
    for f, w, v in fields(buf, *span):
        if f == 1 and w == 2:
            key = text(buf, v)
        elif f == 2 and w == 2:
            value = _pb_value(buf, v)  # type: ignore[arg-type]
    return key, value


def _pb_value(buf: bytes, span: tuple[int, int]) -> object:
    """google.protobuf.Value: null = 1, number = 2 (double), string = 3, bool = 4, struct = 5,
    list = 6."""
    for f, w, v in fields(buf, *span):
        if f == 2 and w == 1:
            number = _D(v, 0)[0]  # type: ignore[arg-type]
            return int(number) if number.is_integer() and abs(number) < 2**53 else number
        if f == 3 and w == 2:
            return text(buf, v)
        if f == 4 and w == 0:
            return bool(v)
        if f == 6 and w == 2:
            return [_pb_value(buf, lv) for lf, lw, lv in fields(buf, *v) if lf == 1 and lw == 2]  # type: ignore[misc,arg-type]
    return None


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
        if key >= 0x80:  # inline: this loop reads every field of every tensor
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
            pos = _repeated(
                buf, pos, wire, 0, "", vals, signed=field != 13, half=field == 13, dtype=dtype
            )
        else:
            pos = skip(buf, pos, wire)
    if shaped:
        return None
    if content is not None:
        fmt = _SCALAR_DTYPES.get(dtype)
        if fmt is None or len(content) != struct.calcsize(fmt):
            return None
        return float(struct.unpack(fmt, content)[0])
    if len(vals) == 1 and dtype in _SCALAR_DTYPES:
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
