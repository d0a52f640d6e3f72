"""A chunk of one series' points (or of several series logged together) as one compressed blob:
the format, and its standard-library encoder and decoder.

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive, and the
writer may run where numpy is missing. `schema/store/chunk_codec_numpy.py` is the numpy twin (the
same bytes out of `encode`, the same numbers out of `decode`, several times quicker); use it
wherever numpy imports. docs/store.md ("Points as compressed columns") has the measurements
behind each choice below.

A chunk holds n points: one column of steps (int64), one of walls (float64) and k >= 1 columns
of values (float64) sharing them, k > 1 for keys logged together; and, where the store needs
them, the points' ids (int64: the readers' cursor, kept through a compaction that merges
chunks whose ids interleave with other series'). Every column is lossless to the bit: floats
travel as their 64-bit patterns and are never computed with (DECIMAL checks its division to
the bit), so NaN payloads (quiet or signalling), -0.0, +-inf and subnormals come back as they
went in.

The blob's layout (header, directory, streams, CRC-32s; versions 2 and 1) is
schema/store/chunk_layout.py's, whose public names this module re-exports.

Each stream holds n 64-bit words (the int64 steps, the float64 bit patterns), as one of:

    LINEAR   16 bytes: the first word and the difference between words (mod 2^64); a
             constant column (difference 0) or a regular one (steps 0, 1, 2, ...) costs only
             this, and n <= 2 always takes it
    SHUFFLE  raw deflate of the words byte-shuffled: byte 0 of every word, then byte 1, ...
             (Blosc's filter: float64s of one series share their sign, exponent and high
             mantissa bytes, which shuffled become long runs deflate all but removes)
    DELTA    as SHUFFLE, of the first word then each word minus the one before (mod 2^64)
    DELTA2   as SHUFFLE, of the first word, the first difference, then each difference minus
             the one before (delta-of-delta, Gorilla's timestamps)
    XOR      as SHUFFLE, of the first word then each word XOR the one before (Gorilla's values)
    DECIMAL  floats only: e (u8, 0-12) and an inner kind (u8: LINEAR, SHUFFLE or DELTA), then
             that stream of the integers m with float(m) / 10**e == the float to the bit (ALP's
             idea: watts from milliwatts and other decimals cost their digits, not 52 bits)
    RAW      the words as they are, 8n bytes: head chunks, a flush's few rows, where deflate's
             fixed cost a stream (~10 us) buys a few bytes that sealing will take anyway

The encoder writes LINEAR where the words allow it, else DECIMAL where a float column is made
of decimals (inside: DELTA for integers that never turn, SHUFFLE for the others), else DELTA
for steps and walls and SHUFFLE for values (measured on training runs:
scripts/bench/bench_codec.py); the decoder reads every kind, so a later encoder may choose
among them without a new version. A new kind, or any other change to these bytes, is a new
FORMAT_VERSION: a reader refuses a version it does not know, with the one line that says to
upgrade.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate, chain, islice
from operator import ge, le, sub, xor
from typing import NamedTuple

from schema.store import chunk_layout
from schema.store.chunk_layout import (  # noqa: F401 (re-exported: the names chunk_codec had)
    CRC,
    ENTRY,
    FORMAT_VERSION,
    HAS_IDS,
    HEADER,
    MAX_COLUMNS,
    MAX_POINTS,
    STREAM,
    VERSIONS,
    Directory,
    Streams,
    check_shape,
    crc32,
    directory_size,
    pack,
    picked_columns,
    picked_streams,
    read_directory,
    read_streams,
    unpack,
    verified,
)

# The codec functions below take the module whose conversions and streams they use: this one,
# or its numpy twin (schema/store/chunk_codec_numpy.py), so that the two share one encode and
# decode.
_SELF = sys.modules[__name__]

LINEAR, SHUFFLE, DELTA, DELTA2, XOR, DECIMAL, RAW = 1, 2, 3, 4, 5, 6, 7
KIND_NAMES = {
    LINEAR: "linear",
    SHUFFLE: "shuffle",
    DELTA: "delta",
    DELTA2: "delta2",
    XOR: "xor",
    DECIMAL: "decimal",
    RAW: "raw",
}
WORD_KINDS = (SHUFFLE, DELTA, DELTA2, XOR, RAW)  # besides LINEAR: what integers may be
DECIMAL_INNER = (SHUFFLE, DELTA)  # DELTA where the integers never turn (counters)
MAX_EXPONENT = 12
POW10 = tuple(float(10**e) for e in range(MAX_EXPONENT + 1))  # exact doubles
MAX_DECIMAL = 1 << 53  # every integer up to this is an exact double
DECIMAL_HEAD = 8  # values an exponent must fit before the whole column is tried
STEP_KIND, WALL_KIND, VALUE_KIND = DELTA, DELTA, SHUFFLE
# zlib's default; on the benchmark's workload level 9 saved 0.1 % for 1.7x the time, level 1
# cost 3.8 % more bytes for half of it. The encoder's choice: inflate reads any level.
LEVEL = 6

LINEAR_WORDS = struct.Struct("<qq")
DECIMAL_HEADER = struct.Struct("<BB")

_MASK = (1 << 64) - 1
_HALF = 1 << 63
_BIG_ENDIAN = sys.byteorder == "big"


class Chunk(NamedTuple):
    """Decoded columns: steps (int64), walls and each value column (float64), and the points'
    ids (int64) where the chunk holds them, else None. The stdlib decoder gives array('q') /
    array('d'); the numpy one gives ndarrays."""

    steps: Sequence[int]
    walls: Sequence[float]
    values: tuple
    ids: Sequence[int] | None = None


def _le(words: array) -> bytes:
    if _BIG_ENDIAN:
        words = array("q", words)
        words.byteswap()
    return words.tobytes()


def _from_le(data: bytes) -> array:
    words = array("q")
    words.frombytes(data)
    if _BIG_ENDIAN:
        words.byteswap()
    return words


def shuffle(data: bytes, width: int = 8) -> bytes:
    """Byte planes: byte 0 of every `width`-byte word, then byte 1, ..."""
    return b"".join([data[k::width] for k in range(width)])


def unshuffle(data: bytes, width: int = 8) -> bytes:
    n = len(data) // width
    out = bytearray(len(data))
    for k in range(width):
        out[k::width] = data[k * n : (k + 1) * n]
    return bytes(out)


PLANE_BLOCKS_FROM = 256  # points a stream: below, one deflate block (see deflate)


def deflate(planes: bytes, width: int = 8) -> bytes:
    """Raw deflate of byte planes (`shuffle`'s output), a deflate block a plane where the
    planes are long: each gets its own Huffman table, and a plane of noise (a float's low
    mantissa bytes) becomes a stored block, which inflates as a copy. Measured on a 10,000-point
    chunk: random values 6.86 -> 6.74 bytes a point and inflated in 13.7 -> 8.0 ns a point,
    a noisy loss 6.27 -> 6.20 B and 5.7 -> 1.9 ns (docs/store.md, "A deflate block a byte plane").
    Any inflater reads either form: readers of the chunks written before need no change."""
    # Raw deflate: the chunk's CRC already guards the bytes, so zlib's header and Adler-32
    # (6 bytes a stream) are left out. compressobj, as zlib.compress takes wbits only on 3.11+.
    z = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    size = len(planes) // width
    if size < PLANE_BLOCKS_FROM:  # a block's own header and table would outweigh its gain
        return z.compress(planes) + z.flush()
    out, view = [], memoryview(planes)
    for k in range(width - 1):
        # Z_BLOCK ends the block without the 4 bytes of padding a sync flush writes; matches
        # still reach back across planes.
        out += (z.compress(view[k * size : (k + 1) * size]), z.flush(zlib.Z_BLOCK))
    out += (z.compress(view[(width - 1) * size :]), z.flush())
    return b"".join(out)


def inflate(payload: bytes, size: int) -> bytes:
    reading = chunk_layout._reading_zlib  # zlib-ng where it imports (chunk_layout)
    z = reading.decompressobj(-15)
    try:
        data = z.decompress(payload, size + 1)
    except reading.error as e:
        raise ValueError(f"corrupt chunk: {e}") from None
    if len(data) > size or z.unconsumed_tail:
        raise ValueError(f"corrupt chunk: a stream holds more than its {size} bytes")
    if len(data) < size or not z.eof or z.unused_data:
        raise ValueError(f"corrupt chunk: a stream holds {len(data)} bytes, not {size}")
    return data


def is_linear(words: array) -> bool:
    n = len(words)
    if n <= 2:
        return True
    step = (words[1] - words[0]) & _MASK
    if (words[2] - words[1]) & _MASK != step or (words[-1] - words[-2]) & _MASK != step:
        return False
    if step == 0:
        return words.count(words[0]) == n
    step = ((step + _HALF) & _MASK) - _HALF
    last = words[0] + step * (n - 1)
    if -_HALF <= last < _HALF:  # compared in C against the progression it would be
        return words == array("q", range(words[0], last + (1 if step > 0 else -1), step))
    step &= _MASK
    return all((b - a) & _MASK == step for a, b in zip(words, islice(words, 1, None)))


def _int64s(ints) -> array:
    """array('q') of Python ints taken mod 2^64 (a difference of two int64s can overflow)."""
    try:
        return array("q", ints)
    except OverflowError:
        return array("q", [((x + _HALF) & _MASK) - _HALF for x in ints])


def _diffs(words) -> array:
    return _int64s(list(map(sub, islice(words, 1, None), words)))


def encode_words(words: array, kind: int) -> tuple:
    """(kind, payload) of one column of int64 words; LINEAR where the words allow it."""
    n = len(words)
    if is_linear(words):
        first = words[0] if n else 0
        step = _int64s([words[1] - words[0]])[0] if n > 1 else 0
        return LINEAR, LINEAR_WORDS.pack(first, step)
    if kind == RAW:
        return RAW, _le(words)
    if kind == SHUFFLE:
        out = words
    elif kind == DELTA:
        out = array("q", words[:1]) + _diffs(words)
    elif kind == DELTA2:
        d = _diffs(words)
        out = array("q", [words[0], d[0]]) + _diffs(d)
    elif kind == XOR:
        out = array("q", [words[0]])
        out.extend(map(xor, islice(words, 1, None), words))
    else:
        raise ValueError(f"unknown stream kind {kind!r}")
    return kind, deflate(shuffle(_le(out)))


def check_word_kind(kind: int) -> None:
    if kind not in WORD_KINDS:
        raise ValueError(
            f"corrupt chunk: unknown stream kind {kind}"
            if kind not in KIND_NAMES
            else f"corrupt chunk: a {KIND_NAMES[kind]} stream where integers belong"
        )


def decode_words(kind: int, payload: bytes, n: int) -> array:
    """The int64 words of one stream (array('q'))."""
    if kind == LINEAR:
        if len(payload) != LINEAR_WORDS.size:
            raise ValueError("corrupt chunk: a linear stream is not 16 bytes")
        first, step = LINEAR_WORDS.unpack(payload)
        if step == 0:
            return array("q", [first]) * n
        last = first + step * (n - 1)
        if -_HALF <= last < _HALF:
            return array("q", range(first, last + (1 if step > 0 else -1), step))
        return _int64s([first + step * i for i in range(n)])
    check_word_kind(kind)
    if kind == RAW:
        if len(payload) != 8 * n:
            raise ValueError("corrupt chunk: a raw stream of the wrong length")
        return _from_le(payload)
    words = _from_le(unshuffle(inflate(payload, 8 * n)))
    if kind == SHUFFLE:
        return words
    if kind == DELTA:
        return _int64s(list(accumulate(words)))
    if kind == XOR:
        return array("q", accumulate(words, xor))
    if n < 2:  # DELTA2 of fewer than three words: the encoder never writes it
        return words
    d = accumulate(islice(words, 1, None))
    return _int64s(list(accumulate(chain(words[:1], d))))


def decimal_of(floats: array) -> tuple | None:
    """(e, the integers m) with m / 10**e giving back every float to the bit, for the smallest
    e <= MAX_EXPONENT whose division fits the first DECIMAL_HEAD floats by value; None where
    there is none, or where it fails the whole column (NaN, inf, -0.0, |m| > 2^53)."""
    head = floats[:DECIMAL_HEAD]
    for e, p in enumerate(POW10):
        try:
            if not all(round(x * p) / p == x for x in head):
                continue
            # map over C-level callables: no Python frame a point (3x quicker than a loop)
            ints = list(map(round, map(p.__mul__, floats)))
        except (OverflowError, ValueError):  # x * p is inf (try a larger e: inf again), or NaN
            continue
        if not ints or max(ints) > MAX_DECIMAL or min(ints) < -MAX_DECIMAL:
            return None
        back = array("d", map(p.__rtruediv__, ints))  # m / p: one IEEE division, as numpy's
        return (e, array("q", ints)) if back.tobytes() == floats.tobytes() else None
    return None


def encode_floats(floats: array, kind: int, decimal: bool = True) -> tuple:
    """(kind, payload) of a float column: LINEAR where its bit patterns allow, else DECIMAL
    where its values are decimals (watts from milliwatts: 6.1 bytes a point as bit patterns,
    2.3 as integers), else `kind` over the bit patterns."""
    words = array("q")
    words.frombytes(floats.tobytes())
    return float_stream(_SELF, floats, words, kind, decimal)


def float_stream(codec, floats, words, kind: int, decimal: bool) -> tuple:
    """encode_floats of this module or of its numpy twin (`codec`, the module whose
    is_linear, decimal_of, monotonic and encode_words it uses); `words`: the floats' bits."""
    found = None if not decimal or codec.is_linear(words) else codec.decimal_of(floats)
    if found is None:
        return codec.encode_words(words, kind)
    e, ints = found
    # Compressing both and keeping the smaller chose the same on the benchmark's workload,
    # at 3x the time: deflate is slow on the noisy differences of a level's readings.
    inner = codec.encode_words(ints, DELTA if codec.monotonic(ints) else SHUFFLE)
    return DECIMAL, DECIMAL_HEADER.pack(e, inner[0]) + inner[1]


def monotonic(ints: array) -> bool:
    return all(map(le, ints, islice(ints, 1, None))) or all(map(ge, ints, islice(ints, 1, None)))


def decimal_parts(payload: bytes) -> tuple:
    """(e, inner kind, inner payload) of a DECIMAL stream."""
    if len(payload) < DECIMAL_HEADER.size:
        raise ValueError("corrupt chunk: a decimal stream is too short")
    e, inner = DECIMAL_HEADER.unpack_from(payload)
    if e > MAX_EXPONENT or inner not in (LINEAR, *DECIMAL_INNER):
        raise ValueError(f"corrupt chunk: a decimal stream of 10^{e}, kind {inner}")
    return e, inner, payload[DECIMAL_HEADER.size :]


def decode_floats(kind: int, payload: bytes, n: int) -> array:
    """The floats of one stream (array('d'))."""
    if kind != DECIMAL:
        return _floats(decode_words(kind, payload, n))
    e, inner, rest = decimal_parts(payload)
    return array("d", map(POW10[e].__rtruediv__, decode_words(inner, rest, n)))


def float64_column(column) -> array:
    if isinstance(column, array) and column.typecode == "d":
        return column
    return array("d", column)


def _floats(words: array) -> array:
    out = array("d")
    out.frombytes(words.tobytes())
    return out


def check_lengths(n: int, walls, values: tuple, ids) -> None:
    if len(walls) != n or any(len(v) != n for v in values) or (ids is not None and len(ids) != n):
        raise ValueError(
            f"a chunk's columns have one length: {n} steps, {len(walls)} walls, values"
            f" {[len(v) for v in values]}" + ("" if ids is None else f", {len(ids)} ids")
        )


def int64_column(column, what: str) -> array:
    try:
        return (
            column if isinstance(column, array) and column.typecode == "q" else array("q", column)
        )
    except OverflowError:
        raise ValueError(f"{what} outside int64's range") from None
    except TypeError as e:
        raise ValueError(f"{what} must be integers: {e}") from None


def encode(
    steps: Sequence[int],
    walls: Sequence[float],
    *values: Sequence[float],
    ids: Sequence[int] | None = None,
    kinds: tuple = (STEP_KIND, WALL_KIND, VALUE_KIND),
    decimal: bool = True,
    version: int = FORMAT_VERSION,
    codec=None,
) -> bytes:
    """The blob of n points: steps (ints in int64's range), walls and one or more value
    columns (floats), all n long; `ids`: the points' ids (int64s, any order: a compaction
    keeps the cursor's ids, however they interleave), or None. `kinds`: the stream kinds for
    steps (ids too), walls and values (LINEAR is taken wherever it fits, whatever they say);
    `decimal`: try DECIMAL on floats; `version` 1 only for tests of older chunks. `codec`:
    the module whose column conversions and stream encoders do the work (None: this one;
    the numpy twin passes itself)."""
    codec = codec or _SELF
    n = len(steps)
    check_shape(n, len(values))
    check_lengths(n, walls, values, ids)
    step_kind, wall_kind, value_kind = kinds
    words, floats = codec.encode_words, codec.encode_floats
    return pack(
        n,
        words(codec.int64_column(steps, "a step is"), step_kind),
        floats(codec.float64_column(walls), wall_kind, decimal),
        None if ids is None else words(codec.int64_column(ids, "an id is"), step_kind),
        [floats(codec.float64_column(v), value_kind, decimal) for v in values],
        version,
    )


def decode_streams(s: Streams, codec=None) -> Chunk:
    """The columns of picked streams, by this module or its numpy twin (`codec`)."""
    codec = codec or _SELF
    return Chunk(
        codec.decode_words(*s.steps, s.n),
        codec.decode_floats(*s.walls, s.n),
        tuple(codec.decode_floats(*v, s.n) for v in s.values),
        None if s.ids is None else codec.decode_words(*s.ids, s.n),
    )


def decode(blob: bytes, columns: Sequence[int] | None = None) -> Chunk:
    """The columns of a blob; `columns` picks value columns by index (None: all), the others'
    streams are neither inflated nor (version 2) read. A blob that is not a whole chunk of a
    known format raises ValueError: never a wrong number."""
    return decode_streams(picked_streams(blob, columns))


def describe(blob: bytes) -> dict:
    """What a blob holds, for `reslog check` and the benchmark: points, columns, and each
    stream's kind and size (steps, walls, ids where held, values)."""
    s = unpack(blob)
    streams = [s.steps, s.walls] + ([] if s.ids is None else [s.ids]) + s.values
    return {
        "version": s.version,
        "points": s.n,
        "columns": len(s.values),
        "ids": s.ids is not None,
        "streams": [(KIND_NAMES.get(kind, str(kind)), len(p)) for kind, p in streams],
        "bytes": len(blob),
    }
