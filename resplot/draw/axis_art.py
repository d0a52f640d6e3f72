"""A chart's ticks, grid lines, tick labels and axis labels as one artist: each kind drawn as
one path (the grid of an axis, its tick marks) or a few texts, where matplotlib's own axes draw
five artists a tick (its grid line, two marks, two labels) and measure every tick label twice
to place the axis label. That cost 122 ms of a 175 ms full draw of the Training page (12 runs,
1280×800: ~77 ticks), and every zoom, pan, resize and page switch is a full draw.

The same rules as matplotlib's axis: the locator's ticks inside the view (a hair's tolerance
in the scale's own coordinates), minor ticks other than the major ones, the formatter's labels
and offset (`format_ticks`, `get_offset`), marks and labels at the places and pads
`get_xaxis_text1_transform` gives, the axis label clear of the tick labels by `labelpad`, and
rcParams' tick sizes, widths and colours. matplotlib's own axes stay (their locators,
formatters, limits and scales are what this reads) but are not drawn: `hide_axes`.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import matplotlib as mpl
import numpy as np
from matplotlib import colors as mcolors
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.cbook import is_math_text
from matplotlib.lines import TICKDOWN, TICKLEFT
from matplotlib.text import Text
from matplotlib.transforms import Bbox, IdentityTransform

from resplot.draw.clip_box import axes_clip_box
from resplot.draw.plain_draw import PlainLine
from resplot.draw.text_stamps import StampRenderer

# matplotlib's own tolerance for a tick at the view's edge (transforms._interval_contains_close)
EDGE_RTOL = 1e-10
# A minor tick this close to a major one (a fraction of the view, in scale coordinates) is the
# major one (matplotlib's Axis.get_minorticklocs).
MINOR_RTOL = 1e-5
# A label's layout, by string, font and alignment: (draw origin x, y; box x0, y0, x1, y1),
# relative to its anchor. Every chart's axes share them; the least recently used go first.
# (Exports draw on worker threads.)
_layouts: OrderedDict[tuple, tuple[float, ...]] = OrderedDict()
_lock = threading.Lock()
MAX_LAYOUTS = 4096
_origins: dict[float, _Origin] = {}
# Each ticker's last ticks: (what they were worked out from, (major, labels, minor, offset)).
# One entry a locator, so a zoom works out its own (a chart's y axis, the page's x at the
# first chart); the charts after the first, sharing its x ticker, read them (0.25 ms each).
_LAST_TICKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Ticks:
    """One axis's parts: its grid lines, major and minor marks (one PlainLine each, every tick
    a segment or a marker of it) and its tick labels (each string drawn where a Text of it
    would be)."""

    def __init__(self, art: AxisArt, name: str, grid: dict | None, labelsize: float) -> None:
        ax = art.ax
        self.name, self.ax = name, ax
        self.axis = ax.xaxis if name == "x" else ax.yaxis
        self.labelsize = labelsize
        where = ax.get_xaxis_transform if name == "x" else ax.get_yaxis_transform
        self.grid = None
        if grid is not None:
            # (a solid grid is drawn as a path from its data: resplot/draw/plain_draw.py)
            self.grid = PlainLine(
                [],
                [],
                color=mpl.rcParams["grid.color"],
                linestyle=mpl.rcParams["grid.linestyle"],
                **{"linewidth": mpl.rcParams["grid.linewidth"], **grid},
            )
            self.grid.set_transform(where("grid"))
            self.grid.set_clip_box(axes_clip_box(ax))  # as matplotlib's grid: inside the axes
        rc = f"{name}tick"
        self.marks = {}
        for which in ("major", "minor"):
            line = PlainLine(
                [],
                [],
                linestyle="None",
                marker=TICKDOWN if name == "x" else TICKLEFT,
                markersize=mpl.rcParams[f"{rc}.{which}.size"],
                markeredgewidth=mpl.rcParams[f"{rc}.{which}.width"],
                color=mpl.rcParams[f"{rc}.color"],
            )
            line.set_transform(where("tick1"))
            self.marks[which] = line
        # Not the axes' children (a set_data each draw marks nothing stale): the figure only.
        for part in (*([self.grid] if self.grid is not None else []), *self.marks.values()):
            part.set_figure(ax.figure)
        self._label: Text | None = None  # every label's style and place, the string aside
        self.offset = ""  # the formatter's offset for the ticks last drawn (locations)
        self.shown: list[Bbox] = []  # the boxes of the labels the last draw drew

    def _pad_pt(self) -> float:
        """The labels' distance from the axes in points: the tick's length and its pad."""
        rc = f"{self.name}tick.major"
        return mpl.rcParams[f"{rc}.size"] + mpl.rcParams[f"{rc}.pad"]

    def locations(self) -> tuple[np.ndarray, list[str], np.ndarray]:
        """(major ticks in view, their labels, minor ticks in view but the major ones), and
        `offset`: the formatter's offset for them. The charts of a page share one x ticker
        (sharex): the first chart drawn works them out, the others take its (`_LAST_TICKS`)."""
        axis = self.axis
        major_loc, minor_loc = axis.get_major_locator(), axis.get_minor_locator()
        formatter = axis.get_major_formatter()
        low, high = sorted(axis.get_view_interval())
        # (weakly: the entry must not keep its ticker, and through it the axes, alive)
        inputs = (weakref.ref(formatter), weakref.ref(minor_loc), low, high, axis.get_scale())
        inputs += _tick_room(major_loc)
        with _lock:
            last = _LAST_TICKS.get(major_loc)
        if last is not None and last[0] == inputs:
            major, labels, minor, self.offset = last[1]
            return major, labels, minor
        got = self._locate(low, high)
        self.offset = formatter.get_offset() or ""
        with _lock:
            _LAST_TICKS[major_loc] = (inputs, (*got, self.offset))
        return got

    def _locate(self, low: float, high: float) -> tuple[np.ndarray, list[str], np.ndarray]:
        axis = self.axis
        scale = axis.get_transform()
        t_low, t_high = scale.transform([low, high])
        span = abs(t_high - t_low)

        def in_view(locs: np.ndarray) -> np.ndarray:
            if not len(locs):
                return np.zeros(0, bool)
            with np.errstate(invalid="ignore", divide="ignore"):
                t = scale.transform(locs)
            tol = EDGE_RTOL * max(span, 1e-300)
            return (
                np.isfinite(t) & (t >= min(t_low, t_high) - tol) & (t <= max(t_low, t_high) + tol)
            )

        major = np.asarray(axis.get_major_locator()(), float)
        labels = axis.get_major_formatter().format_ticks(major) if len(major) else []
        keep = in_view(major)
        minor = np.asarray(axis.get_minor_locator()(), float)
        if len(minor) and len(major):
            with np.errstate(invalid="ignore", divide="ignore"):
                t_minor, t_major = scale.transform(minor), scale.transform(major)
            tol = MINOR_RTOL * max(span, 1e-300)
            near = np.abs(t_minor[:, None] - t_major[None, :]).min(axis=1) <= tol
            minor = minor[~near]
        minor = minor[in_view(minor)]
        return major[keep], [s for s, k in zip(labels, keep, strict=True) if k], minor

    def draw(self, renderer) -> None:
        major, labels, minor = self.locations()
        for which, locs in (("major", major), ("minor", minor)):
            line = self.marks[which]
            zeros = np.zeros(len(locs))
            line.set_data((locs, zeros) if self.name == "x" else (zeros, locs))
        if self.grid is not None:
            along, across = lines_across(major)
            self.grid.set_data((along, across) if self.name == "x" else (across, along))
            self.grid.draw(renderer)
        for line in self.marks.values():
            if len(line.get_xdata()):
                line.draw(renderer)
        self._draw_labels(renderer, major, labels)

    def _draw_labels(self, renderer, locs: np.ndarray, labels: list[str]) -> None:
        """Each label's string where its Text would draw it: the anchor (the tick's place,
        padded out) plus the string's own offset from it, worked out once a string by
        matplotlib's layout (Text.draw lays every string out again at every draw: 0.4 ms a
        label, ~80 labels a page). Other renderers than Agg's (SVG, PDF) and mathtext get
        a Text each, drawn as matplotlib draws it."""
        self.shown = []
        texts = [(loc, s) for loc, s in zip(locs, labels, strict=True) if s]
        if not texts:
            return
        proto = self._proto()
        points = np.zeros((len(texts), 2))
        points[:, 0 if self.name == "x" else 1] = [loc for loc, _s in texts]
        anchors = proto.get_transform().transform(points)
        gc = renderer.new_gc()
        try:
            gc.set_foreground(mcolors.to_rgba(proto.get_color()), isRGBA=True)
            gc.set_antialiased(proto.get_antialiased())
            height = renderer.get_canvas_width_height()[1]
            prop = proto.get_fontproperties()
            style = self._layout_style(renderer)  # (the labels': read once, not a label)
            stamped = isinstance(renderer, StampRenderer) and gc.get_clip_path()[0] is None
            stamp = renderer.text_style(gc, prop, 0.0, proto) if stamped else None
            for (x, y), (_loc, s) in zip(anchors, texts, strict=True):
                if not (np.isfinite(x) and np.isfinite(y)):
                    continue
                got = self._layout(renderer, s, style)
                if got is None:
                    text = self._text_at(s, x, y)
                    text.draw(renderer)
                    self.shown.append(text.get_window_extent(renderer))
                    continue
                dx, dy, x0, y0, x1, y1 = got
                oy = dy + y
                oy = height - oy if renderer.flipy() else oy
                if stamp is None:
                    renderer.draw_text(gc, dx + x, oy, s, prop, 0.0, mtext=proto)
                else:
                    renderer.draw_styled(gc, dx + x, oy, s, prop, 0.0, proto, stamp)
                self.shown.append(Bbox.from_extents(x0 + x, y0 + y, x1 + x, y1 + y))
        finally:
            gc.restore()

    def _proto(self) -> Text:
        """The Text whose style, alignment and transform every label of the axis has."""
        if self._label is None:
            self._label = self._new_label()
        return self._label

    def _text_at(self, s: str, x: float, y: float) -> Text:
        """A label of its own, anchored at display point x, y."""
        text = self._new_label()
        text.set_transform(IdentityTransform())
        text.set_position((x, y))
        text.set_text(s)
        return text

    def _layout_style(self, renderer) -> tuple | None:
        """What a label's layout depends on besides its string (None: not laid out here:
        renderers other than Agg's, whose text metrics are their own)."""
        if not isinstance(renderer, RendererAgg):
            return None
        proto = self._proto()
        prop = proto.get_fontproperties()
        return (
            renderer.dpi,
            proto.get_horizontalalignment(),
            proto.get_verticalalignment(),
            prop.get_size_in_points(),
            tuple(prop.get_family()),
            prop.get_weight(),
            tuple(mpl.rcParams["font.family"]),  # a CJK fallback added (resplot/draw/fonts.py)
            mpl.rcParams["text.hinting"],
            mpl.rcParams["text.hinting_factor"],
        )

    def _layout(self, renderer, s: str, style: tuple | None) -> tuple[float, ...] | None:
        """(where a Text anchored at 0, 0 draws string `s`: x, y; its box: x0, y0, x1, y1),
        relative to the anchor: matplotlib's own layout of it, read once (a Text drawn on a
        renderer that only notes where its string goes), for the labels' `style`
        (_layout_style). None where that does not hold: mathtext, and renderers other than
        Agg's."""
        if style is None or is_math_text(s):
            return None
        key = (s, style)
        with _lock:
            got = _layouts.get(key)
            if got is not None:
                _layouts.move_to_end(key)
                return got
        probe = self._text_at(s, 0.0, 0.0)
        with _lock:
            origin, box = _noted(probe, renderer.dpi)
            if origin is None:
                return None
            got = _layouts[key] = (*origin, box.x0, box.y0, box.x1, box.y1)
            while len(_layouts) > MAX_LAYOUTS:
                _layouts.popitem(last=False)
        return got

    def _new_label(self) -> Text:
        ax = self.ax
        if self.name == "x":
            transform, va, ha = ax.get_xaxis_text1_transform(self._pad_pt())
        else:
            transform, va, ha = ax.get_yaxis_text1_transform(self._pad_pt())
        rc = f"{self.name}tick"
        color = mpl.rcParams[f"{rc}.labelcolor"]
        text = Text(
            0,
            0,
            "",
            fontsize=self.labelsize,
            color=mpl.rcParams[f"{rc}.color"] if color == "inherit" else color,
            verticalalignment=va,
            horizontalalignment=ha,
            transform=transform,
        )
        text.set_figure(ax.figure)
        return text


class AxisArt(Artist):
    """The x and y axes of one chart (`hide_axes` has matplotlib's own not drawn). Drawn at
    the axes' axis zorder, under every series."""

    def __init__(self, ax, grid: dict | None = None, labelsize: float = 7.0) -> None:
        super().__init__()
        self.ax = ax
        self.set_zorder(ax.xaxis.get_zorder())
        self.set_figure(ax.figure)
        self.axes = ax
        self.ticks = {n: _Ticks(self, n, grid, labelsize) for n in ("x", "y")}
        self._renderer = None

    @classmethod
    def of(cls, ax) -> AxisArt | None:
        """The chart's axis art, if it has one."""
        return next((a for a in ax.artists if isinstance(a, cls)), None)

    def draw(self, renderer) -> None:
        if not self.get_visible():
            return
        self._renderer = renderer
        x, y = self.ticks["x"], self.ticks["y"]
        x.draw(renderer)
        y.draw(renderer)
        dpi = self.figure.dpi
        ax = self.ax
        # The axis labels and the x offset (a date axis's year) below or left of the labels,
        # as matplotlib places them (Axis._update_label_position and its offset text).
        xlabel, ylabel = ax.xaxis.label, ax.yaxis.label
        if xlabel.get_text():
            bottom = min([ax.bbox.y0 - _mark_px(ax, "x")] + [b.y0 for b in x.shown])
            _place(xlabel, (xlabel.get_position()[0], bottom - ax.xaxis.labelpad * dpi / 72))
            xlabel.draw(renderer)
        if ylabel.get_text():
            left = min([ax.bbox.x0 - _mark_px(ax, "y")] + [b.x0 for b in y.shown])
            _place(ylabel, (left - ax.yaxis.labelpad * dpi / 72, ylabel.get_position()[1]))
            ylabel.draw(renderer)
        offset = ax.xaxis.get_offset_text()
        text = x.offset
        if offset.get_text() != text:
            offset.set_text(text)
        if text:
            bottom = Bbox.union(x.shown).y0 if x.shown else ax.bbox.y0
            _place(offset, (offset.get_position()[0], bottom - ax.xaxis.OFFSETTEXTPAD * dpi / 72))
            offset.draw(renderer)
        self.stale = False

    def x_labels_extent(self, renderer) -> Bbox | None:
        """Where the x tick labels, the x label and offset were drawn (None: nothing)."""
        boxes = [*self.ticks["x"].shown, *_axis_texts(self.ax.xaxis, renderer)]
        return Bbox.union(boxes) if boxes else None

    def get_window_extent(self, renderer=None) -> Bbox:
        renderer = renderer or self._renderer or self.figure.canvas.get_renderer()
        boxes = [self.ax.bbox, *self.ticks["x"].shown, *self.ticks["y"].shown]
        for axis in (self.ax.xaxis, self.ax.yaxis):
            boxes += _axis_texts(axis, renderer)
        return Bbox.union(boxes)


def _axis_texts(axis, renderer) -> list[Bbox]:
    """The boxes of an axis's label and offset text, those that say something."""
    texts = (axis.label, axis.get_offset_text())
    return [t.get_window_extent(renderer) for t in texts if t.get_text()]


def _tick_room(locator) -> tuple:
    """What a locator's number of ticks may depend on besides the view: the size of the axes
    its axis belongs to, the dpi and the tick labels' sizes (Axis.get_tick_space)."""
    axis = getattr(locator, "axis", None)
    axes = getattr(axis, "axes", None)
    if axes is None:
        return (None,)
    return (
        *axes.bbox.size,
        axes.figure.dpi,
        mpl.rcParams["xtick.labelsize"],
        mpl.rcParams["ytick.labelsize"],
    )


def lines_across(locs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A line across the axes (0 to 1 in axes coordinates) at each of `locs`, as one path's
    (along, across) coordinates: NaN between lines (a move, not a segment)."""
    along = np.repeat(np.asarray(locs, float), 3)
    along[2::3] = np.nan
    return along, np.tile([0.0, 1.0, np.nan], len(locs))


def text_origin(text: Text, dpi: float) -> tuple[float, float] | None:
    """Where `text`, as it is placed now, hands its string to the renderer (figure pixels
    from the bottom: the x and y of `draw_text`), matplotlib's own layout read on a renderer
    that only notes it; None where it would draw none (mathtext, an empty string)."""
    with _lock:
        return _noted(text, dpi)[0]


def _noted(text: Text, dpi: float) -> tuple[tuple[float, float] | None, Bbox | None]:
    """(origin, box) of a Text drawn on the noting renderer of `dpi` (the lock held)."""
    # One noting renderer a dpi: matplotlib keeps text metrics by renderer.
    noted = _origins.get(dpi) or _origins.setdefault(dpi, _Origin(dpi))
    noted.origin = None
    text.draw(noted)
    if noted.origin is None:
        return None, None
    return noted.origin, text.get_window_extent(noted)


class _Origin(RendererAgg):
    """A renderer that draws nothing and notes where a Text's string would be drawn (figure
    pixels from the bottom)."""

    def __init__(self, dpi: float) -> None:
        super().__init__(1, 1, dpi)
        self.origin: tuple[float, float] | None = None

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None) -> None:
        self.origin = (x, self.height - y)


def _place(text: Text, xy: tuple[float, float]) -> None:
    # Only a move marks it stale (and so the figure: a full draw at the window's next poll).
    if tuple(text.get_position()) != xy:
        text.set_position(xy)


def _mark_px(ax, name: str) -> float:
    """How far a major tick mark reaches out of the axes, in pixels."""
    return mpl.rcParams[f"{name}tick.major.size"] * ax.figure.dpi / 72


def hide_axes(ax) -> None:
    """Leave matplotlib's own axis drawing out (AxisArt draws it)."""
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)
    drop_tick_artists(ax)


def drop_tick_artists(ax) -> None:
    """Let go of the Tick artists matplotlib made for the axes' x and y axes (a major and a
    minor tick each, made by the Axes' own `tick_params` and `grid` calls): a chart whose axis
    is not drawn never uses them, and they were half of what a chart's axes held, ~720 of its
    ~1,460 objects (each Tick five artists), for every pass of the cyclic collector to
    traverse. The tick lists are lazy in matplotlib: whatever asks for a tick again (a
    `set_yticks`) gets one made as before, with the tick parameters the axis keeps."""
    for axis in (ax.xaxis, ax.yaxis):
        for name in ("majorTicks", "minorTicks"):
            if name in vars(axis):
                delattr(axis, name)
