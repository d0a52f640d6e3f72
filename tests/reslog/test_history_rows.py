"""history(samples=N): between N/2 and N exact rows whenever the range holds more than N points,
for runs of every length and any window, each row equal to what scan() says of its points."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import reslog
from tests.fixtures.stores import make_run, new_store

LENGTHS = {"k1001": 1_001, "k5000": 5_000, "k20000": 20_000, "k70000": 70_000}


def _loss(n: int, seed: int) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    out = [(s, 2.0 + math.sin(s / 300) + 0.05 * rng.random()) for s in range(n)]
    out[n // 3] = (n // 3, 40.0)  # a one-step spike
    out[n // 2] = (n // 2, -3.0)  # a one-step dip
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("history") / "reslog.db"
    engine = new_store(path)
    points = {key: _loss(n, i) for i, (key, n) in enumerate(LENGTHS.items())}
    # NaN stretch and infinities in the middle of a 20,000-step key.
    nans = _loss(20_000, 9)
    for s in range(7_000, 7_400):
        nans[s] = (s, float("nan"))
    nans[9_000] = (9_000, math.inf)
    nans[9_001] = (9_001, -math.inf)
    points["nans"] = nans
    # Logged every 4th step (GPU telemetry), and in two clusters far apart.
    points["every4"] = [(s, float(s % 17)) for s in range(0, 40_000, 4)]
    points["clusters"] = [(s, float(s % 5)) for s in [*range(1_500), *range(900_000, 901_500)]]
    make_run(engine, name="r", points=points)
    engine.dispose()
    return path


def check_rows(df, raw) -> None:
    """Every row of `df` (one key) summarises exactly the raw points from its step to the
    next row's step."""
    steps = raw["step"].to_numpy()
    values = raw["value"].to_numpy()
    walls = raw["wall"].to_numpy()
    starts = np.searchsorted(steps, df["step"].to_numpy(), side="left")
    ends = [*starts[1:], len(steps)]
    assert starts[0] == 0 and int(df["count"].sum()) == len(steps)
    for row, a, b in zip(df.itertuples(), starts, ends, strict=True):
        v, s = values[a:b], steps[a:b]
        assert row.count == b - a and row.step == s[0] and row.last_step == s[-1]
        assert row.wall == walls[a:b].max()
        assert same(row.first, v[0]) and same(row.last, v[-1])
        lit = v[~np.isnan(v)]
        assert same(row.min, lit.min() if len(lit) else math.nan)
        assert same(row.max, lit.max() if len(lit) else math.nan)
        finite = np.isfinite(v)
        if finite.any() and row.min > -math.inf:
            assert row.min_step == s[finite][np.argmin(v[finite])]
        if finite.any() and row.max < math.inf:
            assert row.max_step == s[finite][np.argmax(v[finite])]


def same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or x == y


def expected_rows(points: int, samples: int) -> tuple[int, int]:
    if points <= samples:
        return points, points
    return -(-samples // 2), samples


@pytest.mark.slow
@pytest.mark.parametrize("key", list(LENGTHS))
@pytest.mark.parametrize("samples", [1, 7, 300, 1000, 2000])
def test_whole_runs_of_every_length_give_between_half_and_all_the_samples(store, key, samples):
    with reslog.open(store) as st:
        df = st.history("r", key, samples=samples)
        raw = st.points("r", key)
    low, high = expected_rows(len(raw), samples)
    assert low <= len(df) <= high, (len(raw), samples, len(df), df.attrs)
    check_rows(df, raw)
    assert df["max"].max() == 40.0 and df["min"].min() == -3.0  # the spike and the dip stay
    width = df.attrs["widths"][key]
    if len(raw) > samples:  # a gapless key: rows `width` steps wide, the last one cut short
        assert (np.diff(df["step"].to_numpy()) == width).all()


@pytest.mark.parametrize(
    ("start", "stop"),
    [(0, 1_001), (5_000, 8_000), (123, 19_877), (31_337, 31_338), (10, 69_990), (69_000, None)],
)
@pytest.mark.parametrize("samples", [100, 1000])
def test_windows_follow_the_same_rule_with_exact_ends(store, start, stop, samples):
    with reslog.open(store) as st:
        df = st.history("r", "k70000", samples=samples, start=start, stop=stop)
        raw = st.points("r", "k70000", start=start, stop=stop)
    low, high = expected_rows(len(raw), samples)
    assert low <= len(df) <= high
    assert df["step"].iloc[0] == start and df["last_step"].iloc[-1] == raw["step"].iloc[-1]
    check_rows(df, raw)


def test_nan_stretches_and_infinities_are_kept_exactly(store):
    with reslog.open(store) as st:
        raw = st.points("r", "nans")
        for samples in (50, 500, 5000):
            df = st.history("r", "nans", samples=samples)
            check_rows(df, raw)
            assert df["max"].max() == math.inf and df["min"].min() == -math.inf
        inside = st.history("r", "nans", samples=100, start=7_050, stop=7_350)
    assert inside["count"].sum() == 300 and inside["min_step"].isna().all()
    assert inside[["first", "min", "max", "last"]].isna().all().all()


def test_sparse_and_clustered_keys_still_get_at_least_half_the_rows(store):
    with reslog.open(store) as st:
        for key, samples in (("every4", 1000), ("every4", 300), ("clusters", 1000)):
            df = st.history("r", key, samples=samples)
            raw = st.points("r", key)
            assert -(-samples // 2) <= len(df) <= samples, (key, samples, len(df))
            check_rows(df, raw)


def test_the_rows_come_from_rollups_when_a_stored_level_is_fine_enough(store):
    with reslog.open(store) as st:
        coarse = st.history("r", "k70000", samples=300)  # two level-1 buckets a row
        half = st.history("r", "k70000", samples=1000)  # 547 level-1 buckets: enough
        fine = st.history("r", "k70000", samples=2000)  # 35 steps a row: the raw points
        full = st.history("r", "k1001", samples=2000)
    assert coarse.attrs["levels"] == {"k70000": 1} and coarse.attrs["widths"] == {"k70000": 256}
    assert half.attrs["widths"] == {"k70000": 128} and len(half) == 547
    assert fine.attrs["levels"] == {"k70000": 0} and fine.attrs["widths"] == {"k70000": 35}
    assert full.attrs["widths"] == {"k1001": 1} and (full["count"] == 1).all()
