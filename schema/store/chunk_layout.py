"""A chunk's blob as it lies: the header, the directory, the streams and their CRC-32s, in
format versions 2 and 1 (what schema/store/chunk_codec.py's streams are packed into and read from).

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive beside
schema/store/chunk_codec.py, which holds the streams' kinds, their encoders and decoders, and
re-exports every public name of this module (`schema.store.chunk_codec.pack`, `.unpack`, ... stay
as they were).

Layout, version 2 (integers little-endian):

    offset  size  field
    0       1     format version (FORMAT_VERSION)
    1       1     k, the number of value columns (1-255)
    2       1     flags: bit 0 (HAS_IDS) an ids stream follows the walls; other bits are 0
    3       4     n, the number of points (u32)
    7       9 s   the directory, one entry a stream (s = k + 2, + 1 with ids), in the order
                    steps, walls, ids (where flagged), values 1..k: kind (u8), payload
                    length (u32), CRC-32 (zlib.crc32) of the payload (u32)
    7+9s    4     CRC-32 of every byte before it (header and directory)
    11+9s   ...   the payloads, back to back in the directory's order; the blob ends with
                    the last one

so a reader of one column reads 11 + 9s bytes, then only the payloads it decodes (the steps,
the walls, the ids and that column: SQLite's incremental blob I/O, schema/store/chunk_read.py), and
verifies exactly what it decodes. Every byte is under a CRC: a flipped bit is an error, never
a number. `unpack` (what `reslog check` runs) verifies every CRC.

Version 1 (chunks written before 2026-11-28, still read): the header as above, then each
stream as kind (u8), payload length (u32), payload, then one CRC-32 of every byte before it:
a reader of one column read and verified the whole blob.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

try:
    # zlib-ng's inflate and CRC-32 where it is installed (reslog's `analysis` and `gui`
    # extras): the same bytes and the same CRC as zlib's, read 2-3x and 4x quicker (a scan()
    # of a key spends half its time inflating; docs/store.md, "Reading one key"). Deflate stays
    # zlib's: its bytes are the format's reference, and zlib-ng's differ.
    from zlib_ng import zlib_ng as _reading_zlib
except ImportError:  # the agent, Python 3.8, a host without it: the standard library's
    _reading_zlib = zlib

FORMAT_VERSION = 2
VERSIONS = (1, 2)  # what this reader reads
MAX_COLUMNS = 255
MAX_POINTS = (1 << 32) - 1

HEADER = struct.Struct("<BBBI")
HAS_IDS = 1  # the header's flags: bit 0, an ids stream follows the walls
STREAM = struct.Struct("<BI")  # version 1: a stream's kind and payload length
ENTRY = struct.Struct("<BII")  # version 2: a directory entry, kind, length and CRC-32
CRC = struct.Struct("<I")


class Streams(NamedTuple):
    """A blob cut into its (kind, payload) streams, not yet decoded; `values` holds the value
    columns asked for (all of them from `unpack`)."""

    n: int
    steps: tuple
    walls: tuple
    ids: tuple | None
    values: list
    version: int = FORMAT_VERSION


def crc32(data) -> int:
    """zlib.crc32, through zlib-ng where it imports (the same value)."""
    return _reading_zlib.crc32(data)


def check_shape(n: int, k: int) -> None:
    if not 1 <= k <= MAX_COLUMNS:
        raise ValueError(f"a chunk holds 1 to {MAX_COLUMNS} value columns, not {k}")
    if n > MAX_POINTS:
        raise ValueError(f"a chunk holds at most {MAX_POINTS} points, not {n}")


def pack(
    n: int,
    steps: tuple,
    walls: tuple,
    ids: tuple | None,
    values: list,
    version: int = FORMAT_VERSION,
) -> bytes:
    """The blob of n points from its (kind, payload) streams; `version` 1 only for tests of
    the chunks written before version 2."""
    check_shape(n, len(values))
    head = HEADER.pack(version, len(values), 0 if ids is None else HAS_IDS, n)
    streams = [steps, walls] + ([] if ids is None else [ids]) + values
    if version == 1:
        parts = [head]
        for kind, payload in streams:
            parts.append(STREAM.pack(kind, len(payload)))
            parts.append(payload)
        body = b"".join(parts)
        return body + CRC.pack(crc32(body))
    if version != 2:
        raise ValueError(f"no chunk format version {version}")
    parts = [head]
    for kind, payload in streams:
        parts.append(ENTRY.pack(kind, len(payload), crc32(payload)))
    directory = b"".join(parts)
    return b"".join([directory, CRC.pack(crc32(directory))] + [p for _k, p in streams])


def _check_header(version: int, k: int, flags: int) -> None:
    if version not in VERSIONS:
        raise ValueError(
            f"chunk format version {version} is unknown to this reader (it reads versions"
            f" {VERSIONS[0]}-{VERSIONS[-1]}): upgrade reslog to read this store"
        )
    if k == 0:
        raise ValueError("corrupt chunk: no value column")
    if flags & ~HAS_IDS:
        raise ValueError(f"corrupt chunk: unknown flags {flags:#x}")


def _stream_name(i: int, has_ids: bool) -> str:
    if i < 2:
        return ("steps", "walls")[i]
    if has_ids and i == 2:
        return "ids"
    return f"value column {i - 1 - has_ids}"


class Directory(NamedTuple):
    """A version 2 blob's header and directory, its CRC checked: where each stream lies."""

    n: int
    k: int
    has_ids: bool
    entries: list  # (kind, offset, length, crc) a stream, in the blob's order


def directory_size(head: bytes) -> int:
    """The bytes of header and directory (and their CRC) of a version 2 blob, from its first
    HEADER.size bytes."""
    version, k, flags, _n = HEADER.unpack_from(head)
    _check_header(version, k, flags)
    return HEADER.size + ENTRY.size * (k + 2 + (flags & HAS_IDS)) + CRC.size


def read_directory(head, total: int) -> Directory:
    """A version 2 blob's directory from its first directory_size() bytes; `total`: the blob's
    length, which the streams must fill exactly."""
    size = directory_size(head)
    if len(head) < size:
        raise ValueError(f"corrupt chunk: {total} bytes is too short for its directory")
    (crc,) = CRC.unpack_from(head, size - CRC.size)
    if crc32(memoryview(head)[: size - CRC.size]) != crc:
        raise ValueError("corrupt chunk: its CRC-32 does not match its bytes (its directory)")
    _version, k, flags, n = HEADER.unpack_from(head)
    # One C loop over the entries (a 100-key keyset's directory is 103 of them, parsed for
    # every key a scan reads), each stream's offset the sum of the lengths before it.
    raw = list(ENTRY.iter_unpack(memoryview(head)[HEADER.size : size - CRC.size]))
    starts = list(accumulate([e[1] for e in raw], initial=size))
    at = starts.pop()
    entries = [(e[0], start, e[1], e[2]) for e, start in zip(raw, starts)]
    if at != total:
        raise ValueError(f"corrupt chunk: its streams end at byte {at}, the blob at {total}")
    return Directory(n, k, bool(flags & HAS_IDS), entries)


def verified(payload, entry: tuple, i: int, has_ids: bool):
    """A version 2 stream's payload, its CRC-32 checked."""
    if len(payload) != entry[2]:
        raise ValueError(f"corrupt chunk: its {_stream_name(i, has_ids)} stream is cut short")
    if crc32(payload) != entry[3]:
        raise ValueError(
            "corrupt chunk: its CRC-32 does not match its bytes"
            f" (its {_stream_name(i, has_ids)} stream)"
        )
    return payload


def read_streams(read_at, total: int, columns: Sequence[int] | None = None) -> Streams:
    """The streams of a blob read piece by piece: `read_at(offset, size)` gives those bytes
    (a slice of the blob in memory, or of SQLite's incremental blob I/O), `total` is its
    length. Reads and verifies the steps, walls, ids and the value columns `columns` (None:
    all) of a version 2 blob and nothing else; a version 1 blob is read whole and its one CRC
    checked."""
    if total < HEADER.size + CRC.size:
        raise ValueError(f"corrupt chunk: {total} bytes is too short for a chunk")
    head = read_at(0, HEADER.size)
    if head[0] == 1:
        s = unpack(read_at(0, total))
        picked = picked_columns(len(s.values), columns)
        return s._replace(values=[s.values[i] for i in picked])
    size = directory_size(head)
    if size > total:
        raise ValueError(f"corrupt chunk: {total} bytes is too short for its directory")
    d = read_directory(read_at(0, size), total)
    picked = picked_columns(d.k, columns)
    first = 2 + d.has_ids

    def stream(i: int) -> tuple:
        e = d.entries[i]
        return e[0], verified(read_at(e[1], e[2]), e, i, d.has_ids)

    return Streams(
        d.n,
        stream(0),
        stream(1),
        stream(2) if d.has_ids else None,
        [stream(first + i) for i in picked],
        2,
    )


def unpack(blob) -> Streams:
    """A blob's streams, its version, flags, lengths and every CRC checked."""
    if len(blob) < HEADER.size + CRC.size:
        raise ValueError(f"corrupt chunk: {len(blob)} bytes is too short for a chunk")
    version, k, flags, n = HEADER.unpack_from(blob)
    _check_header(version, k, flags)
    if version == 2:
        view = memoryview(blob)
        return read_streams(lambda at, size: view[at : at + size], len(blob))
    blob = bytes(blob)
    (crc,) = CRC.unpack_from(blob, len(blob) - CRC.size)
    if crc32(memoryview(blob)[: -CRC.size]) != crc:
        raise ValueError("corrupt chunk: its CRC-32 does not match its bytes")
    streams, at, end = [], HEADER.size, len(blob) - CRC.size
    for _ in range(k + 2 + (flags & HAS_IDS)):
        if at + STREAM.size > end:
            raise ValueError("corrupt chunk: it ends inside its streams")
        kind, size = STREAM.unpack_from(blob, at)
        at += STREAM.size
        if at + size > end:
            raise ValueError("corrupt chunk: a stream runs past its end")
        streams.append((kind, blob[at : at + size]))
        at += size
    if at != end:
        raise ValueError(f"corrupt chunk: {end - at} bytes after its last stream")
    ids = streams.pop(2) if flags & HAS_IDS else None
    return Streams(n, streams[0], streams[1], ids, streams[2:], 1)


def picked_columns(k: int, columns: Sequence[int] | None) -> Sequence[int]:
    picked = range(k) if columns is None else columns
    for i in picked:
        if not 0 <= i < k:
            raise ValueError(f"the chunk has {k} value columns, not a column {i}")
    return picked


def picked_streams(blob, columns: Sequence[int] | None = None) -> Streams:
    """The streams `decode` reads (steps, walls, ids and the value columns `columns`, None:
    all), verified: in a version 2 blob each stream's CRC, the others' bytes are not read; in
    a version 1 blob the whole blob's."""
    view = memoryview(blob)
    return read_streams(lambda at, size: view[at : at + size], len(view), columns)
