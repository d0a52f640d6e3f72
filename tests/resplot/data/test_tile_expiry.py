"""A zoom's detail tiles that no chart has read for a while leave the cache (SeriesCache.
expire_detail, run each minute by the window): the overview tiles every page is drawn from stay,
the view in use keeps its own, and a view of the dropped range asks for them again and gets
the same points back.

A real SQLite store read through a local agent (resplot.sources.polling.Loaded).
"""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.views import series_view
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from tests.fixtures.stores import make_run, new_store

N = 60_000
PIXELS = 300


@pytest.fixture
def loaded(store_path):
    engine = new_store(store_path)
    make_run(engine, points={"loss": [(s, 2 + np.sin(s / 500)) for s in range(N)]})
    engine.dispose()
    with Loaded([parse_spec(str(store_path))]) as source:
        yield source


def _view(source, lo: float, hi: float):
    """The complete view of [lo, hi], fetching what it asks for."""
    cache = source.cache
    ref = cache.runs()[0].ref
    for _ in range(4):
        view = series_view(cache, ref, "loss", lo, hi, PIXELS)
        if view is not None and view.complete:
            return view
        source.fetch()
    raise AssertionError("the view's tiles did not come")


def test_idle_detail_tiles_leave_and_come_back_on_the_next_zoom_there(loaded):
    cache = loaded.cache
    ref = cache.runs()[0].ref
    cache.begin_view()
    whole = _view(loaded, -np.inf, np.inf)
    zoomed = _view(loaded, 30_000, 30_200)  # raw points: level 0
    assert whole.level >= 1 and zoomed.level == 0
    held = cache.tile_bytes
    changes, version = cache.changes(ref, "loss"), cache.version

    assert cache.expire_detail(idle_s=0) == 0  # the view in use keeps its tiles
    cache.begin_view()  # the next view reads only the whole range
    _view(loaded, -np.inf, np.inf)
    freed = cache.expire_detail(idle_s=3600)
    assert freed == 0  # read a moment ago
    freed = cache.expire_detail(idle_s=0)
    assert freed > 0 and cache.tile_bytes == held - freed
    assert cache.changes(ref, "loss") > changes and cache.version > version

    # The overview is drawn without asking; the zoom asks for its raw tiles again.
    assert series_view(cache, ref, "loss", -np.inf, np.inf, PIXELS).complete
    assert cache.wanted_count() == 0
    again = series_view(cache, ref, "loss", 30_000, 30_200, PIXELS)
    assert again is None or not again.complete
    assert cache.wanted_count() > 0
    again = _view(loaded, 30_000, 30_200)
    assert np.array_equal(again.steps, zoomed.steps)
    assert np.array_equal(again.values, zoomed.values)
