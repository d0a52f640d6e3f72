"""A chart's axes drawn by AxisArt (resplot/draw/axis_art.py): the pixels of matplotlib's own
axis drawing, none of matplotlib's per-tick artists drawn, and the same extents."""

from __future__ import annotations

import datetime as dt
import io

import matplotlib
import numpy as np
import pytest
from matplotlib.axis import Tick
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

from resplot.data.pages import PanelSpec
from resplot.draw.axes_setup import dress
from resplot.draw.axis_art import AxisArt
from resplot.draw.text_stamps import StampRenderer

WALL_T0 = date2num(dt.datetime(2026, 11, 27, 10))


def _chart(spec: PanelSpec, xlim, ylim, xlabel: str = "", wall: bool = False):
    fig = Figure(figsize=(6, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(111)
    dress(ax, spec)
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=8)
    if wall:
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    return fig, ax


def _matplotlibs_own(ax) -> None:
    """The chart as matplotlib would draw it: its axes on, the art gone."""
    AxisArt.of(ax).remove()
    ax.xaxis.set_visible(True)
    ax.yaxis.set_visible(True)


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


CASES = {
    "linear, both labels": (PanelSpec("lr", "lr"), (1000, 31000), (0, 3e-4), "step", False),
    "log, minor ticks": (PanelSpec("loss", "loss", log_y=True), (0, 200000), (2.2, 4.9), "", False),
    "log, two decades": (PanelSpec("‖g‖", "‖g‖", log_y=True), (0, 5000), (0.5, 30), "", False),
    "percent": (PanelSpec("mfu", "MFU", percent=1.0), (0, 5000), (0.1, 0.45), "", False),
    "named y ticks": (PanelSpec("throttle", "", kind="throttle"), (0, 5000), (0, 1), "", False),
    "wall, minutes (offset)": (PanelSpec("w", "tokens/s"), (0, 0.01), (1.5e6, 2.2e6), "t", True),
    "wall, days": (PanelSpec("w", "tokens/s"), (0, 3), (1.5e6, 2.2e6), "wall time", True),
    "wall, weeks": (PanelSpec("w", "tokens/s"), (0, 40), (1.5e6, 2.2e6), "", True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_art_draws_the_pixels_of_matplotlibs_own_axes(case):
    spec, xlim, ylim, xlabel, wall = CASES[case]
    if wall:
        xlim = (WALL_T0 + xlim[0], WALL_T0 + xlim[1])
    fig, ax = _chart(spec, xlim, ylim, xlabel, wall)
    ours = _pixels(fig)
    fig2, ax2 = _chart(spec, xlim, ylim, xlabel, wall)
    _matplotlibs_own(ax2)
    theirs = _pixels(fig2)
    apart = int(np.any(ours != theirs, axis=2).sum())
    assert apart == 0, f"{case}: {apart} pixels apart"
    # and it drew something: tick labels left of and under the axes
    assert AxisArt.of(ax).ticks["x"].shown and AxisArt.of(ax).ticks["y"].shown


def test_the_art_draws_no_tick_artist_of_matplotlibs(monkeypatch):
    drawn = []
    original = Tick.draw
    monkeypatch.setattr(Tick, "draw", lambda self, r: (drawn.append(self), original(self, r)))
    fig, _ax = _chart(PanelSpec("lr", "lr"), (0, 30000), (0, 3e-4), "step")
    _pixels(fig)
    assert drawn == []
    fig2, ax2 = _chart(PanelSpec("lr", "lr"), (0, 30000), (0, 3e-4), "step")
    _matplotlibs_own(ax2)
    _pixels(fig2)
    assert len(drawn) > 10  # the count above can fail: matplotlib's own draw is counted


def test_mathtext_labels_are_laid_out_by_matplotlib():
    def chart(own: bool):
        fig, ax = _chart(PanelSpec("x", "x"), (0, 3), (0, 1))
        ax.yaxis.set_major_locator(FixedLocator([0.2, 0.5, 0.8]))
        ax.yaxis.set_major_formatter(FixedFormatter([r"$10^{-3}$", "plain", r"$\alpha$"]))
        if own:
            _matplotlibs_own(ax)
        return fig

    assert np.array_equal(_pixels(chart(False)), _pixels(chart(True)))


def test_the_window_s_renderer_draws_the_same_labels_as_matplotlib_through_it():
    """StampRenderer (the window's) places each string from its stamp: the art's strings
    land where the Texts of matplotlib's own axes land through that renderer."""

    class StampCanvas(FigureCanvasAgg):
        def get_renderer(self):
            w, h = self.figure.bbox.size.astype(int)
            key = (w, h, self.figure.dpi)
            if getattr(self, "_key", None) != key:
                self.renderer, self._key = StampRenderer(w, h, self.figure.dpi), key
            return self.renderer

    out = []
    for own in (False, True):
        fig, ax = _chart(PanelSpec("loss", "loss", log_y=True), (0, 9000), (2.5, 6.0), "step")
        StampCanvas(fig)
        if own:
            _matplotlibs_own(ax)
        out.append(_pixels(fig))
    assert np.array_equal(*out)


def test_its_extent_is_the_one_of_matplotlibs_axes():
    fig, ax = _chart(PanelSpec("lr", "lr"), (1000, 31000), (0, 3e-4), "step")
    _pixels(fig)
    renderer = fig.canvas.get_renderer()
    ours = AxisArt.of(ax).get_window_extent(renderer)
    labels = AxisArt.of(ax).x_labels_extent(renderer)
    fig2, ax2 = _chart(PanelSpec("lr", "lr"), (1000, 31000), (0, 3e-4), "step")
    _matplotlibs_own(ax2)
    _pixels(fig2)
    r2 = fig2.canvas.get_renderer()
    theirs = ax2.get_tightbbox(r2)
    # (matplotlib's adds the title, which the art does not draw)
    for a, b in ((ours.x0, theirs.x0), (ours.y0, theirs.y0), (ours.x1, theirs.x1)):
        assert a == pytest.approx(b, abs=1.0)
    x_theirs = ax2.xaxis.get_tightbbox(r2)
    assert labels.y0 == pytest.approx(x_theirs.y0, abs=1.0)
    assert labels.y1 == pytest.approx(x_theirs.y1, abs=1.0)


def test_an_axis_without_ticks_or_with_odd_limits_draws_without_error():
    fig, ax = _chart(PanelSpec("lr", "lr"), (0, 10), (0, 1), "step")
    ax.yaxis.set_major_locator(NullLocator())
    _pixels(fig)
    assert AxisArt.of(ax).ticks["y"].shown == []
    assert len(AxisArt.of(ax).ticks["x"].shown) > 2
    ax.set_xlim(5, 5 + 1e-12)  # a tiny span: matplotlib warns nothing, the art neither
    _pixels(fig)
    ax.set_yscale("log")
    ax.set_ylim(1e-3, 1e3)
    _pixels(fig)
    assert len(AxisArt.of(ax).ticks["y"].shown) >= 3


def test_an_svg_has_the_tick_labels_as_matplotlib_lays_them_out():
    fig, _ax = _chart(PanelSpec("lr", "lr"), (1000, 31000), (0, 3e-4), "step")
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    for label in ("10k", "20k", "30k", "1.5e-4", "step", "lr"):
        assert f">{label}<" in svg


def test_charts_sharing_x_work_out_its_ticks_once_and_a_change_works_them_out_again():
    """A page's charts share one x ticker (sharex): the first chart drawn works out its ticks,
    the others take them, the pixels those of each working them out itself; a change of
    limits or formatter works them out anew."""
    import gc

    from matplotlib.ticker import PercentFormatter

    from resplot.draw import axis_art

    def page(share: bool):
        fig = Figure(figsize=(6, 6), dpi=100)
        FigureCanvasAgg(fig)
        top = fig.add_subplot(3, 1, 1)
        axes = [top] + [fig.add_subplot(3, 1, i, sharex=top if share else None) for i in (2, 3)]
        for ax in axes:
            dress(ax, PanelSpec("lr", "lr"))
            ax.set_xlim(1234.5, 98765.4)
            ax.set_ylim(0, 3e-4)
        return fig, axes

    fig, axes = page(share=True)
    locator = axes[0].xaxis.get_major_locator()
    calls = []
    own = type(locator).__call__

    def counted(self):
        calls.append(self)
        return own(self)

    type(locator).__call__ = counted
    try:
        shared = _pixels(fig)
        assert calls.count(locator) == 1  # the first chart's
        alone = _pixels(page(share=False)[0])
        assert np.array_equal(shared, alone)
        labels = [AxisArt.of(ax).ticks["x"].shown for ax in axes]
        assert all(len(b) == len(labels[0]) > 3 for b in labels)
        axes[0].set_xlim(0, 10)  # (every chart's: shared)
        _pixels(fig)
        assert calls.count(locator) == 2
        _major, text, _minor = AxisArt.of(axes[1]).ticks["x"].locations()
        assert text[-1] == "10"
        axes[0].xaxis.set_major_formatter(PercentFormatter(10))
        _major, text, _minor = AxisArt.of(axes[2]).ticks["x"].locations()
        assert text[-1] == "100%"  # not the last formatter's
    finally:
        type(locator).__call__ = own
    # The ticker's entry goes with its page.
    del fig, axes, shared, labels, locator
    gc.collect()
    before = len(axis_art._LAST_TICKS)
    fig, _axes = page(share=True)
    _pixels(fig)
    assert len(axis_art._LAST_TICKS) == before + 4  # x, and each chart's y
    del fig, _axes
    gc.collect()
    assert len(axis_art._LAST_TICKS) == before
