"""The spines drawn together (resplot/draw/spines.py) are matplotlib's own pixels."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from resplot.draw.spines import draw_spines, plain


def _figure(setup):
    fig = Figure(figsize=(4, 3), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(111)
    ax.plot([1, 2, 3], [1, 10, 100])
    setup(ax)
    return fig, ax


def _spine_pixels(setup, ours: bool) -> np.ndarray:
    """The figure drawn without its spines, then the spines over it: by matplotlib, or by
    draw_spines."""
    fig, ax = _figure(setup)
    spines = list(ax.spines.values())
    for spine in spines:
        spine.set_animated(True)  # left out of the figure's draw
    fig.canvas.draw()
    shown = [s for s in spines if s.get_visible()]
    if ours:
        draw_spines(fig, shown)
    else:
        for spine in shown:
            fig.draw_artist(spine)
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def _log(ax):
    ax.set_yscale("log")


def _limits(ax):
    ax.set_xlim(-5.3, 7.9)  # the spines follow the view interval
    ax.set_ylim(0.37, 211.0)


def _styled(ax):
    ax.spines["left"].set_color("#d62728")
    ax.spines["top"].set_linewidth(2.3)
    ax.spines["right"].set_visible(False)
    ax.spines["bottom"].set_alpha(0.4)


def _bounded(ax):
    ax.spines["bottom"].set_bounds(1.5, 2.5)  # not plain: matplotlib draws it
    ax.spines["left"].set_linestyle("--")


def _none(ax):
    pass


@pytest.mark.parametrize("setup", [_none, _log, _limits, _styled, _bounded])
def test_spines_drawn_together_are_matplotlibs_pixels(setup):
    theirs = _spine_pixels(setup, ours=False)
    ours = _spine_pixels(setup, ours=True)
    assert int(np.any(ours != theirs, axis=2).sum()) == 0
    # and the spines were drawn: a figure without them differs
    bare_fig, bare_ax = _figure(setup)
    for spine in bare_ax.spines.values():
        spine.set_visible(False)
    bare_fig.canvas.draw()
    bare = np.asarray(bare_fig.canvas.buffer_rgba())
    assert int(np.any(ours != bare, axis=2).sum()) > 100


def test_plain_spines_only_take_the_shared_path():
    _fig, ax = _figure(_bounded)
    assert plain(ax.spines["top"]) and plain(ax.spines["right"])
    assert not plain(ax.spines["bottom"])  # bounds
    assert not plain(ax.spines["left"])  # dashed


def test_other_renderers_get_matplotlibs_own_draw(tmp_path):
    fig, ax = _figure(_none)
    fig.savefig(tmp_path / "a.svg")  # an SVG renderer behind the canvas while saving
    drawn = []
    for spine in ax.spines.values():
        spine.draw = lambda renderer, s=spine: drawn.append(s)
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    FigureCanvasSVG(fig)
    fig.canvas.get_renderer = lambda: _SvgLike()
    draw_spines(fig, list(ax.spines.values()))
    assert len(drawn) == 4


class _SvgLike:
    """A renderer that is not Agg's."""
