"""The numpy twin of schema/chunk_codec.py: the same blobs, byte for byte, from `encode`, and
the same columns (as ndarrays) from `decode`, without a Python step per point.

The one schema module that imports numpy: importing it raises ImportError where numpy is
missing, so callers that may run without numpy (the agent never has it) write

    try:
        from schema import chunk_codec_numpy as codec
    except ImportError:
        from schema import chunk_codec as codec

tests/test_chunk_codec.py holds the two to the same bytes and the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from schema.chunk_codec import (
    DELTA,
    DELTA2,
    LINEAR,
    LINEAR_WORDS,
    SHUFFLE,
    STEP_KIND,
    VALUE_KIND,
    WALL_KIND,
    XOR,
    Chunk,
    check_shape,
    deflate,
    inflate,
    pack,
    unpack,
)

WORD = np.dtype("<i8")


def _shuffled(words: np.ndarray) -> bytes:
    return words.astype(WORD, copy=False).view(np.uint8).reshape(-1, 8).T.tobytes()


def _unshuffled(data: bytes, n: int) -> np.ndarray:
    planes = np.frombuffer(data, dtype=np.uint8).reshape(8, n)
    return np.ascontiguousarray(planes.T).view(WORD).reshape(n)


def encode_words(words: np.ndarray, kind: int) -> tuple:
    """(kind, payload) of one column of int64 words, as schema.chunk_codec.encode_words."""
    n = len(words)
    # int64 arithmetic wraps, as the stdlib encoder's mod 2^64 does
    with np.errstate(over="ignore"):
        d = np.diff(words)
        if n <= 2 or (d == d[0]).all():
            first = int(words[0]) if n else 0
            return LINEAR, LINEAR_WORDS.pack(first, int(d[0]) if n > 1 else 0)
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


def decode_words(kind: int, payload: bytes, n: int) -> np.ndarray:
    """The int64 words of one stream."""
    with np.errstate(over="ignore"):
        if kind == LINEAR:
            if len(payload) != LINEAR_WORDS.size:
                raise ValueError("corrupt chunk: a linear stream is not 16 bytes")
            first, step = LINEAR_WORDS.unpack(payload)
            if step == 0:
                return np.full(n, first, dtype=np.int64)
            return np.int64(first) + np.arange(n, dtype=np.int64) * np.int64(step)
        if kind not in (SHUFFLE, DELTA, DELTA2, XOR):
            raise ValueError(f"corrupt chunk: unknown stream kind {kind}")
        words = _unshuffled(inflate(payload, 8 * n), n).astype(np.int64)
        if kind == SHUFFLE:
            return words
        if kind == DELTA:
            return np.cumsum(words, dtype=np.int64)
        if kind == XOR:
            return np.bitwise_xor.accumulate(words)
        if n < 2:
            return words
        words[1:] = np.cumsum(words[1:], dtype=np.int64)
        return np.cumsum(words, dtype=np.int64)


def _int64(steps) -> np.ndarray:
    a = np.asarray(steps)
    if a.size == 0:
        return np.zeros(0, dtype=np.int64)
    if a.dtype.kind == "O":
        try:
            a = np.array(steps, dtype=np.int64)
        except (OverflowError, TypeError) as e:
            raise ValueError(f"steps must be integers in int64's range: {e}") from None
    if a.dtype.kind not in "iu":
        raise ValueError(f"steps must be integers, not {a.dtype}")
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and int(a.max()) >= 1 << 63:
        raise ValueError("a step is outside int64's range")
    return a.astype(np.int64)


def _float_words(column) -> np.ndarray:
    return np.ascontiguousarray(column, dtype=np.float64).view(np.int64)


def encode(steps: Sequence[int], walls: Sequence[float], *values: Sequence[float],
           kinds: tuple = (STEP_KIND, WALL_KIND, VALUE_KIND)) -> bytes:  # fmt: skip
    """As schema.chunk_codec.encode, from any sequences (ndarrays best)."""
    n = len(steps)
    check_shape(n, len(values))
    if len(walls) != n or any(len(v) != n for v in values):
        raise ValueError(
            f"a chunk's columns have one length: {n} steps, {len(walls)} walls, values"
            f" {[len(v) for v in values]}"
        )
    step_kind, wall_kind, value_kind = kinds
    streams = [encode_words(_int64(steps), step_kind),
               encode_words(_float_words(walls), wall_kind)]  # fmt: skip
    streams += [encode_words(_float_words(v), value_kind) for v in values]
    return pack(n, streams)


def decode(blob: bytes, columns: Sequence[int] | None = None) -> Chunk:
    """As schema.chunk_codec.decode, as ndarrays (int64 steps, float64 walls and values)."""
    n, streams = unpack(blob)
    k = len(streams) - 2
    picked = range(k) if columns is None else columns
    for i in picked:
        if not 0 <= i < k:
            raise ValueError(f"the chunk has {k} value columns, not a column {i}")
    steps = decode_words(*streams[0], n)
    walls = decode_words(*streams[1], n).view(np.float64)
    values = tuple(decode_words(*streams[2 + i], n).view(np.float64) for i in picked)
    return Chunk(steps, walls, values)
