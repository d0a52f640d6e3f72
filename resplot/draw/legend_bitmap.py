"""A chart legend drawn from a bitmap of its frame and handles, its texts over it.

A legend of eight series costs matplotlib ~15 ms a draw (text layout and glyphs, offsetbox
packing): four of them were 60 of the 155 ms a zoom spent drawing the training page, for a
zoom or pan changes nothing in them but, at times, the corner they sit in. And a chart's
legend gives each series' latest value: a live run changes it at every poll, and a legend
with a new text cost 12-14 ms a draw even on the window's text stamps (its strings shaped
twice and drawn glyph by glyph): 47 of the 78 ms a poll took following one run's Training
page (four charts, a legend each), 121 of 175 ms with three runs.

On Agg (the window's canvas, PNG snapshots) the frame and the handles are drawn into a bitmap
the size of the box, kept while the box keeps its size (text metrics are whole pixels: a
value of the same digits is the same box), and composited from it; the texts are drawn over
it where matplotlib's layout puts them, each entry's name and its value ("NAME  VALUE", as
resplot/draw/legends.py writes it) as two strings, so that a poll draws only the new value's
few glyphs (the window's renderer keeps each string's stamp: resplot/draw/text_stamps.py).
Every draw is made the same way, its first included: a draw never depends on the draws before
(bitmap_draw.py). Other renderers (SVG, PDF exports) and mathtext draw it as matplotlib does.
Agg puts text at whole pixels and the frame between them, so a bitmap is only reused where the
box has the same fraction of a pixel: one a corner.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from matplotlib import colors as mcolors
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.cbook import is_math_text
from matplotlib.legend import Legend
from matplotlib.transforms import Bbox

from resplot.draw.axis_art import text_origin
from resplot.draw.bitmap_draw import drawn_alone, paste
from resplot.draw.limits import quietly
from resplot.draw.text_stamps import font_key

MARGIN_PX = 2  # the frame's line and antialiasing reach past the box
BITMAPS = 4  # kept per legend: one for each corner it was placed in
VALUE_SEP = "  "  # between a series' name and its latest value (resplot/draw/legends.py)
_DIGITS = re.compile("[0-9]")
ADVANCES = 1024  # names' advances kept (a page's legends hold a few dozen)
_advances: OrderedDict[tuple, float] = OrderedDict()
_lock = threading.Lock()


class BitmapLegend(Legend):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # (its box's size and place within a pixel, ...) -> (left and bottom relative to the
        # box, RGBA rows bottom first, each text's origin relative to the box); the newest
        # BITMAPS of them
        self._bitmaps: dict[tuple, tuple[float, float, np.ndarray, list]] = {}
        self.renders = 0  # bitmaps drawn afresh (tests read it)
        self.corner = kwargs.get("loc")  # as set: where it goes is part of its layout
        self._laid_out: tuple = ()  # what the box below was laid out for
        self._box: Bbox | None = None

    def set_loc(self, loc=None) -> None:
        super().set_loc(loc)
        self.corner = loc

    def draw(self, renderer) -> None:
        texts = self.texts
        if (
            not self.get_visible()
            or not isinstance(renderer, RendererAgg)
            or any(is_math_text(t.get_text()) for t in texts)
        ):
            super().draw(renderer)
            return
        shapes, box = self._laid_out_box(renderer)
        key = (
            round(box.width, 3),
            round(box.height, 3),
            renderer.dpi,
            tuple(rcParams["font.family"]),
            round(box.x0 % 1, 3),
            round(box.y0 % 1, 3),
            tuple(t.get_visible() for t in texts),
        )
        room = MARGIN_PX + 1
        inside = room <= min(box.x0, box.y0, renderer.width - box.x1, renderer.height - box.y1)
        if not inside:  # partly off the canvas (a tiny chart): a cut bitmap would lose a part
            super().draw(renderer)
            return
        found = self._bitmaps.pop(key, None)
        if found is None:
            with self._shaped(shapes):
                x, y, rgba, origins = self._render(renderer, box)
            found = (x - box.x0, y - box.y0, rgba, origins)
            self.renders += 1
            while len(self._bitmaps) >= BITMAPS:
                del self._bitmaps[next(iter(self._bitmaps))]
        self._bitmaps[key] = found  # the newest last
        dx, dy, rgba, origins = found
        paste(renderer, box.x0 + dx, box.y0 + dy, rgba)
        for text, origin in zip(texts, origins, strict=True):
            if origin is not None:
                _draw_entry(renderer, text, box.x0 + origin[0], box.y0 + origin[1])
        self.stale = False

    def _layout_key(self, renderer) -> tuple[tuple[str, ...], tuple]:
        """The texts' shapes, and what the box's layout depends on."""
        texts = self.texts
        shapes = tuple(_DIGITS.sub("0", t.get_text()) for t in texts)
        return shapes, (
            shapes,
            self.corner,
            tuple(self.axes.bbox.bounds),
            renderer.dpi,
            tuple(rcParams["font.family"]),
            tuple(t.get_visible() for t in texts),
        )

    def _laid_out_box(self, renderer) -> tuple[tuple[str, ...], Bbox]:
        """The texts' shapes and the legend's box laid out for them, each digit a 0: digits are
        alike (tabular), and text metrics whole pixels, so a new latest value of the same
        digits is the same layout. Kept while that layout holds: a live poll asks where the
        legend is (resplot/ui/reach.py) before it draws it, at each new value, and matplotlib
        lays the whole legend out at each ask (~1.7 ms)."""
        shapes, laid_out = self._layout_key(renderer)
        if self._box is None or laid_out != self._laid_out:
            # Quietly: the texts changed and put back mark the legend stale, which would mark
            # the figure for a full draw (resplot/ui/layers.py).
            with quietly(self.axes), self._shaped(shapes):
                self._box = super().get_window_extent(renderer)
            self._laid_out = laid_out
        return shapes, self._box

    def get_window_extent(self, renderer=None):
        if (
            renderer is None
            or self.axes is None
            or any(is_math_text(t.get_text()) for t in self.texts)
        ):
            return super().get_window_extent(renderer)
        return self._laid_out_box(renderer)[1].frozen()

    @contextmanager
    def _shaped(self, shapes: tuple[str, ...]) -> Iterator[None]:
        """The texts hold their shapes meanwhile (what the layout is made for)."""
        shown = [t.get_text() for t in self.texts]
        for text, shape in zip(self.texts, shapes, strict=True):
            text.set_text(shape)
        try:
            yield
        finally:
            for text, s in zip(self.texts, shown, strict=True):
                text.set_text(s)

    def _render(self, renderer, box) -> tuple[int, int, np.ndarray, list]:
        """The frame and handles drawn alone, cut to the box (bitmap_draw.drawn_alone), and
        where each text draws its string (relative to the box; None: it draws none)."""
        shown = [t.get_visible() for t in self.texts]
        for text in self.texts:
            text.set_visible(False)  # laid out as ever, drawn over the bitmap
        try:
            x, y, rgba = drawn_alone(super().draw, renderer, box, MARGIN_PX)
        finally:
            for text, visible in zip(self.texts, shown, strict=True):
                text.set_visible(visible)
        origins = []
        for text in self.texts:
            at = text_origin(text, renderer.dpi) if text.get_visible() else None
            origins.append(None if at is None else (at[0] - box.x0, at[1] - box.y0))
        return x, y, rgba, origins


def _advance(renderer, s: str, prop) -> float:
    """How far the pen moves over `s` (its metrics' width: text metrics are whole pixels and
    count trailing spaces), kept a string and font: a legend's names each poll."""
    key = (
        s,
        font_key(prop),
        renderer.dpi,
        rcParams["text.hinting"],
        rcParams["text.hinting_factor"],
    )
    with _lock:
        found = _advances.get(key)
        if found is not None:
            _advances.move_to_end(key)
            return found
    found = renderer.get_text_width_height_descent(s, prop, ismath=False)[0]
    with _lock:
        _advances[key] = found
        while len(_advances) > ADVANCES:
            _advances.popitem(last=False)
    return found


def _draw_entry(renderer, text, x: float, y: float) -> None:
    """A legend text's string drawn from (x, y), its origin (figure pixels from the bottom):
    an entry "NAME  VALUE" as its name and its value, the value where its glyphs follow the
    name's and the two spaces' advance."""
    s = text.get_text()
    name, sep, value = s.rpartition(VALUE_SEP)
    parts = [(0.0, s)] if not sep or not name else [(0.0, name)]
    if sep and name and value:
        parts.append((_advance(renderer, name + sep, text.get_fontproperties()), value))
    gc = renderer.new_gc()
    try:
        gc.set_foreground(mcolors.to_rgba(text.get_color()), isRGBA=True)
        gc.set_alpha(text.get_alpha())
        gc.set_antialiased(text.get_antialiased())
        oy = renderer.height - y if renderer.flipy() else y
        for dx, part in parts:
            renderer.draw_text(gc, x + dx, oy, part, text.get_fontproperties(), 0.0, mtext=text)
    finally:
        gc.restore()


def add_legend(ax, handles, labels, **kwargs) -> BitmapLegend:
    """ax.legend(handles, labels, **kwargs), as a BitmapLegend (Axes.legend's own steps)."""
    legend = BitmapLegend(ax, handles, labels, **kwargs)
    ax.legend_ = legend
    ax.stale = True
    return legend


def remove_legend(ax) -> None:
    """Take a chart's legend off (Legend.remove() needs the private hook Axes.legend sets)."""
    ax.legend_ = None
    ax.stale = True
