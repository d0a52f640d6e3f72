"""A chart's axes hold no Tick artists (resplot/draw/axis_art.py, drop_tick_artists): AxisArt
draws the ticks, and the major and minor Tick matplotlib made for each axis at the axes' set-up
(five artists each) were half of the objects a chart held for the cyclic collector to
traverse."""

from __future__ import annotations

import gc

import numpy as np
from matplotlib.axis import Tick
from matplotlib.backends.backend_agg import FigureCanvasAgg

from resplot.data.state import ViewState
from resplot.draw import axes_setup, axis_art, chart_layout
from resplot.draw.charts import render
from tests.fixtures.polled import polled
from tests.fixtures.stores import make_run, new_store


def _pixels(page) -> np.ndarray:
    canvas = FigureCanvasAgg(page.figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def _ticks_of(figure) -> list[Tick]:
    axes = {id(ax) for ax in figure.axes}
    return [o for o in gc.get_objects() if isinstance(o, Tick) and id(o.axes) in axes]


def test_a_page_holds_no_tick_artists_and_draws_what_it_drew_with_them(tmp_path, monkeypatch):
    path = tmp_path / "ticks.db"
    engine = new_store(path)
    make_run(
        engine,
        name="a",
        points={
            "train/loss": [(s, 3.0 - s / 100) for s in range(100)],
            "valid/loss": [(s, 2.5 + (s % 7) / 10) for s in range(0, 100, 10)],
        },
    )
    engine.dispose()
    with polled(path) as (cache, source):
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page="all")
        page = render(cache, state, refs, size=(12.8, 8), fetch=lambda: source.poll(cache))
        drawn = _pixels(page)
        kinds = {s.kind for s in page.specs}
        assert {"section", "line"} <= kinds  # section cards and charts, and the x anchor
        assert len(page.figure.axes) == len(page.axes) + 1
        assert _ticks_of(page.figure) == []
        for ax in page.figure.axes:
            assert "majorTicks" not in vars(ax.xaxis) and "majorTicks" not in vars(ax.yaxis)

        # The same page with matplotlib's Tick artists kept: the same pixels.
        for module in (axis_art, axes_setup, chart_layout):
            monkeypatch.setattr(module, "drop_tick_artists", lambda ax: None)
        kept = render(cache, state, refs, size=(12.8, 8), fetch=lambda: source.poll(cache))
        assert len(_ticks_of(kept.figure)) >= 4 * len(kept.figure.axes)
        assert np.array_equal(_pixels(kept), drawn)

        # Whatever asks for a tick again gets one, styled as the axes were set up.
        chart = page.chart_axes()[0]
        tick = chart.yaxis.get_major_ticks()[0]
        assert tick.label1.get_fontsize() == 7
