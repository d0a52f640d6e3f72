"""The numpy twin of schema/store/chunk_codec.py: the same blobs, byte for byte, from `encode`, and
the same columns (as ndarrays) from `decode`, without a Python step per point.

The one schema module that imports numpy: importing it raises ImportError where numpy is
missing, so callers that may run without numpy (the agent never has it) write

    try:
        from schema.store import chunk_codec_numpy as codec
    except ImportError:
        from schema.store import chunk_codec as codec

tests/schema/test_chunk_codec.py holds the two to the same bytes and the same bits.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from schema.store import chunk_codec
from schema.store.chunk_codec import (
    DECIMAL,
    DECIMAL_HEAD,
    DELTA,
    DELTA2,
    LINEAR,
    LINEAR_WORDS,
    MAX_DECIMAL,
    POW10,
    RAW,
    SHUFFLE,
    XOR,
    Chunk,
    Streams,
    check_word_kind,
    decimal_parts,
    deflate,
    float_stream,
    inflate,
    picked_streams,
)

WORD = np.dtype("<i8")
_NATIVE = np.dtype(np.int64) == WORD  # little-endian: the words' bytes are int64s as they lie
_POW10 = np.array(POW10)
_SELF = sys.modules[__name__]  # what chunk_codec's shared encode and decode call back into


def _shuffled(words: np.ndarray) -> bytes:
    return words.astype(WORD, copy=False).view(np.uint8).reshape(-1, 8).T.tobytes()


def _unshuffled(data: bytes, n: int) -> np.ndarray:
    planes = np.frombuffer(data, dtype=np.uint8).reshape(8, n)
    return np.ascontiguousarray(planes.T).view(WORD).reshape(n)


def encode_words(words: np.ndarray, kind: int) -> tuple:
    """(kind, payload) of one column of int64 words, as schema.store.chunk_codec.encode_words.
    int64 array arithmetic wraps silently, as the stdlib encoder's mod 2^64 does."""
    n = len(words)
    d = np.diff(words)
    if n <= 2 or (d == d[0]).all():
        first = int(words[0]) if n else 0
        return LINEAR, LINEAR_WORDS.pack(first, int(d[0]) if n > 1 else 0)
    if kind == RAW:
        return RAW, words.astype(WORD, copy=False).tobytes()
    if kind == SHUFFLE:
        out = words
    elif kind == DELTA:
        out = np.concatenate((words[:1], d))
    elif kind == DELTA2:
        out = np.concatenate((words[:1], d[:1], np.diff(d)))
    elif kind == XOR:
        out = np.concatenate((words[:1], words[1:] ^ words[:-1]))
    else:
        raise ValueError(f"unknown stream kind {kind!r}")
    return kind, deflate(_shuffled(out))


_COUNT = np.arange(0, dtype=np.int64)  # 0, 1, 2, ...: grown to the longest linear stream read


def _counting(n: int) -> np.ndarray:
    global _COUNT
    if len(_COUNT) < n:
        grown = np.arange(max(n, 2 * len(_COUNT)), dtype=np.int64)
        grown.flags.writeable = False
        _COUNT = grown
    return _COUNT[:n]


def linear_words(first: int, step: int, n: int, out: np.ndarray) -> np.ndarray:
    """first, first + step, ... (mod 2^64) into `out`, n int64s: one pass where step is 1
    (a run's steps), two otherwise (its ids, k apart), from a shared 0, 1, 2, ... instead of
    a fresh arange a stream (~2 ns a point of a scan for the steps and ids of each chunk)."""
    first = ((first + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)  # an offset added may wrap
    if step == 0:
        out.fill(first)
    elif step == 1:
        np.add(_counting(n), np.int64(first), out=out)
    else:
        np.multiply(_counting(n), np.int64(step), out=out)
        out += np.int64(first)
    return out


def decode_words(kind: int, payload: bytes, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """The int64 words of one stream (array arithmetic wraps mod 2^64, silently), written into
    `out` (n int64s, e.g. a slice of a longer column) where given: no array a stream beyond the
    inflated bytes."""
    if out is None:
        out = np.empty(n, dtype=np.int64)
    if kind == LINEAR:
        if len(payload) != LINEAR_WORDS.size:
            raise ValueError("corrupt chunk: a linear stream is not 16 bytes")
        return linear_words(*LINEAR_WORDS.unpack(payload), n, out)
    check_word_kind(kind)
    if kind == RAW:
        if len(payload) != 8 * n:
            raise ValueError("corrupt chunk: a raw stream of the wrong length")
        out[:] = np.frombuffer(payload, dtype=WORD)
        return out
    data = inflate(payload, 8 * n)
    if _NATIVE:
        # The byte planes written straight into `out`'s bytes, a plane at a time: one long
        # strided loop each, twice as quick as numpy's transposing copy (whose inner loop is
        # 8 bytes long).
        planes = np.frombuffer(data, dtype=np.uint8).reshape(8, n)
        into = out.view(np.uint8).reshape(n, 8)
        for k in range(8):
            into[:, k] = planes[k]
    else:
        out[:] = _unshuffled(data, n)
    if kind == DELTA:
        np.cumsum(out, out=out)
    elif kind == XOR:
        np.bitwise_xor.accumulate(out, out=out)
    elif kind == DELTA2 and n >= 2:
        np.cumsum(out[1:], out=out[1:])
        np.cumsum(out, out=out)
    return out


def is_linear(words: np.ndarray) -> bool:
    d = np.diff(words)
    return len(words) <= 2 or bool((d == d[0]).all())


def decimal_of(floats: np.ndarray) -> tuple | None:
    """As schema.store.chunk_codec.decimal_of: (e, int64 m) with m / 10**e == floats to the bit."""
    head = floats[:DECIMAL_HEAD]
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = head[None, :] * _POW10[:, None]  # every exponent at once: one numpy call each
        fits = (np.rint(scaled) / _POW10[:, None] == head[None, :]).all(axis=1)
        for e in np.flatnonzero(fits).tolist():
            p = POW10[e]
            m = np.rint(floats * p)
            if not np.isfinite(m).all():  # where the stdlib's round() raises: the next e
                continue
            if len(m) == 0 or np.abs(m).max() > MAX_DECIMAL:
                return None
            ints = m.astype(np.int64)
            back = (ints.astype(np.float64) / p).view(np.int64)
            return (e, ints) if np.array_equal(back, floats.view(np.int64)) else None
    return None


def encode_floats(floats: np.ndarray, kind: int, decimal: bool = True) -> tuple:
    """As schema.store.chunk_codec.encode_floats."""
    return float_stream(_SELF, floats, floats.view(np.int64), kind, decimal)


def monotonic(ints: np.ndarray) -> bool:
    d = np.diff(ints)
    return bool((d >= 0).all() or (d <= 0).all())


def decode_floats(kind: int, payload: bytes, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """The float64s of one stream, into `out` (n float64s) where given."""
    if out is None:
        out = np.empty(n, dtype=np.float64)
    if kind != DECIMAL:
        decode_words(kind, payload, n, out.view(np.int64))
        return out
    e, inner, rest = decimal_parts(payload)
    np.divide(decode_words(inner, rest, n), POW10[e], out=out)  # int64 -> float64, then /
    return out


def int64_column(column, what: str) -> np.ndarray:
    a = np.asarray(column)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind == "O":
        try:
            a = np.array(column, dtype=np.int64)
        except OverflowError:
            raise ValueError(f"{what} outside int64's range") from None
        except TypeError as e:
            raise ValueError(f"{what} must be integers: {e}") from None
    if a.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integers, not {a.dtype}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and int(a.max()) >= 1 << 63:
        raise ValueError(f"{what} outside int64's range")
    return a.astype(np.int64)


def float64_column(column) -> np.ndarray:
    return np.ascontiguousarray(column, dtype=np.float64)


def encode(
    steps: Sequence[int], walls: Sequence[float], *values: Sequence[float], **options
) -> bytes:
    """As schema.store.chunk_codec.encode (the same options), from any sequences (ndarrays best)."""
    return chunk_codec.encode(steps, walls, *values, codec=_SELF, **options)


def decode(blob: bytes, columns: Sequence[int] | None = None) -> Chunk:
    """As schema.store.chunk_codec.decode, as ndarrays (int64 steps and ids, float64 walls and
    values)."""
    return decode_streams(picked_streams(blob, columns))


def decode_into(s: Streams, columns: tuple, at: int) -> None:
    """A chunk of one value column decoded into `columns` (steps, walls, values: longer
    arrays) from row `at` on; its ids are left to decode_ids (a scan returns none)."""
    steps, walls, values = (c[at : at + s.n] for c in columns)
    decode_words(*s.steps, s.n, steps)
    decode_floats(*s.walls, s.n, walls)
    decode_floats(*s.values[0], s.n, values)


def decode_ids(kind: int, payload: bytes, n: int, out: np.ndarray, offset: int = 0) -> None:
    """A chunk's id stream into `out` (n int64s), `offset` added (a point's value column)."""
    if kind == LINEAR and len(payload) == LINEAR_WORDS.size:  # the offset in the same pass
        first, step = LINEAR_WORDS.unpack(payload)
        linear_words(first + offset, step, n, out)
        return
    decode_words(kind, payload, n, out)
    if offset:
        out += offset


def decode_streams(s: Streams) -> Chunk:
    """As schema.store.chunk_codec.decode_streams, as ndarrays."""
    return chunk_codec.decode_streams(s, _SELF)
