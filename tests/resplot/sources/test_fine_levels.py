"""Fine levels: buckets of 2 to 64 steps that the host folds from raw points, for views holding
more than 4 points a pixel but fewer than 128 steps a pixel (level 1 would give fewer buckets
than pixels). Every fine bucket equals the fold of its raw points, through the agent and
PostgreSQL alike, and stays equal while a live run grows through that range on screen."""

from __future__ import annotations

import math

import numpy as np
import pytest

import reslog
from resplot.data.cache import SeriesCache
from resplot.data.views import FINE_PER_PIXEL, series_view
from resplot.sources import open_source, parse_spec
from resplot.sources.local import LocalSource
from schema.store import buckets, folding
from schema.store.rollup import fold
from tests.fixtures.compare import assert_cache_matches_store, same_agg, want_every_tile
from tests.fixtures.stores import add_points, key_id, make_run, new_store
from tests.reslog.agent.test_agent import agent_process, decode_rows, poll

AGG = (
    "n",
    "nan",
    "posinf",
    "neginf",
    "vmin",
    "vmax",
    "min_at",
    "max_at",
    "vsum",
    "step_lo",
    "step_hi",
    "last",
    "wall_lo",
    "wall_hi",
    "bits",
    "nonfinite_at",
)


def brute(points: list[tuple[int, float, float]], shift: int) -> dict[int, tuple]:
    """{bucket: fold of its points} (points as the store keeps them: (step, wall, value))."""
    groups: dict[int, list] = {}
    for s, w, v in points:
        groups.setdefault(s >> shift, []).append((s, w, None if math.isnan(v) else v))
    return {b: fold(*map(list, zip(*g, strict=True))) for b, g in sorted(groups.items())}


def decoded_aggs(cols: dict, i: int) -> tuple:
    from resplot.data.tiles import agg_at

    return agg_at(cols, i)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """A run of 20,000 steps with a one-step spike, a NaN stretch, ±inf, a sparse key, then
    resumed from step 19,000 (its older points from there on are superseded)."""
    path = tmp_path_factory.mktemp("fine") / "reslog.db"
    run = reslog.init(project="p", name="long", store=path, system=False)
    for s in range(20_000):
        loss = 2.0 + math.sin(s / 500)
        loss = {7_777: 60.0, 9_000: math.inf, 9_001: -math.inf}.get(s, loss)
        if 12_000 <= s < 12_100:
            loss = math.nan
        metrics = {"loss": loss}
        if s % 4 == 0:
            metrics["gpu"] = float(s % 13)
        run.log(metrics, step=s)
    run.finish()
    again = reslog.init(project="p", store=path, system=False, resume=run.uid)
    for s in range(19_000, 20_500):
        again.log({"loss": 1.0}, step=s)
    again.finish()
    with reslog.open(path) as st:
        raw = {
            k: list(st.points("long", k)[["step", "wall", "value"]].itertuples(index=False))
            for k in ("loss", "gpu")
        }
    engine = new_store(path)
    ids = {name: key_id(engine, name) for name in ("loss", "gpu")}
    engine.dispose()
    return path, raw, ids


@pytest.mark.integration
@pytest.mark.parametrize("level", range(-1, -buckets.FINE_SHIFT - 1, -1))
def test_fine_tiles_are_the_folds_of_their_raw_points(resumed, level):
    path, raw, ids = resumed
    tiles = 20_500 // buckets.tile_range(level, 0)[1] + 1
    ranges = [[1, ids[key], level, 0, tiles] for key in ("loss", "gpu")]
    with agent_process() as (client, _):
        _header, sections = poll(client, str(path), series=True, tiles=ranges)
    about = sections["buckets"][0]["tiles"]
    cols = decode_rows(sections["buckets"])
    at = 0
    for key in ("loss", "gpu"):
        want = brute([tuple(p) for p in raw[key]], buckets.shift(level))
        got = {}
        for run_id, kid, lv, index, rows in about:
            if kid != ids[key]:
                continue
            assert (run_id, lv) == (1, level)
            for i in range(at, at + rows):
                agg = decoded_aggs(cols, i)
                b = agg[9] >> buckets.shift(level)
                assert index * buckets.TILE_BUCKETS <= b < (index + 1) * buckets.TILE_BUCKETS
                got[b] = agg
            at += rows
        assert sorted(got) == sorted(want)
        assert all(same_agg(got[b], want[b]) for b in want), key
    spike = max(cols["vmax"][np.isfinite(cols["vmax"])])
    assert spike == 60.0  # the one-step spike, in its fine bucket


def _series(rng: np.random.Generator, kind: str) -> list[tuple[int, float, object]]:
    """(step, wall, value) rows by step, as a raw read gives them (value None: NaN)."""
    n = int(rng.integers(1, 400))
    stride = int(rng.choice([1, 2, 4, 8]))
    first = int(rng.integers(-40, 40))
    steps = list(range(first, first + n * stride, stride))
    if kind == "gaps":  # duplicate steps and holes: not a fixed stride
        steps = sorted(int(s) for s in rng.integers(first, first + 3 * n, n))
    walls = (1.7e9 + np.cumsum(rng.random(n))).tolist()
    if kind == "late":  # a wall clock set back mid-run
        walls = (1.7e9 + rng.random(n) * 100).tolist()
    if kind == "nan-wall":  # a PostgreSQL store can hold one (SQLite's NOT NULL refuses it)
        walls[int(rng.integers(n))] = math.nan
    if kind == "flags":  # NVML throttle reasons: integers, OR-ed by a bucket
        values = [float(v) for v in rng.choice([0, 1, 2, 4, 8, 64], n)]
    else:
        values = (rng.standard_normal(n) * 10.0 ** int(rng.integers(-3, 6))).tolist()
        values[int(rng.integers(n))] = 0.5  # a sum that can come out whole
    if kind == "bad":
        for i in rng.integers(0, n, 3):
            values[int(i)] = [None, math.inf, -math.inf][int(i) % 3]
    return list(zip(steps, walls, values, strict=True))


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_fine_buckets_folded_column_wise_are_the_writers_folds():
    """Raw points folded into buckets column-wise over equal chunks (where the series allows it)
    give the aggregates of fold() over each bucket's points, and the agent's packing of them
    the same bytes, for every shape of series."""
    from reslog.agent.wire import BUCKET_ROW as row

    rng = np.random.default_rng(20)
    for trial in range(480):
        kind = ["regular", "gaps", "late", "flags", "bad", "nan-wall"][trial % 6]
        rows = _series(rng, kind)
        start = rows[0][0] - int(rng.integers(0, 70))
        for width in (1, 2, 4, 8, 64, 3):
            want = folding.fold_each(rows, start, width)  # fold() bucket by bucket
            got = folding.fold_width(rows, start, width)
            assert [repr(a) for a in got] == [repr(a) for a in want], (trial, kind, width)
            packed = folding.pack_each(want, row)
            assert folding.pack_folded(rows, start, width, row) == packed, (trial, kind, width)


def drawn(cache, source, ref, key, pixels):
    """The view a chart `pixels` wide ends with: asked for, its tiles polled, at most three
    rounds (a fine view asks for level 1 first, then its own tiles)."""
    for _ in range(3):
        view = series_view(cache, ref, key, -np.inf, np.inf, pixels)
        if view is not None and view.complete:
            return view
        source.poll(cache)
    return series_view(cache, ref, key, -np.inf, np.inf, pixels)


def _view_checks(cache, ref, key, pixels, raw_steps, raw_values) -> None:
    view = series_view(cache, ref, key, -np.inf, np.inf, pixels)
    assert view is not None and view.complete
    per_px = len(raw_steps) / pixels
    if view.level == 0:  # every point: few enough a pixel to be no more bytes than buckets
        assert per_px <= buckets.RAW_PER_PIXEL * FINE_PER_PIXEL
    elif view.level < 0:  # fine: four buckets a pixel, or the finest there is
        assert len(view.mid_steps) >= min(FINE_PER_PIXEL * pixels, len(raw_steps) // 2)
    else:
        assert len(view.mid_steps) >= pixels  # stored: a bucket a pixel at least
    finite = raw_values[np.isfinite(raw_values)]
    drawn = view.values[np.isfinite(view.values)]
    assert drawn.max() == finite.max() and drawn.min() == finite.min()  # exact extremes


@pytest.mark.slow
@pytest.mark.parametrize("steps", [2_657, 20_000, 60_000])
def test_a_run_in_the_gap_draws_a_bucket_per_pixel_or_more(tmp_path, steps):
    path = tmp_path / "gap.db"
    engine = new_store(path)
    rng = np.random.default_rng(steps)
    values = 3.0 + rng.standard_normal(steps)
    values[steps // 3] = 99.0
    make_run(
        engine, name="r", points={"loss": list(zip(range(steps), values.tolist(), strict=True))}
    )
    cache = SeriesCache()
    source = LocalSource(parse_spec(str(path)))
    try:
        source.poll(cache)
        ref = cache.runs()[0].ref
        first = series_view(cache, ref, "loss", -np.inf, np.inf, 600)
        assert first is None and cache.wanted_count() >= 1
        seen = []  # the view's level after each reply of the poll

        def progress(_step) -> None:
            view = series_view(cache, ref, "loss", -np.inf, np.inf, 600)
            seen.append(None if view is None else view.level)

        source.poll(cache, progress)
        now = series_view(cache, ref, "loss", -np.inf, np.inf, 600)
        if steps / 600 > buckets.RAW_PER_PIXEL * FINE_PER_PIXEL:
            # Fine: level 1 and the fine tiles asked for at once, level 1 in a reply of its own
            # first (drawn while the host folds the fine ones), the fine tiles in the same poll.
            assert seen[0] == 1 and seen[-1] == now.level < 0
        else:
            assert seen[-1] == now.level == 0  # raw points, exact
        assert now.complete
        for pixels in (300, 600, 1_100):
            drawn(cache, source, ref, "loss", pixels)
            _view_checks(cache, ref, "loss", pixels, np.arange(steps), values)
        assert assert_cache_matches_store(cache, engine, "local", str(path)) == 1
    finally:
        source.close()
        engine.dispose()


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_a_live_run_growing_through_the_gap_stays_exact_on_screen(tmp_path):
    """A run logging while a 600-pixel chart shows it: from 2,000 steps (3 a pixel, raw) to
    80,000 (133 a pixel, level 1) through the fine levels, each poll's live points folded into
    the fine tiles already cached, which stay equal to what the store holds."""
    path = tmp_path / "live.db"
    engine = new_store(path)
    run = make_run(engine, name="live", status="running")
    cache = SeriesCache()
    source = LocalSource(parse_spec(str(path)))
    rng = np.random.default_rng(1)
    logged: list[tuple[int, float]] = []
    levels = set()
    try:
        step = 0
        for size in [2_000, 600, 1_400, 3_000, 5_000, 8_000, 12_000, 16_000, 32_000]:
            chunk = [(step + i, float(rng.standard_normal())) for i in range(size)]
            if step <= 9_999 < step + size:
                chunk[9_999 - step] = (9_999, 42.0)
            step += size
            logged += chunk
            add_points(engine, run.id, {"loss": chunk})
            source.poll(cache)  # the live points, folded into what is cached
            ref = cache.runs()[0].ref
            drawn(cache, source, ref, "loss", 600)  # the tiles the chart asks for
            steps = np.array([s for s, _ in logged])
            values = np.array([v for _, v in logged])
            _view_checks(cache, ref, "loss", 600, steps, values)
            levels.add(series_view(cache, ref, "loss", -np.inf, np.inf, 600).level)
            assert assert_cache_matches_store(cache, engine, "local", str(path)) == 1
        # raw, fine levels from 16 points a pixel, level 1 from 128 steps a pixel
        assert {0, 1} <= levels and len({lv for lv in levels if lv < 0}) >= 3
    finally:
        source.close()
        engine.dispose()


@pytest.mark.postgres
def test_postgres_serves_the_same_fine_tiles(pg_store, resumed):
    _path, raw, _ids = resumed
    engine = new_store(pg_store)
    try:
        run = make_run(engine, name="long")
        add_points(
            engine, run.id, {"loss": [(int(s), float(v), float(w)) for s, w, v in raw["loss"]]}
        )
        cache = SeriesCache()
        source = open_source(parse_spec(pg_store))
        try:
            source.poll(cache)
            want_every_tile(cache, level=-3)
            ref = cache.runs()[0].ref
            replies = []
            source.poll(cache, replies.append)
            # Watched (the window), the raw tiles come first (a poll's reply comes whole): the
            # fine ones, which read every raw point in view, stay wanted for the next poll.
            assert replies and not [t for t in cache.tiles_of(ref, "loss") if t.level == -3]
            assert cache.wanted_count() == 3
            source.poll(cache)
            label = parse_spec(pg_store).label
            assert assert_cache_matches_store(cache, engine, label, label) == 1
            fine = [t for t in cache.tiles_of(ref, "loss") if t.level == -3]
            assert len(fine) == 3 and sum(len(t) for t in fine) == 20_500 // 8 + 1
            want = brute([tuple(p) for p in raw["loss"]], 3)
            got = [t.cols["vmax"] for t in fine]
            assert np.nanmax(np.concatenate(got)) == max(
                a[5] for a in want.values() if a[5] is not None
            )
            # Headless (a snapshot: nobody watches the progress), one poll brings them all.
            headless, once = SeriesCache(), open_source(parse_spec(pg_store))
            try:
                once.poll(headless)
                want_every_tile(headless, level=-3)
                once.poll(headless)
                assert headless.wanted_count() == 0
                assert len([t for t in headless.tiles_of(ref, "loss") if t.level == -3]) == 3
            finally:
                once.close()
        finally:
            source.close()
    finally:
        engine.dispose()


def test_a_page_past_its_fine_budget_draws_level_1_and_says_so(tmp_path, monkeypatch):
    """Fine views make the host read every raw point in view: a page whose fine views would
    read more than its host's budget (FINE_POINTS_PER_PAGE, by what the host folds with)
    draws them from level 1 (its note names the width and says it is coarser than pixels),
    and one within it from fine buckets."""
    from resplot.data import views
    from resplot.data.state import ViewState
    from resplot.draw import charts

    path = tmp_path / "budget.db"
    engine = new_store(path)
    rng = np.random.default_rng(2)
    for r in range(2):
        loss = rng.standard_normal(30_000)
        make_run(engine, name=f"r{r}", points={"loss": list(enumerate(loss.tolist()))})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    try:
        source.poll(cache)
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="custom", smoothing=0.0, custom_keys=["loss"])
        got = {}
        for budget in (50_000, 70_000):  # the page's fine views hold 60,000 points
            monkeypatch.setattr(
                views, "FINE_POINTS_PER_PAGE", {"numpy": budget, "builtins": budget}
            )
            page = charts.render(cache, state, refs, size=(6, 3), fetch=lambda: source.poll(cache))
            got[budget] = (
                {t.view.level for t in page.tracks[0].values()},
                page._notes[0].get_text(),
            )
        assert got[50_000][0] == {1}
        assert "min–max per 128 steps, coarser than pixels" in got[50_000][1]
        assert all(level < 0 for level in got[70_000][0])
    finally:
        source.close()
