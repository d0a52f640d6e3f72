"""Debiased EMA smoothing (TensorBoard's formula, weighted by step distance); no Qt."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.smoothing import Smoother, smooth, tensorboard_reference


def test_matches_a_hand_computed_tensorboard_example():
    # w = 0.5, values 1, 2, 3 at steps 0, 1, 2:
    #   last = 0.5 → debias 1 - 0.5   = 0.5  → 1.0
    #   last = 1.25 → debias 1 - 0.25 = 0.75 → 1.6667
    #   last = 2.125 → debias 1 - 0.125 = 0.875 → 2.4286
    out = smooth(np.array([0, 1, 2]), np.array([1.0, 2.0, 3.0]), 0.5)
    np.testing.assert_allclose(out, [1.0, 1.25 / 0.75, 2.125 / 0.875])


@pytest.mark.parametrize("weight", [0.0, 0.1, 0.6, 0.9, 0.99, 0.999])
def test_evenly_spaced_steps_equal_tensorboard_loop(weight):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(3000).cumsum()
    steps = np.arange(3000) * 10  # logged every 10 steps: spacing is the unit
    expected = tensorboard_reference(list(values), weight)
    np.testing.assert_allclose(smooth(steps, values, weight), expected, rtol=1e-9, atol=1e-9)


def test_long_series_with_strong_decay_stays_finite():
    values = np.random.default_rng(1).standard_normal(200_000)
    out = smooth(np.arange(len(values)), values, 0.05)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[:500], tensorboard_reference(list(values[:500]), 0.05))


def test_first_point_is_not_pulled_toward_zero():
    out = smooth(np.arange(3), np.array([100.0, 100.0, 100.0]), 0.99)
    np.testing.assert_allclose(out, [100.0, 100.0, 100.0])


def test_step_gap_decays_by_the_distance():
    # Logged every step, then a gap of 10 steps: across the gap the history weighs 0.5**10
    # instead of 0.5, so the new value dominates. Hand loop with a_i = w ** (Δstep / 1):
    steps = np.array([*range(10), 19])
    values = np.array([0.0] * 10 + [1.0])
    last = total = 0.0
    prev = 0
    for s, v in zip(steps, values, strict=True):
        a = 0.5 ** max(s - prev, 1)
        last, total, prev = a * last + (1 - a) * v, a * total + (1 - a), s
    out = smooth(steps, values, 0.5)
    assert out[-1] == pytest.approx(last / total)
    assert out[-1] > 0.99  # TensorBoard's index EMA gives 0.5 here


@pytest.mark.parametrize("weight", [0.1, 0.6, 0.99])
def test_gaps_that_forget_between_runs_that_remember_equal_the_hand_loop(weight):
    """The EMA in pieces: runs of points that remember (one block, or several where their
    decay passes exp(-600)) between points after a gap long enough to forget the past."""
    rng = np.random.default_rng(3)
    gaps = rng.choice([1, 1, 1, 1, 3, 400, 20_000], size=4000)
    steps = np.cumsum(gaps)
    values = rng.standard_normal(len(steps)).cumsum()
    last = total = 0.0
    prev = steps[0] - 1
    expected = []
    for s, v in zip(steps, values, strict=True):
        a = weight ** max(s - prev, 1)
        last, total, prev = a * last + (1 - a) * v, a * total + (1 - a), s
        expected.append(last / total)
    np.testing.assert_allclose(smooth(steps, values, weight, 1.0), expected, rtol=1e-9, atol=1e-12)


def test_nan_and_inf_pass_through_and_do_not_poison_the_ema():
    values = np.array([1.0, 2.0, np.nan, np.inf, -np.inf, 3.0])
    steps = np.array([0, 1, 2, 3, 4, 5])
    out = smooth(steps, values, 0.6)
    assert np.isnan(out[2]) and out[3] == np.inf and out[4] == -np.inf
    assert np.isfinite(out[[0, 1, 5]]).all()
    clean = smooth(np.array([0, 1, 5]), np.array([1.0, 2.0, 3.0]), 0.6)
    np.testing.assert_allclose(out[[0, 1, 5]], clean)


def test_incremental_updates_equal_one_pass():
    rng = np.random.default_rng(2)
    values = rng.standard_normal(5000)
    values[[7, 700]] = np.nan
    steps = np.arange(5000) * 3
    smoother = Smoother(0.8)
    for n in (1, 2, 15, 16, 17, 999, 1000, 4999, 5000):
        out = smoother.update(steps[:n], values[:n])
        assert len(out) == n
    np.testing.assert_allclose(out, smooth(steps, values, 0.8), rtol=1e-9, equal_nan=True)


def test_bad_weight_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        smooth(np.arange(3), np.ones(3), 1.0)


# -- smoothing defined in steps, on charts ------------------------------------------------------


def _chart_tracks(cache, source, refs, custom_keys, weight, xlim=None, size=(10, 4)):
    """A custom page of `custom_keys` for `refs`, drawn headless: {(run name, key): Track}."""
    from resplot.data.state import ViewState
    from resplot.draw.charts import render

    state = ViewState(page="custom", smoothing=weight, custom_keys=custom_keys)
    page = render(cache, state, refs, size=size, fetch=lambda: source.poll(cache))
    if xlim is not None:
        page.follow = False
        page.axes[0].set_xlim(*xlim)
        for _ in range(4):
            page.refresh(cache, state, refs)
            source.poll(cache)
        page.refresh(cache, state, refs)
    names = {r.ref: r.name for r in cache.runs()}
    out = {}
    for tracks in page.tracks:
        for item, track in tracks.items():
            out[(names[item.ref], item.key)] = track
    return page, out


@pytest.fixture(scope="module")
def smoothing_store(tmp_path_factory):
    from resplot.data.cache import SeriesCache
    from resplot.sources import open_source, parse_spec
    from tests.fixtures.stores import make_run, new_store

    path = tmp_path_factory.mktemp("smooth") / "reslog.db"
    engine = new_store(path)
    rng = np.random.default_rng(3)
    loss = 3.0 + np.cumsum(rng.standard_normal(100_000)) * 0.01 + rng.standard_normal(100_000)
    points = {
        "train/loss": list(enumerate(loss.tolist())),
        "train/lr": [(s, 1e-3 * (s % 500)) for s in range(0, 20_000)],
        "sys/gpu0/util": [(s, float(s % 7)) for s in range(0, 20_000, 4)],
        "valid/loss": [(s, float(loss[s])) for s in range(0, 20_000, 1000)],
    }
    make_run(engine, name="long", points=points)
    make_run(engine, name="short", points={"train/loss": points["train/loss"][:2_000]})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    yield cache, source, loss
    source.close()


def test_the_same_weight_smooths_the_same_curve_at_every_zoom(smoothing_store):
    """Raw points at two zooms: the zoomed EMA starts before its view, so it is the whole
    run's EMA; buckets of 16 steps (the whole 100,000-step run) against the raw points of a
    1 % zoom: with a weight that spans ~1,000 steps, the same curve within 1 %."""
    cache, source, _loss = smoothing_store
    refs = [r.ref for r in cache.runs() if r.name == "long"]
    for weight in (0.6, 0.99):
        _p, near = _chart_tracks(cache, source, refs, ["train/loss"], weight, xlim=(20_000, 21_000))
        _p, nearer = _chart_tracks(
            cache, source, refs, ["train/loss"], weight, xlim=(20_400, 20_600)
        )
        a, b = near[("long", "train/loss")], nearer[("long", "train/loss")]
        assert a.view.level == b.view.level == 0
        common = np.intersect1d(a.view.mid_steps, b.view.mid_steps)
        sa = a.smoothed[np.searchsorted(a.view.mid_steps, common)]
        sb = b.smoothed[np.searchsorted(b.view.mid_steps, common)]
        np.testing.assert_allclose(sa, sb, rtol=2e-4)
    _p, whole = _chart_tracks(cache, source, refs, ["train/loss"], 0.999)
    _p, zoom = _chart_tracks(cache, source, refs, ["train/loss"], 0.999, xlim=(50_000, 51_000))
    w, z = whole[("long", "train/loss")], zoom[("long", "train/loss")]
    assert w.view.level != 0 and w.view.width >= 16 and z.view.level == 0
    at = np.searchsorted(w.view.mid_steps, z.view.mid_steps[100:-100])
    np.testing.assert_allclose(z.smoothed[100:-100], w.smoothed[at], rtol=0.01)


def test_runs_of_different_lengths_smooth_alike(smoothing_store):
    cache, source, _loss = smoothing_store
    refs = [r.ref for r in cache.runs()]
    _p, tracks = _chart_tracks(cache, source, refs, ["train/loss"], 0.9, xlim=(0, 1_999))
    long, short = tracks[("long", "train/loss")], tracks[("short", "train/loss")]
    assert long.view.level == short.view.level == 0
    n = len(short.smoothed)
    np.testing.assert_allclose(long.smoothed[:n], short.smoothed, rtol=1e-12)


def test_lr_system_and_validation_keys_are_never_smoothed(smoothing_store):
    cache, source, _loss = smoothing_store
    refs = [r.ref for r in cache.runs() if r.name == "long"]
    page, tracks = _chart_tracks(cache, source, refs, ["*"], 0.9)
    smoothed = {key for (_run, key), t in tracks.items() if t.smoothed is not None}
    assert smoothed == {"train/loss"}
    notes = {s.title: note.get_text() for s, note in zip(page.specs, page._notes, strict=True)}
    width = tracks[("long", "train/loss")].view.width
    assert width > 1 and f"smoothed {width:,}-step means" in notes["train/loss"]
    assert f"min–max per {width:,} steps" in notes["train/loss"]  # fine or stored buckets
    assert "smoothed" not in notes["train/lr"] and "smoothed" not in notes["sys/gpu0/util"]
    near, _tracks = _chart_tracks(cache, source, refs, ["train/loss"], 0.9, xlim=(100, 600))
    assert "smoothed raw points" in near._notes[0].get_text()


def test_warmup_covers_what_still_weighs():
    from resplot.data.smoothing import WARMUP_LEFT, smoothable, unit_of, warmup_steps

    assert warmup_steps(0.0, 1.0) == 0
    for weight, unit in ((0.6, 1.0), (0.99, 4.0), (0.999, 1.0)):
        steps = warmup_steps(weight, unit)
        assert weight ** (steps / unit) <= WARMUP_LEFT < weight ** ((steps - unit) / unit)
    agg = [0] * 16
    agg[0], agg[9], agg[10] = 2_500, 0, 9_996  # n, step_lo, step_hi: every 4th step
    assert unit_of(tuple(agg)) == 4.0
    assert not any(
        map(
            smoothable,
            [
                "lr",
                "train/lr",
                "lr-AdamW",
                "sys/gpu0/temp_c",
                "valid/loss",
                "val_loss",
                "eval/ppl",
                "test/acc",
            ],
        )
    )
    assert all(map(smoothable, ["train/loss", "loss", "train/grad_norm", "interval"]))


@pytest.fixture(scope="module")
def decay_store(tmp_path_factory):
    """A loss as training logs it: a decay from 8.4 to 2.4 over the first ~5,000 of 40,960
    steps, with noise of 0.06."""
    from resplot.data.cache import SeriesCache
    from resplot.sources import open_source, parse_spec
    from tests.fixtures.stores import make_run, new_store

    path = tmp_path_factory.mktemp("decay") / "reslog.db"
    engine = new_store(path)
    steps = np.arange(40_960)
    rng = np.random.default_rng(1)
    loss = 2.4 + 6.0 * np.exp(-steps / 1600) + rng.normal(0, 0.06, len(steps))
    make_run(engine, name="decay", points={"train/loss": list(enumerate(loss.tolist()))})
    engine.dispose()
    cache = SeriesCache()
    source = open_source(parse_spec(str(path)))
    source.poll(cache)
    yield cache, source, loss
    source.close()


@pytest.mark.parametrize("weight", [0.6, 0.9, 0.99, 0.999])
def test_zoomed_out_a_bucket_is_smoothed_to_what_its_points_give_on_average(decay_store, weight):
    """Smoothing is defined in steps; zoomed out a chart has each bucket's mean, not its
    points, so what it can draw of the curve the points give is that curve averaged over each
    bucket, at the bucket's middle. Before, the means were smoothed as points and each drawn
    with the EMA's state at the bucket's end, half a bucket late: over 128-step buckets of a
    decaying loss 0.010, 0.042, 0.22 and 0.51 of the noise off the raw curve's bucket
    averages (RMS, weights 0.6, 0.9, 0.99, 0.999); now 0.008, 0.019, 0.022, 0.004. (Point by
    point a weight of 0.6, ~2.5 steps, leaves half the noise in the raw curve, which no
    128-step bucket can draw: the faint band under the line shows that spread.) The chart's
    zoomed-out line is this curve."""
    from resplot.data.smoothing import smooth_buckets, unit_of
    from resplot.data.views import series_view

    cache, source, loss = decay_store
    ref = cache.runs()[0].ref
    view = series_view(cache, ref, "train/loss", -np.inf, np.inf, 1, level=1)
    if view is None or not view.complete:
        source.poll(cache)
        view = series_view(cache, ref, "train/loss", -np.inf, np.inf, 1, level=1)
    assert view is not None and view.complete and view.width == 128
    unit = unit_of(cache.summary(ref, "train/loss").agg)
    got = smooth_buckets(view.first_steps, view.last_steps, view.means, weight, unit)
    full = smooth(np.arange(len(loss)), loss, weight, 1.0)
    spans = zip(view.first_steps, view.last_steps, strict=True)
    averaged = np.array([full[a : b + 1].mean() for a, b in spans])
    noise = 0.06
    gap = np.sqrt(np.mean((got - averaged)[10:] ** 2))  # past the EMA's start
    assert gap < 0.03 * noise, (weight, gap / noise)
    # The chart draws it: a zoomed-out track's smoothed line is this curve at its buckets.
    _p, whole = _chart_tracks(cache, source, [ref], ["train/loss"], weight)
    w = whole[("decay", "train/loss")]
    assert w.view.level != 0
    expected = smooth_buckets(w.view.first_steps, w.view.last_steps, w.view.means, weight, unit)
    np.testing.assert_allclose(w.smoothed, expected, rtol=1e-12)
