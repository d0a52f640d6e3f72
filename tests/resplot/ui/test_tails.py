"""A live series cut into a body, drawn once into the saved picture, and a tail, drawn at every
poll (resplot/ui/tails.py): a blit is the pixels of a full draw of the same state, and every
change a cut cannot carry (a body's vertices, the end past the next boundary, the style, a new
series, the snap Agg would choose) asks for a full draw.

Real matplotlib Agg canvases, drawn the way resplot/ui/layers.py draws a page.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon

from resplot.ui import tails as tails_module
from resplot.ui.tails import PAD_PX, Tails

N = 3000


def _walk(seed: int, n: int = N) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).normal(size=n))


class Page:
    """One chart whose series are drawn over its saved axes, as the window's layers do."""

    def __init__(self) -> None:
        self.figure = Figure(figsize=(6, 3), dpi=100)
        self.canvas = FigureCanvasAgg(self.figure)
        self.ax = self.figure.add_subplot(1, 1, 1)
        self.ax.set_xlim(0, 1.2 * N)
        self.ax.set_ylim(-120, 120)
        self.series: list = []
        self.tails = Tails()
        self.background = None

    def add(self, artist):
        artist.set_animated(True)  # left out of the canvas's own draw: drawn below
        if isinstance(artist, Line2D):
            self.ax.add_line(artist)
        else:
            self.ax.add_artist(artist)
        self.series.append(artist)
        return artist

    def line(self, y: np.ndarray, **kw) -> Line2D:
        return self.add(Line2D(np.arange(len(y), dtype=float), y, linewidth=1.4, **kw))

    def band(self, y: np.ndarray, **kw) -> Polygon:
        x = np.arange(len(y), dtype=float)
        xy = np.column_stack([np.r_[x, x[::-1]], np.r_[y + 3, (y - 3)[::-1]]])
        return self.add(Polygon(xy, closed=True, linewidth=0, alpha=0.25, **kw))

    def _series(self) -> None:
        for artist in self.series:
            if not self.tails.draw(artist):
                self.figure.draw_artist(artist)

    def full(self) -> np.ndarray:
        self.canvas.draw()
        self.tails.clear()
        self.tails.cut(self.ax, self.series)
        self.background = self.canvas.copy_from_bbox(self.figure.bbox)
        self._series()
        return np.asarray(self.canvas.buffer_rgba()).copy()

    def fresh(self) -> bool:
        return self.tails.fresh([(self.ax, self.series)])

    def blit(self) -> np.ndarray:
        self.canvas.restore_region(self.background)
        self._series()
        return np.asarray(self.canvas.buffer_rgba()).copy()

    def plain(self) -> np.ndarray:
        """matplotlib drawing every series whole."""
        self.canvas.draw()
        for artist in self.series:
            self.figure.draw_artist(artist)
        return np.asarray(self.canvas.buffer_rgba()).copy()


def _data(artist) -> np.ndarray:
    """The series' y values (a band's middle)."""
    if isinstance(artist, Line2D):
        return np.asarray(artist.get_ydata(), float)
    xy = artist.get_xy()
    n = len(xy) // 2
    return xy[:n, 1] - 3


def _grow(artist, y: np.ndarray) -> None:
    """The series with more points at its end (its first ones as they were)."""
    x = np.arange(len(y), dtype=float)
    if isinstance(artist, Line2D):
        artist.set_data(x, y)
    else:
        artist.set_xy(np.column_stack([np.r_[x, x[::-1]], np.r_[y + 3, (y - 3)[::-1]]]))


def _drawn_by(page: Page, monkeypatch) -> list[tuple[object, int]]:
    """The artists a blit of the page draws, in order, each with the vertices it drew: by
    matplotlib, or a twin from its artist's columns (resplot/draw/plain_draw.py)."""
    drawn: list[tuple[object, int]] = []
    real = page.figure.draw_artist

    def by_matplotlib(a) -> None:
        count = len(a.get_xydata()) if isinstance(a, Line2D) else len(a.get_xy())
        drawn.append((a, count))
        real(a)

    def plain(draw):
        def counted(renderer, twin, xy) -> bool:
            done = draw(renderer, twin, xy)
            if done:
                drawn.append((twin, len(xy)))
            return done

        return counted

    page.figure.draw_artist = by_matplotlib
    monkeypatch.setattr(tails_module, "draw_line", plain(tails_module.draw_line))
    monkeypatch.setattr(tails_module, "draw_band", plain(tails_module.draw_band))
    try:
        page.blit()
    finally:
        del page.figure.draw_artist
        monkeypatch.undo()
    return drawn


def _page():
    page = Page()
    ys = [_walk(1), _walk(2), _walk(3)]
    band = page.band(ys[0], color="C0")
    lines = [page.line(y, color=f"C{i}") for i, y in enumerate(ys)]
    dashed = page.line(_walk(4), color="C5", linestyle="--")  # drawn whole, after the cuts
    return page, ys, band, lines, dashed


def test_a_poll_draws_the_tails_a_full_draw_of_the_same_state_would(monkeypatch):
    page, ys, band, lines, _dashed = _page()
    page.full()
    assert len(page.tails.cuts) == 4  # the band and the three lines; not the dashed line
    for step in range(1, 4):
        grown = [np.r_[y, _walk(10 + step, 3 * step) + y[-1]] for y in ys]
        _grow(band, grown[0])
        for line, y in zip(lines, grown, strict=True):
            _grow(line, y)
        assert page.fresh()
        drawn = dict(_drawn_by(page, monkeypatch))
        # The cut series were not drawn whole: their twins drew their tails, a few columns.
        assert not {id(a) for a in drawn} & {id(a) for a in [band, *lines]}
        for artist in [band, *lines]:
            twin = page.tails.cuts[id(artist)].twins[1]  # the tail's
            assert twin in drawn
            whole = len(artist.get_xydata() if isinstance(artist, Line2D) else artist.get_xy())
            assert drawn[twin] < whole / 4
        assert np.array_equal(page.blit(), page.full())  # the same cuts, drawn anew


def test_the_page_differs_from_whole_series_only_where_simplified_otherwise():
    """Each part holds its vertices a few pixels past the boundary and is clipped there: every
    pixel is stroked as the whole series strokes it (no seam where the parts meet: the joins are
    the whole's). What differs is where matplotlib simplifies a part otherwise than the whole
    (it leaves out vertices within 1/9 pixel of a straight run, in paths of 128 or more): within
    a level or two of antialiasing, at and right of the boundaries; with simplification off, a
    level at most where the clips meet."""
    page, *_ = _page()
    cut, plain = page.full(), page.plain()
    differ = (cut != plain).any(axis=2)
    first = min(c.boundary for c in page.tails.cuts.values())
    assert differ.sum() < 0.005 * differ.size
    assert not differ[:, : int(first) - PAD_PX - 1].any()  # the bodies are the whole's
    with matplotlib.rc_context({"path.simplify": False}):
        for artist in page.series:
            _grow(artist, _data(artist))  # paths made anew, not simplified
        cut, plain = page.full(), page.plain()
    assert np.abs(cut.astype(int) - plain).max() <= 1


def test_a_change_the_cuts_cannot_carry_asks_for_a_full_draw():
    page, ys, band, lines, _dashed = _page()
    page.full()
    assert page.fresh()
    moved = ys[1].copy()
    moved[100] += 5  # a body's vertex (another level of detail, another smoothing)
    _grow(lines[1], moved)
    assert not page.fresh()
    _grow(lines[1], ys[1])
    assert page.fresh()
    lines[2].set_alpha(0.12)  # faded (another run highlighted)
    assert not page.fresh()
    lines[2].set_alpha(None)
    assert page.fresh()
    far = np.r_[ys[0], _walk(9, N // 8) + ys[0][-1]]  # past the next boundary
    _grow(band, far)
    assert not page.fresh()
    _grow(band, ys[0])
    assert page.fresh()
    new = page.line(_walk(7), color="C7")  # a series come since, drawn first: to be cut
    page.series.insert(0, page.series.pop())
    assert not page.fresh()
    page.full()
    assert page.fresh() and id(new) in page.tails.cuts and len(page.tails.cuts) == 5


def test_a_body_with_gaps_stays_cut_when_its_values_come_again_and_not_when_one_moves():
    """A body is compared by its bytes: a series with NaN gaps (a metric not logged at every
    step) polled anew, its body the same values in new arrays, keeps its cut; a gap filled or a
    value moved, or a zero that comes back written as -0.0, cuts it again (the safe side)."""
    page = Page()
    y = _walk(5)
    y[200:260] = np.nan
    y[900] = 0.0
    line = page.line(y, color="C3")
    page.full()
    assert id(line) in page.tails.cuts
    _grow(line, np.r_[y.copy(), _walk(6, 5) + y[-1]])  # new arrays, the same body
    assert page.fresh()
    for at, value in (
        (230, 1.0),  # a gap filled
        (100, y[100] + 1e-9),  # a value moved
        (900, -0.0),  # equal, written otherwise
    ):
        body = y.copy()
        body[at] = value
        _grow(line, np.r_[body, _walk(6, 5) + y[-1]])
        assert not page.fresh()
    _grow(line, y.copy())
    assert page.fresh()


def test_a_full_draw_cuts_with_the_last_ones_twins_restyled_where_the_series_changed():
    """A twin is made once and kept from one full draw to the next (making and styling one
    cost ~0.2 ms); a series restyled since has its twins restyled (made anew they were cyclic
    garbage), and the page is what a page cut for the first time draws."""
    page, _ys, band, lines, _dashed = _page()
    page.full()
    before = {id(a): page.tails.cuts[id(a)].twins for a in [band, *lines]}
    page.ax.set_xlim(0, 1.3 * N)  # another boundary: new clips, the same twins
    moved = page.full()
    assert all(page.tails.cuts[key].twins is twins for key, twins in before.items())
    page.tails = Tails()  # twins made anew
    assert np.array_equal(moved, page.full())
    before = {id(a): page.tails.cuts[id(a)].twins for a in [band, *lines]}
    lines[1].set_color("C9")
    lines[2].set_alpha(0.12)  # faded: another run highlighted
    band.set_facecolor("C8")
    restyled = page.full()
    now = {id(a): page.tails.cuts[id(a)].twins for a in [band, *lines]}
    assert now[id(lines[0])] is before[id(lines[0])] and now[id(lines[2])] is before[id(lines[2])]
    assert now[id(lines[1])] is before[id(lines[1])] and now[id(band)] is before[id(band)]
    assert all(t.get_color() == "C9" for t in now[id(lines[1])])
    assert all(t.get_alpha() == 0.12 for t in now[id(lines[2])])
    assert all(to_hex(t.get_facecolor()) == to_hex("C8") for t in now[id(band)])
    assert np.array_equal(page.blit(), restyled)
    page.tails = Tails()
    assert np.array_equal(restyled, page.full())


def test_a_series_left_uncut_by_a_draw_keeps_its_twins_until_it_leaves_the_figure():
    """A zoom in can leave a live series too short to cut, and the zoom back out cuts it
    again: with the twins it had (the Training page made ~9 a zoom anew). A series taken off
    the chart takes its twins with it at the next full draw."""
    page, ys, _band, lines, _dashed = _page()
    page.full()
    twins = page.tails.cuts[id(lines[1])].twins
    lines[1].set_data(np.arange(10.0), ys[1][:10])  # too few vertices to cut
    page.full()
    assert id(lines[1]) not in page.tails.cuts
    lines[1].set_data(np.arange(N, dtype=float), ys[1])
    whole = page.full()
    assert page.tails.cuts[id(lines[1])].twins is twins
    page.tails = Tails()
    assert np.array_equal(whole, page.full())  # the kept twins draw what new ones do
    gone = lines[2]
    page.series.remove(gone)
    gone.remove()
    page.full()
    assert id(gone) not in page.tails._twins
    assert id(lines[1]) in page.tails._twins


def test_only_series_before_the_first_one_drawn_whole_are_cut():
    """A body drawn into the saved picture must have nothing under it that the full draw
    draws over it: the cuts stop at the first visible artist not cut."""
    page = Page()
    first = page.line(_walk(1))
    page.line(_walk(2), linestyle="--")
    later = page.line(_walk(3))
    page.full()
    assert id(first) in page.tails.cuts and id(later) not in page.tails.cuts
    hidden = Page()
    a = hidden.line(_walk(1))
    hidden.line(_walk(2), linestyle="--").set_visible(False)  # draws nothing: no stop
    b = hidden.line(_walk(3))
    hidden.full()
    assert {id(a), id(b)} <= set(hidden.tails.cuts)


def test_both_parts_snap_as_agg_would_snap_the_whole_series():
    """Agg snaps a path of at most 1,024 vertices whose segments are all level or upright: a
    flat series is snapped in both parts, and a tail that turns sloped makes the whole one
    unsnapped (a full draw); an artist's own snap setting stands."""
    page = Page()
    flat = page.line(np.full(600, 10.0))
    band = page.band(np.full(600, -40.0), snap=False)
    page.full()
    assert all(t.get_snap() is True for t in page.tails.cuts[id(flat)].twins)
    assert all(t.get_snap() is False for t in page.tails.cuts[id(band)].twins)
    assert np.array_equal(page.blit(), page.full())
    _grow(flat, np.r_[np.full(600, 10.0), [11.0]])  # a sloped last segment
    assert not page.fresh()
    page.full()
    assert page.tails.cuts[id(flat)].twins[1].get_snap() is False
    long = Page()
    many = long.line(np.full(2000, 10.0))
    long.full()
    assert long.tails.cuts[id(many)].twins[0].get_snap() is False  # > 1,024 vertices


def test_a_long_series_body_is_not_measured_and_is_cut_again_when_it_could_snap():
    """Whether a body's segments are all level or upright matters only where Agg may snap the
    whole artist (at most 1,024 vertices): a longer series' body is not looked at (a transform
    of every vertex at each full draw), and where its tail has shrunk since to a size Agg would
    snap, the series is cut again rather than trusted; the blit is the full draw's pixels."""
    page = Page()
    body_x = np.linspace(0, 3000, 1000)
    flat = page.line(np.zeros(1))
    flat.set_data(np.r_[body_x, np.linspace(3000.5, 3010, 1100)], np.full(2100, 10.0))
    page.full()
    cut = page.tails.cuts[id(flat)]
    assert cut.body_square is None and cut.body_end < 1000  # the dense end is the tail's
    assert np.array_equal(page.blit(), page.full())
    flat.set_data(np.r_[body_x, np.linspace(3000.5, 3010, 20)], np.full(1020, 10.0))
    assert not page.fresh()  # the same body; the whole now 1,020 level vertices: snapped
    page.full()
    cut = page.tails.cuts[id(flat)]
    assert cut.body_square is True and all(t.get_snap() is True for t in cut.twins)
    assert np.array_equal(page.blit(), page.full())


def test_a_run_is_square_only_when_every_drawn_segment_is_level_or_upright():
    from resplot.ui.tails import PROBE_VERTICES, _square

    page = Page()
    line = page.add(Line2D([], [], linewidth=1.0))
    steps = np.repeat(np.arange(60.0), 2)[1:]  # a staircase: level, upright, level, ...
    stairs = np.column_stack([steps, np.repeat(np.arange(60.0), 2)[:-1]])
    assert _square(line, stairs)
    late = stairs.copy()
    late[PROBE_VERTICES + 20, 1] += 0.5  # one slanted pair past the first look
    assert not _square(line, late)
    assert not _square(line, stairs, np.array([[0.0, 0.0], [1.0, 1.0]]))  # in another run
    gap = np.array([[0.0, 0.0], [np.nan, np.nan], [5.0, 7.0], [5.0, 9.0]])
    assert _square(line, gap)  # no segment drawn to or from the NaN
    for far in (np.inf, -np.inf):  # nor to or from a vertex off at infinity
        assert _square(line, np.array([[0.0, 0.0], [far, 3.0], [5.0, 7.0], [5.0, 9.0]]))
        assert _square(line, np.array([[0.0, 0.0], [2.0, far], [5.0, 7.0], [5.0, 9.0]]))
    assert not _square(line, np.array([[0.0, 0.0], [np.inf, 3.0], [5.0, 7.0], [6.0, 9.0]]))
