"""The window's text drawn from a bitmap of each string (a stamp), made once per string, font,
colour and angle.

matplotlib 3.11 shapes every string with libraqm and renders it glyph by glyph at every draw:
~1.5 ms a tick label here, and a full draw of the Training page draws ~70 of them (tick
labels, titles, axis labels): a third of a page's draw, paid at every zoom, pan's end, resize
and page switch (docs/benchmarks/viewer.md, "Text from stamps"). StampRenderer, the window's
Agg renderer, draws a plain string once, alone, into a small transparent bitmap at a whole-pixel
origin, keeps it, and composites it wherever the string is drawn again at that pixel's origin
rounded: the text lands at most half a pixel from where matplotlib would put it, with the same
glyphs and antialiasing. Every string is drawn from its stamp, its first draw included, so a
frame never depends on the draws before it (a blitted frame is the pixels of a full draw:
resplot/ui/layers.py and bitmap_draw.py's docstring).

A string's measure (width, height, descent: what a Text's layout asks before it draws) is kept
here too, across renderers. matplotlib keeps it by renderer, and the window's canvas makes a
renderer at each size: a resize of the Training page measured its 13 titles, labels and notes
afresh, 8-15 ms (~0.7 ms a string, shaped once more), and each page's canvas has its own.

Left to matplotlib: mathtext, a string clipped by a path, and every other renderer (SVG and PDF
files, and `resplot snapshot`/`export`, which draw without the window; a PNG saved from the
window is drawn by its canvas, stamps and all). Public API only: the renderer's `draw_text`,
`draw_image` and `get_text_width_height_descent`, and graphics contexts.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg

MARGIN_PT = 2.2  # glyphs overhang their advance (italics, bearings), antialiasing past them
# Room a level string is drawn into before it is cut to its ink, in ems of its font size:
# below the baseline, above it, and across a character (wide glyphs, a CJK fallback's).
LEVEL_BELOW_EM, LEVEL_ABOVE_EM, LEVEL_EM_A_CHAR = 1.0, 2.0, 1.6
STAMP_BYTES = 8 << 20  # kept, the least recently drawn dropped first (a tick label ~2 KB)
MEASURES_HELD = 8192  # measures kept (matplotlib's own cache holds 4,096 a renderer)

# (string, font, angle, colour, antialiasing, dpi, hinting, features, language) ->
# (origin within the stamp: x from its left, y from its bottom; RGBA rows bottom first)
_stamps: OrderedDict[tuple, tuple[int, int, np.ndarray]] = OrderedDict()
_lock = threading.Lock()
_bytes = [0]  # held by _stamps
made = [0]  # stamps drawn afresh (tests and benchmarks read it)
# (string, font, dpi, hinting, kerning, families) -> (width, height, descent)
_measures: OrderedDict[tuple, tuple[float, float, float]] = OrderedDict()
measured = [0]  # strings measured afresh (tests read it)


def forget() -> None:
    """Drop every stamp and measure."""
    with _lock:
        _stamps.clear()
        _bytes[0] = 0
        _measures.clear()


def held() -> tuple[int, int]:
    """(stamps, bytes) held."""
    return len(_stamps), _bytes[0]


class StampRenderer(RendererAgg):
    """RendererAgg whose plain strings are composited from stamps (the module's docstring)."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if ismath or not s or gc.get_clip_path()[0] is not None:
            return super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
        return self.draw_styled(
            gc, x, y, s, prop, angle, mtext, self.text_style(gc, prop, angle, mtext)
        )

    def text_style(self, gc, prop, angle, mtext) -> tuple:
        """What a stamp depends on besides its string: many strings drawn alike (an axis's
        tick labels) read it once and draw each with `draw_styled`."""
        return (
            font_key(prop),
            round(float(angle), 6),
            tuple(gc.get_rgb()),
            gc.get_alpha(),
            gc.get_forced_alpha(),
            bool(gc.get_antialiased()),
            self.dpi,
            rcParams["text.hinting"],
            rcParams["text.hinting_factor"],
            tuple(rcParams["font.family"]),
            None if mtext is None else _frozen(mtext.get_fontfeatures()),
            None if mtext is None else mtext.get_language(),
        )

    def draw_styled(self, gc, x, y, s, prop, angle, mtext, style: tuple) -> None:
        """draw_text of a plain string (no mathtext, no clip path) whose `text_style` with
        these gc, prop, angle and mtext is `style`."""
        if not s:
            return None
        key = (s, style)
        with _lock:
            stamp = _stamps.get(key)
            if stamp is not None:
                _stamps.move_to_end(key)
        if stamp is None:
            stamp = self._stamp(gc, s, prop, angle, mtext)
            with _lock:
                if key not in _stamps:
                    _stamps[key] = stamp
                    _bytes[0] += stamp[2].nbytes
                while _bytes[0] > STAMP_BYTES and len(_stamps) > 1:
                    _bytes[0] -= _stamps.popitem(last=False)[1][2].nbytes
        ox, oy, rgba = stamp
        # draw_text's y runs down from the top at the baseline; draw_image's up from the bottom.
        left, bottom = round(x) - ox, round(self.height - y) - oy
        paste = self.new_gc()
        try:
            paste.set_clip_rectangle(gc.get_clip_rectangle())
            self.draw_image(paste, left, bottom, rgba)
        finally:
            paste.restore()
        keep = getattr(mtext, "keep_draw", None)  # a text that draws this call again
        if keep is not None:
            keep(self, gc, x, y, s, prop, angle)
        return None

    def get_text_width_height_descent(self, s, prop, ismath):
        if ismath:  # mathtext and TeX: their own parsers and settings
            return super().get_text_width_height_descent(s, prop, ismath)
        key = (
            s,
            font_key(prop),
            self.dpi,
            rcParams["text.hinting"],
            rcParams["text.hinting_factor"],
            rcParams["text.kerning_factor"],
            tuple(rcParams["font.family"]),  # the CJK fallback (resplot/draw/fonts.py)
        )
        with _lock:
            found = _measures.get(key)
            if found is not None:
                _measures.move_to_end(key)
                return found
        found = tuple(super().get_text_width_height_descent(s, prop, ismath))
        with _lock:
            measured[0] += 1
            _measures[key] = found
            while len(_measures) > MEASURES_HELD:
                _measures.popitem(last=False)
        return found

    def _stamp(self, gc, s, prop, angle, mtext) -> tuple[int, int, np.ndarray]:
        """The string drawn alone at a whole-pixel origin on a transparent bitmap just big
        enough for it at its angle."""
        margin = math.ceil(MARGIN_PT * self.dpi / 72)  # 3 px at 100 dpi
        if angle == 0:
            # Level text (nearly all of it): drawn into room enough for any glyph and cut to
            # its ink after, without measuring it first (a measure shapes the string once more:
            # 0.4-1.5 ms, the most of a stamp of a short string).
            em = prop.get_size_in_points() * self.dpi / 72
            ox, oy = margin, math.ceil(LEVEL_BELOW_EM * em) + margin
            width = ox + math.ceil(LEVEL_EM_A_CHAR * em * len(s)) + margin + 1
            height = oy + math.ceil(LEVEL_ABOVE_EM * em) + margin + 1
        else:
            w, h, d = self.get_text_width_height_descent(s, prop, ismath=False)
            a = math.radians(angle)
            cos, sin = math.cos(a), math.sin(a)
            corners = [
                (cx * cos - cy * sin, cx * sin + cy * cos) for cx in (0, w) for cy in (-d, h - d)
            ]
            xs, ys = [c[0] for c in corners], [c[1] for c in corners]
            ox = math.ceil(-min(xs)) + margin
            oy = math.ceil(-min(ys)) + margin
            width = ox + math.ceil(max(xs)) + margin + 1
            height = oy + math.ceil(max(ys)) + margin + 1
        alone = RendererAgg(width, height, self.dpi)
        pen = alone.new_gc()
        try:
            pen.copy_properties(gc)
            pen.set_clip_rectangle(None)
            pen.set_clip_path(None)
            RendererAgg.draw_text(alone, pen, ox, height - oy, s, prop, angle, mtext=mtext)
        finally:
            pen.restore()
        rows = np.asarray(alone.buffer_rgba())[::-1]  # bottom row first
        ink = rows[..., 3] > 0
        cols, lines = np.flatnonzero(ink.any(axis=0)), np.flatnonzero(ink.any(axis=1))
        made[0] += 1
        if not len(cols):  # blank (spaces): nothing to paste
            return ox, oy, rows[:1, :1].copy()
        x0, y0 = int(cols[0]), int(lines[0])
        return ox - x0, oy - y0, rows[y0 : lines[-1] + 1, x0 : cols[-1] + 1].copy()


def font_key(prop) -> tuple:
    """What of a FontProperties picks and sizes the glyphs (it is mutable: not a key itself)."""
    return (
        tuple(prop.get_family()),
        prop.get_style(),
        prop.get_variant(),
        prop.get_weight(),
        prop.get_stretch(),
        prop.get_size_in_points(),
        prop.get_file(),
    )


def _frozen(value):
    if isinstance(value, list | tuple):
        return tuple(value)
    return value
