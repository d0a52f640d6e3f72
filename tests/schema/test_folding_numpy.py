"""The numpy fold of fine buckets against the builtin fold, field by field
(schema/store/folding_numpy.py against schema/store/folding.fold_each, the writer's own fold bucket
by bucket)."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest

from schema.store.envelope import BUCKET_LAYOUT
from schema.store.folding import fold_each, pack_each
from schema.store.folding_numpy import BUCKET_DTYPE, fold_columns, packed
from schema.store.rollup import AGG_COLUMNS, VSUM

ROW = struct.Struct("<" + "".join(f.split(":")[1] for f in BUCKET_LAYOUT.split(",")))


def random_series(rng: random.Random, n: int) -> tuple[list, list, list]:
    steps, s = [], rng.randint(-50, 50)
    for _ in range(n):
        s += rng.choice([0, 1, 1, 1, 2, 5, 40])  # repeats (a step logged twice), gaps
        steps.append(s)
    kind = rng.choice(["float", "flags", "ints", "zeros"])
    values = []
    for _ in range(n):
        r = rng.random()
        if r < 0.04:
            values.append(rng.choice([math.nan, math.inf, -math.inf]))
        elif kind == "flags":
            values.append(float(rng.choice([0, 1, 4, 32, 2**40])))
        elif kind == "ints":
            values.append(float(rng.randint(-3, 3)))
        elif kind == "zeros":
            values.append(rng.choice([0.0, -0.0, 1.0]))
        else:
            values.append(rng.gauss(0, 1e3))
    walls = [1.7e9 + rng.random() * 100 for _ in range(n)]
    return steps, walls, values


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


@pytest.mark.parametrize("seed", range(8))
def test_every_field_equals_the_builtin_fold(seed):
    rng = random.Random(seed)
    for width in (1, 2, 8, 64, 3):
        steps, walls, values = random_series(rng, rng.randint(1, 700))
        start = steps[0] - rng.randint(0, width - 1)
        want = fold_each(list(zip(steps, walls, values, strict=True)), start, width)
        got = fold_columns(np.array(steps), np.array(walls), np.array(values), start, width)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            row = ROW.unpack(ROW.pack(*[g[f] for f in BUCKET_DTYPE.names]))
            expect = ROW.unpack(pack_each([w], ROW))
            for i, name in enumerate([*AGG_COLUMNS, "nulls"]):
                if i == VSUM:
                    assert math.isclose(row[i], expect[i], rel_tol=1e-12, abs_tol=1e-9), name
                else:
                    assert same(row[i], expect[i]), (name, row[i], expect[i])


def test_packed_bytes_are_the_layout_of_the_agent():
    steps = np.arange(0, 4096, 1)
    values = np.sin(steps / 50.0)
    walls = 1.7e9 + steps * 0.3
    blob = packed(steps, walls, values, 0, 8)
    rows = list(zip(steps.tolist(), walls.tolist(), values.tolist(), strict=True))
    assert len(blob) == 512 * ROW.size
    want = pack_each(fold_each(rows, 0, 8), ROW)
    got_rows = [ROW.unpack_from(blob, i * ROW.size) for i in range(512)]
    want_rows = [ROW.unpack_from(want, i * ROW.size) for i in range(512)]
    for g, w in zip(got_rows, want_rows, strict=True):
        assert g[:VSUM] == w[:VSUM] and g[VSUM + 1 :] == w[VSUM + 1 :]
        assert math.isclose(g[VSUM], w[VSUM], rel_tol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_finite_points_fold_to_the_same_bytes_by_the_quicker_path(seed):
    """Points without NaN or infinities take _fold_finite: the same bytes as _fold_any, which
    handles any point, and the builtin fold's fields (flags, whole numbers, -0.0 beside 0.0,
    sums of huge values that overflow to NaN)."""
    from schema.store import folding_numpy

    rng = random.Random(1000 + seed)
    taken = 0
    for width in (1, 2, 8, 64, 3):
        steps, walls, values = random_series(rng, rng.randint(1, 700))
        values = [v if math.isfinite(v) else rng.choice([1e308, -1e308, 0.0]) for v in values]
        start = steps[0] - rng.randint(0, width - 1)
        s, w, v = np.array(steps), np.array(walls), np.array(values)
        got = fold_columns(s, w, v, start, width)
        bucket = (s - start) // width
        starts = np.flatnonzero(np.concatenate(([True], bucket[1:] != bucket[:-1])))
        ends = np.concatenate((starts[1:], [len(s)]))
        out = np.zeros(len(starts), dtype=BUCKET_DTYPE)
        general = folding_numpy._fold_any(out, s, w, v, starts, ends, np.isfinite(v))
        assert got.tobytes() == general.tobytes()
        want = fold_each(list(zip(steps, walls, values, strict=True)), start, width)
        assert ROW.size * len(want) == len(got.tobytes())
        for g, e in zip(got, want, strict=True):
            row = ROW.unpack(ROW.pack(*[g[f] for f in BUCKET_DTYPE.names]))
            expect = ROW.unpack(pack_each([e], ROW))
            for i, name in enumerate([*AGG_COLUMNS, "nulls"]):
                if i != VSUM:
                    assert same(row[i], expect[i]), (name, row[i], expect[i])
        taken += 1
    assert taken == 5
