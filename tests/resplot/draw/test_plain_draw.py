"""A live series' tail and a series' whole line drawn through the renderer's public calls
(resplot/draw/plain_draw.py) light the pixels their artist's own draw lights, on linear and log
axes, snapped or not, faded, clipped, with a gap, longer than Line2D draws whole; an artist it
does not cover is left to matplotlib.

Real matplotlib Agg canvases: each tail drawn by its artist (`set_data`/`set_xy`, then
`draw_artist`) and by plain_draw over the same saved picture, the buffers compared.
"""

from __future__ import annotations

import io

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib import patheffects
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_svg import RendererSVG
from matplotlib.figure import Figure
from matplotlib.lines import TICKDOWN, Line2D
from matplotlib.patches import Polygon
from matplotlib.transforms import Bbox

from resplot.draw.plain_draw import PlainBand, PlainLine, draw_band, draw_line, draw_mark


def _chart(log: bool):
    figure = Figure(figsize=(6, 3), dpi=100)
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    ax.set_xlim(0, 100)
    ax.set_ylim(0.5, 4.0)
    if log:
        ax.set_yscale("log")
    canvas.draw()
    return figure, canvas, ax


def _twin(artist, ax, figure, clip_left: float | None):
    """As resplot/ui/tails.py makes a tail's twin: in the figure, clipped right of a boundary."""
    artist.set_transform(ax.transData)
    artist.set_figure(figure)
    box = ax.bbox
    left = box.x0 if clip_left is None else clip_left
    artist.set_clip_box(Bbox.from_extents(left, box.y0, box.x1, box.y1))
    return artist


def _both(figure, canvas, artist, set_data, plain) -> tuple[np.ndarray, np.ndarray, bool]:
    """The buffer with the artist drawn by matplotlib, and by plain_draw, over the same
    picture; and what plain_draw answered."""
    saved = canvas.copy_from_bbox(figure.bbox)
    set_data()
    figure.draw_artist(artist)
    by_matplotlib = np.asarray(canvas.buffer_rgba()).copy()
    canvas.restore_region(saved)
    done = plain(canvas.get_renderer())
    return by_matplotlib, np.asarray(canvas.buffer_rgba()).copy(), done


def _tail(n: int = 40, gap: bool = False) -> np.ndarray:
    x = np.linspace(80, 99, n)
    y = 2.0 + 0.3 * np.sin(x) + np.random.default_rng(n).normal(scale=0.05, size=n)
    if gap:
        y[n // 2] = np.nan
    return np.column_stack([x, y])


LINES = [
    pytest.param(dict(log=False, snap=None, alpha=None, width=1.4), id="linear"),
    pytest.param(dict(log=True, snap=None, alpha=None, width=1.4), id="log"),
    pytest.param(dict(log=False, snap=True, alpha=None, width=1.4), id="snapped"),
    pytest.param(dict(log=True, snap=False, alpha=0.03, width=0.8), id="faded-raw"),
    pytest.param(dict(log=False, snap=None, alpha=0.25, width=0.8, gap=True), id="gap"),
    pytest.param(dict(log=False, snap=None, alpha=None, width=1.4, clip=350.0), id="clipped"),
]


@pytest.mark.parametrize("case", LINES)
def test_a_line_tail_lights_the_pixels_its_artist_does(case):
    figure, canvas, ax = _chart(case["log"])
    xy = _tail(gap=case.get("gap", False))
    line = _twin(
        Line2D([], [], color="#1f77b4", linewidth=case["width"], alpha=case["alpha"]),
        ax,
        figure,
        case.get("clip"),
    )
    line.set_snap(case["snap"])
    by_matplotlib, plain, done = _both(
        figure,
        canvas,
        line,
        lambda: line.set_data(xy[:, 0], xy[:, 1]),
        lambda renderer: draw_line(renderer, line, xy),
    )
    assert done
    assert np.array_equal(by_matplotlib, plain)
    background = _chart(case["log"])[1].buffer_rgba()
    assert not np.array_equal(plain, np.asarray(background))  # something was drawn


@pytest.mark.parametrize("log", [False, True], ids=["linear", "log"])
@pytest.mark.parametrize("alpha", [0.25, 0.03], ids=["faint", "faded"])
def test_a_band_tail_fills_the_pixels_its_artist_does(log, alpha):
    figure, canvas, ax = _chart(log)
    xy = _tail()
    shift = np.array([0.0, 0.2])
    top, bottom = xy + shift, xy - shift
    vertices = np.concatenate([top, bottom[::-1]])
    band = _twin(
        Polygon(np.zeros((0, 2)), closed=True, facecolor="C1", edgecolor="C1", linewidth=0),
        ax,
        figure,
        300.0,
    )
    band.set_alpha(alpha)
    band.set_snap(False)
    by_matplotlib, plain, done = _both(
        figure,
        canvas,
        band,
        lambda: band.set_xy(vertices),
        lambda renderer: draw_band(renderer, band, vertices),
    )
    assert done
    assert np.array_equal(by_matplotlib, plain)
    background = _chart(log)[1].buffer_rgba()
    assert not np.array_equal(plain, np.asarray(background))


def test_what_it_does_not_cover_is_left_to_matplotlib():
    figure, canvas, ax = _chart(False)
    renderer = canvas.get_renderer()
    xy = _tail()
    before = np.asarray(canvas.buffer_rgba()).copy()
    lines = [
        Line2D([], [], linestyle="--"),  # (a Line2D does not say its pattern: PlainLine notes it)
        PlainLine([], [], linestyle=(0, (4, 2))),  # a pattern given as numbers
        PlainLine([], [], linestyle="--", gapcolor="k"),
        Line2D([], [], marker="o", markevery=2),
        Line2D([], [], marker="o", fillstyle="left"),
        Line2D([], [], marker="o", markerfacecolor=(1, 0, 0, 0.5)),  # edge and face alpha
        Line2D([], [], marker="o", markevery=[0, 99]),  # past its points
        Line2D([], [], drawstyle="steps-post"),
        Line2D([], [], path_effects=[patheffects.withStroke(linewidth=3)]),
        Line2D([], [], visible=False),
    ]
    sketched = Line2D([], [])
    sketched.set_sketch_params(1.0)
    rasterized = Line2D([], [])
    rasterized.set_rasterized(True)
    for line in [*lines, sketched, rasterized]:
        assert not draw_line(renderer, _twin(line, ax, figure, None), xy)
    bands = [
        Polygon(np.zeros((0, 2)), hatch="//", linewidth=0),
        Polygon(np.zeros((0, 2)), edgecolor="k", linewidth=1.0),
        Polygon(np.zeros((0, 2)), closed=False, linewidth=0),
    ]
    for band in bands:
        assert not draw_band(renderer, _twin(band, ax, figure, None), xy)
    assert np.array_equal(np.asarray(canvas.buffer_rgba()), before)  # none drew anything
    # Another renderer (a file's): matplotlib draws there.
    svg = RendererSVG(600, 300, io.StringIO())
    assert not draw_line(svg, _twin(Line2D([], []), ax, figure, None), xy)
    plain_band = Polygon(np.zeros((0, 2)), linewidth=0)
    assert not draw_band(svg, _twin(plain_band, ax, figure, None), xy)
    dot = Line2D([99], [2], linestyle="None", marker="o")
    assert not draw_mark(svg, _twin(dot, ax, figure, None))
    assert draw_mark(renderer, dot)  # (the same mark, on Agg's)


MARKS = [
    pytest.param(dict(log=False, marker="o", size=6.0, edge="#ffffff", alpha=None), id="live"),
    pytest.param(dict(log=True, marker="X", size=8.0, edge="#000000", alpha=None), id="crash"),
    pytest.param(dict(log=False, marker="D", size=5.5, edge="#444444", alpha=0.12), id="faded"),
    pytest.param(dict(log=False, marker="o", size=6.0, edge="#ffffff", clip=False), id="unclipped"),
]


@pytest.mark.parametrize("case", MARKS)
def test_an_end_mark_lights_the_pixels_its_artist_does(case):
    """As Track sets a run's end mark (resplot/draw/track_marks.py): one point, no line, the
    mark's edge and face, clipped to the chart unless it lies whole inside it."""
    figure, canvas, ax = _chart(case["log"])
    mark = _twin(Line2D([], [], linestyle="None", linewidth=1.0, zorder=4), ax, figure, None)
    mark.set_color("#2ca02c")
    mark.set_markevery([0])
    mark.set_marker(case["marker"])
    mark.set_markersize(case["size"])
    mark.set_markeredgecolor(case["edge"])
    mark.set_markerfacecolor("#2ca02c")
    mark.set_alpha(case.get("alpha"))
    mark.set_clip_on(case.get("clip", True))
    at = (100.0, 2.2)  # on the chart's right edge: half of it outside
    by_matplotlib, plain, done = _both(
        figure,
        canvas,
        mark,
        lambda: mark.set_data([at[0]], [at[1]]),
        lambda renderer: draw_mark(renderer, mark),
    )
    assert done
    assert np.array_equal(by_matplotlib, plain)
    background = _chart(case["log"])[1].buffer_rgba()
    assert not np.array_equal(plain, np.asarray(background))
    assert not mark.stale


def test_a_mark_it_does_not_cover_is_left_to_matplotlib():
    figure, canvas, ax = _chart(False)
    renderer = canvas.get_renderer()
    before = np.asarray(canvas.buffer_rgba()).copy()
    cases = [
        Line2D([90, 99], [2, 2], linestyle="--", marker="o", markevery=[1]),  # a dashed end
        Line2D([90, 99], [2, 2], linestyle="None", marker="o"),  # two points
        Line2D([99], [2], linestyle="None", marker="o", fillstyle="left"),
        Line2D([99], [2], linestyle="None"),  # no marker
        Line2D([99], [2], linestyle="None", marker="o", markerfacecolor=(1, 0, 0, 0.5)),
    ]
    for line in cases:
        assert not draw_mark(renderer, _twin(line, ax, figure, None))
    assert np.array_equal(np.asarray(canvas.buffer_rgba()), before)


def _long(n: int, x0: float = -50.0, x1: float = 150.0) -> tuple[np.ndarray, np.ndarray]:
    """A dense zig-zag over [x0, x1]: past the chart's x limits (0, 100) on both sides."""
    x = np.linspace(x0, x1, n)
    y = 2.0 + 0.4 * np.sin(x / 3) + np.random.default_rng(n).normal(scale=0.3, size=n)
    return x, y


def _unsorted(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = _long(n)
    return x[::-1].copy(), y


def _nan_x(n: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = _long(n)
    x[[0, n // 3, n // 3 + 1, n - 1]] = np.nan  # filled in between neighbours to find the cut
    return x, y


WHOLE = [
    pytest.param(dict(data=lambda: _long(300)), id="short"),
    pytest.param(dict(data=lambda: _long(5000)), id="long-subsliced"),
    pytest.param(dict(data=lambda: _nan_x(5000)), id="long-nan-x"),
    pytest.param(dict(data=lambda: _unsorted(5000)), id="long-unsorted"),
    pytest.param(dict(data=lambda: _long(5000), xlog=True), id="long-log-x"),
    pytest.param(dict(data=lambda: _long(5000), ylog=True, alpha=0.25, width=0.8), id="faint"),
    pytest.param(dict(data=lambda: _long(5000), clip_on=False), id="unclipped"),
]


def _drawn(kind, case) -> tuple[np.ndarray, object, int]:
    """A chart with one line of `kind` drawn by a full draw: its pixels, the line, and how
    many times Line2D.draw drew it."""
    figure = Figure(figsize=(6, 3), dpi=100)
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    x, y = case["data"]()
    line = kind(
        x,
        y,
        color="#1f77b4",
        linewidth=case.get("width", 1.4),
        alpha=case.get("alpha"),
        **case.get("style", {}),
    )
    if "then_width" in case:  # (a dashed line's pattern scales with its width, changed later)
        line.set_linewidth(case["then_width"])
    line.set_clip_on(case.get("clip_on", True))
    # The scales first: Line2D decides whether to draw a long line's part in view when it
    # works out its data (at add_line here), and keeps that past a change of scale; resplot's
    # lines work theirs out at their draw, which plain_draw decides at.
    if case.get("xlog"):
        ax.set_xscale("log")
    if case.get("ylog"):
        ax.set_yscale("log")
    ax.set_xlim(1 if case.get("xlog") else 0, 100)
    ax.set_ylim(0.5, 4.0)
    ax.add_line(line)
    calls = [0]
    own = Line2D.draw

    def counted(self, renderer):
        calls[0] += self is line  # (not the axes' tick lines)
        return own(self, renderer)

    Line2D.draw = counted
    try:
        canvas.draw()
    finally:
        Line2D.draw = own
    return np.asarray(canvas.buffer_rgba()).copy(), line, calls[0]


VALID = dict(linestyle="--", marker="o")  # a validation series (resplot/data/pages.py)
WHOLE += [
    pytest.param(dict(data=lambda: _long(40), style=VALID), id="dashed-marked"),
    pytest.param(dict(data=lambda: _long(40), style=VALID, ylog=True, alpha=0.12), id="faded"),
    pytest.param(dict(data=lambda: _long(5000), style=VALID), id="dashed-marked-subsliced"),
    pytest.param(dict(data=lambda: _nan_x(300), style=VALID), id="dashed-marked-nan"),
    pytest.param(dict(data=lambda: _long(300), style=dict(linestyle=":")), id="dotted"),
    pytest.param(dict(data=lambda: _long(300), style=dict(linestyle="dashdot")), id="dashdot"),
    pytest.param(dict(data=lambda: _long(300), style=VALID, then_width=3.0), id="dash-rescaled"),
    pytest.param(
        dict(data=lambda: _long(300), style=dict(linestyle="--"), rc={"lines.scale_dashes": False}),
        id="dashes-unscaled",
    ),
    pytest.param(
        dict(data=lambda: _long(300), style=dict(linestyle="None", marker=TICKDOWN)),
        id="tick-marks",  # (an axis's marks: resplot/draw/axis_art.py)
    ),
    pytest.param(
        dict(data=lambda: _long(300), style=dict(marker="o", markevery=[3, 150, -1])),
        id="lone-points",  # (resplot/draw/track_marks.py)
    ),
    pytest.param(
        dict(data=lambda: _long(5000), style=dict(marker="D", markevery=[0, 10, 20])),
        id="listed-subsliced",  # (indices into the part drawn, as Line2D's)
    ),
    pytest.param(
        dict(data=lambda: _long(300), style=dict(marker="s", fillstyle="none", markersize=8)),
        id="hollow",
    ),
]


@pytest.mark.parametrize("case", WHOLE)
def test_a_plain_line_lights_the_pixels_a_line2d_does(case):
    """A series' line (Track's, a tail's twin) drawn whole at a full draw: past Line2D's
    subslicing threshold too, where Line2D draws the part in view and one vertex past each
    end (sorted x on a linear rectilinear x axis, clipped), and where it draws them all;
    dashed by a named style, with its markers, or markers alone."""
    with mpl.rc_context(case.get("rc", {})):
        by_matplotlib, line2d, _ = _drawn(Line2D, case)
        plain, line, calls = _drawn(PlainLine, case)
    assert calls == 0  # drawn by plain_draw, not by Line2D.draw
    assert np.array_equal(by_matplotlib, plain)
    assert line.ind_offset == line2d.ind_offset  # where the drawn part starts (contains())
    assert not line.stale


def test_the_subslice_is_what_makes_a_long_line_pixel_equal(monkeypatch):
    """Drawing every vertex of a long line lights other pixels than Line2D's part in view
    (its path's simplification starts elsewhere): the check above can fail."""
    import resplot.draw.plain_draw as plain_draw

    case = dict(data=lambda: _long(5000))
    by_matplotlib, line2d, _ = _drawn(Line2D, case)
    assert line2d.ind_offset > 0
    monkeypatch.setattr(plain_draw, "_in_view", lambda line, xy: (xy, 0))
    whole, _line, _calls = _drawn(PlainLine, case)
    assert not np.array_equal(by_matplotlib, whole)


def test_a_plain_line_it_does_not_cover_is_drawn_by_line2d():
    """Data with units (dates), masked or not float arrays, dashes given as numbers:
    Line2D.draw, the same pixels."""
    dates = np.arange("2026-01-01", "2026-04-11", dtype="datetime64[D]")
    y = np.linspace(1.0, 3.0, len(dates))
    cases = [
        (dates, y, {}),
        (np.ma.masked_greater(np.linspace(0, 100, 50), 90), np.linspace(1, 3, 50), {}),
        (list(range(50)), [1.0 + i / 25 for i in range(50)], {}),
        (np.linspace(0, 100, 50), np.linspace(1, 3, 50), {"linestyle": (2, (5, 1, 1, 1))}),
    ]
    for x, values, style in cases:
        buffers = []
        for kind in (Line2D, PlainLine):
            figure = Figure(figsize=(6, 3), dpi=100)
            canvas = FigureCanvasAgg(figure)
            ax = figure.add_subplot(1, 1, 1)
            ax.add_line(kind(x, values, **style))
            ax.autoscale_view()
            canvas.draw()
            buffers.append(np.asarray(canvas.buffer_rgba()).copy())
        assert np.array_equal(*buffers)
        assert (buffers[1] != 255).any()  # something was drawn


@pytest.mark.parametrize(
    "style",
    [
        pytest.param(dict(linewidth=0, alpha=0.25, snap=False), id="faint"),
        pytest.param(dict(linewidth=1.0), id="edged"),  # (a main band: Polygon.draw)
    ],
)
@pytest.mark.parametrize("log", [False, True], ids=["linear", "log"])
def test_a_plain_band_fills_the_pixels_a_polygon_does(style, log):
    """A series' envelope band (Track's faint raw band) drawn at a full draw: the pixels of
    a Polygon's; drawn by plain_draw where it is edgeless, else by Polygon.draw."""
    x, y = _long(600)
    vertices = np.concatenate([np.column_stack([x, y + 0.3]), np.column_stack([x, y - 0.3])[::-1]])
    buffers, calls = [], [0]
    own = Polygon.draw

    def counted(self, renderer):
        calls[0] += isinstance(self, PlainBand)
        return own(self, renderer)

    for kind in (Polygon, PlainBand):
        figure = Figure(figsize=(6, 3), dpi=100)
        canvas = FigureCanvasAgg(figure)
        ax = figure.add_subplot(1, 1, 1)
        if log:
            ax.set_yscale("log")
        ax.set_xlim(0, 100)
        ax.set_ylim(0.5, 4.0)
        band = kind(vertices, closed=True, facecolor="C1", edgecolor="C1", **style)
        ax.add_artist(band)
        Polygon.draw = counted
        try:
            canvas.draw()
        finally:
            Polygon.draw = own
        buffers.append(np.asarray(canvas.buffer_rgba()).copy())
        assert not band.stale
    assert np.array_equal(*buffers)
    assert calls[0] == (1 if style["linewidth"] else 0)
    assert (buffers[1][..., :3] != 255).any()
