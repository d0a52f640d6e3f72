"""A page's budget of fine views comes from what the host folds with (the agent's `hello`,
"fold"): with numpy a 60-run x 20,000-step sweep is drawn from fine buckets, at least one exact
bucket a pixel on every chart; an agent without numpy (RESLOG_AGENT_NUMPY=0 on the host, or an
agent from before `hello` said) keeps the builtins' budget and says on the chart that it draws
fewer buckets than pixels. Real agents (subprocesses, the archive remote hosts get) on a real
store written through the writer's rollup keeper."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.cache import SeriesCache
from resplot.data.state import ViewState
from resplot.data.views import FINE_POINTS_PER_PAGE, fine_budget
from resplot.draw import charts
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from schema.store import buckets
from tests.fixtures.stores import make_run, new_store

RUNS, STEPS, KEYS = 60, 20_000, ("loss", "grad_norm")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """60 runs x 20,000 steps x 2 keys (2.4M points, over the builtins' budget of 1M and
    within numpy's), each series with a one-step spike and dip; {(run name, key): values}."""
    path = tmp_path_factory.mktemp("sweep") / "sweep.db"
    engine = new_store(path)
    rng = np.random.default_rng(30)
    logged = {}
    steps = list(range(STEPS))
    for r in range(RUNS):
        points = {}
        for k, key in enumerate(KEYS):
            values = 2.0 + k + np.cumsum(rng.standard_normal(STEPS)) * 0.01
            values[rng.integers(STEPS)] += 50.0
            values[rng.integers(STEPS)] -= 50.0
            logged[(f"r{r:02d}", key)] = values
            points[key] = list(zip(steps, values.tolist(), strict=True))
        make_run(engine, name=f"r{r:02d}", points=points)
    engine.dispose()
    return path, logged


def _page(path, monkeypatch, numpy: bool, *, drop_fold: bool = False):
    monkeypatch.setenv("RESLOG_AGENT_NUMPY", "1" if numpy else "0")
    cache = SeriesCache()
    source = LocalSource(parse_spec(str(path)))
    try:
        source.connect()
        if drop_fold:  # an agent from before `hello` said how it folds
            source.client.info.pop("fold", None)
        source.poll(cache)
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="custom", smoothing=0.0, custom_keys=list(KEYS))
        page = charts.render(cache, state, refs, size=(12.8, 8.0), fetch=lambda: source.poll(cache))
    finally:
        source.close()
    return cache, page


def _raw_agg(values: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """Per bucket [lo, hi] (steps = indices here): min, max and the last value."""
    return np.minimum.reduceat(values, lo), np.maximum.reduceat(values, lo), values[hi]


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_a_60_run_sweep_draws_an_exact_bucket_a_pixel_on_every_chart(sweep, monkeypatch):
    path, logged = sweep
    cache, page = _page(path, monkeypatch, numpy=True)
    source = cache.runs()[0].ref.source
    assert cache.fold(source) == "numpy" and fine_budget(cache, source) >= 20 * 1_000_000
    names = {r.ref: r.name for r in cache.runs()}
    charted = 0
    for i, tracks in enumerate(page.tracks):
        pixels = page._pixels(i)
        assert len(tracks) == RUNS
        for track in tracks.values():
            view = track.view
            assert view is not None and view.complete
            assert buckets.is_fine(view.level)  # before: level 1, 157 buckets of 128 steps
            values = logged[(names[track.item.ref], track.item.key)]
            lo, hi = view.first_steps, view.last_steps
            assert len(lo) >= pixels  # a bucket a pixel at least, over the whole run
            assert lo[0] == 0 and hi[-1] == STEPS - 1 and (lo[1:] == hi[:-1] + 1).all()
            # Each bucket is exact: the extremes and last point of its raw points.
            vmin, vmax, last = _raw_agg(values, lo, hi)
            tiles = [
                t for t in cache.tiles_of(track.item.ref, track.item.key) if t.level == view.level
            ]
            cols = {
                n: np.concatenate([t.cols[n] for t in sorted(tiles, key=lambda t: t.index)])
                for n in ("vmin", "vmax", "last", "step_lo")
            }
            assert (cols["step_lo"] == lo).all()
            assert (cols["vmin"] == vmin).all() and (cols["vmax"] == vmax).all()
            assert (cols["last"] == last).all()
            drawn = view.values[np.isfinite(view.values)]
            assert drawn.max() == values.max() and drawn.min() == values.min()
            charted += 1
        note = page._notes[i].get_text()
        assert "coarser than pixels" not in note and "min–max per" in note
    assert charted == RUNS * len(KEYS)


@pytest.mark.slow
def test_an_agent_without_numpy_keeps_the_old_budget_and_says_so(sweep, monkeypatch):
    path, _logged = sweep
    for drop_fold in (False, True):  # RESLOG_AGENT_NUMPY=0; an agent that does not say
        cache, page = _page(path, monkeypatch, numpy=drop_fold, drop_fold=drop_fold)
        source = cache.runs()[0].ref.source
        assert cache.fold(source) == "builtins"
        assert fine_budget(cache, source) == FINE_POINTS_PER_PAGE["builtins"] == 1_000_000
        for i, tracks in enumerate(page.tracks):
            assert {t.view.level for t in tracks.values()} == {1}, drop_fold
            assert len(next(iter(tracks.values())).view.mid_steps) < page._pixels(i)
            note = page._notes[i].get_text()
            assert "min–max per 128 steps, coarser than pixels" in note, note


@pytest.mark.integration
def test_hello_says_how_the_host_folds(tmp_path, monkeypatch):
    """`fold` in the agent's hello: numpy where the interpreter has it in its site-packages
    (the agent runs under -I -S: they are not on its path until hello adds them), the builtins
    under RESLOG_AGENT_NUMPY=0 and under a Python 3.8 without numpy (this machine's pyenv one
    has none; probed, so a 3.8 with numpy is expected to say numpy)."""
    import subprocess

    from tests.reslog.agent.test_agent import _old_python

    path = tmp_path / "s.db"
    new_store(path).dispose()
    old = _old_python()
    has_numpy = subprocess.run([old, "-c", "import numpy"], capture_output=True).returncode == 0
    cases = [(None, "1", "numpy"), (None, "0", "builtins")]
    cases += [(old, "1", "numpy" if has_numpy else "builtins"), (old, "0", "builtins")]
    for python, env, want in cases:
        monkeypatch.setenv("RESLOG_AGENT_NUMPY", env)
        source = LocalSource(parse_spec(str(path)), python=python)
        try:
            info = source.connect().info
            assert info["fold"] == want, (python, env, info)
            cache = SeriesCache()
            source.poll(cache)
            assert cache.fold(source.label) == want
        finally:
            source.close()
