"""Just enough of the protobuf wire format to read the few messages the importers need, with
the stdlib (no protobuf package, no generated code)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

_D = struct.Struct("<d").unpack_from


class ProtobufError(ValueError):
    pass


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 10 bytes")


def span(buf: bytes, pos: int) -> tuple[int, int]:
    """(start, stop) of the length-delimited field whose length is at `pos`."""
    n, pos = varint(buf, pos)
    return pos, pos + n


def whole_key(buf: bytes, pos: int, key: int) -> tuple[int, int]:
    """(key, position after it) of a field key whose first byte, `key`, was read before `pos`:
    a key over one byte (field numbers from 16) is read again as a varint."""
    return varint(buf, pos - 1) if key >= 0x80 else (key, pos)


def skip(buf: bytes, pos: int, wire: int) -> int:
    if wire == 0:
        return varint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        n, pos = varint(buf, pos)
        return pos + n
    if wire == 5:
        return pos + 4
    raise ProtobufError(f"unsupported wire type {wire}")


def fields(buf: bytes, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a message: an int for varints, a (start, stop) slice
    for length-delimited fields, the raw bytes of fixed64/fixed32 fields."""
    end = len(buf) if end is None else end
    while pos < end:
        key, pos = varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
            yield field, wire, value
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > end:
                raise ProtobufError(f"field {field} runs past its message")
            yield field, wire, (pos, pos + n)
            pos += n
        elif wire == 1:
            yield field, wire, buf[pos : pos + 8]
            pos += 8
        elif wire == 5:
            yield field, wire, buf[pos : pos + 4]
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire} (field {field})")
    if pos != end:
        raise ProtobufError("message runs past its end")


def text(buf: bytes, span: object) -> str:
    start, stop = span  # type: ignore[misc]
    return buf[start:stop].decode("utf-8", "backslashreplace")


def double(raw: object) -> float:
    return _D(raw, 0)[0]  # type: ignore[arg-type]


def signed(value: int) -> int:
    """int64 from its varint (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def zigzag(value: int) -> int:
    """sint64 from its varint."""
    return (value >> 1) ^ -(value & 1)
