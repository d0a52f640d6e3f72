"""Text drawn from cached glyph bitmaps: the same pixels, a third less time a full draw.

A full draw of the training page spent ~80 of its ~220 ms on text: every tick label, title and
note laid out by FreeType and each of its glyphs rendered anew, though a redraw (new points, a
stand-in replaced by its fine tiles, a zoom that keeps some ticks) mostly draws the same
strings, often in the same places. `TextCachingRenderer` keeps what matplotlib's Agg renderer
computes on the way:

- a string's layout (which glyph of which font goes where, relative to the text's origin), by
  the string, its resolved font and size, the dpi and the shaping options;
- each glyph's coverage bitmap, by the glyph, font, size, dpi, rotation, hinting and
  antialiasing, and the 1/64-pixel fraction of the pen position FreeType renders it at (a
  whole-pixel move of the same glyph moves its bitmap by that many pixels, nothing else).

Glyphs are then composited as `RendererAgg._draw_text_glyphs_and_boxes` does. The result is the
same pixels as matplotlib's own path (tests/test_text_cache.py compares whole canvases);
under another matplotlib than the 3.11 it follows, text is drawn matplotlib's way.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import matplotlib
import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg, get_hinting_flag
from matplotlib.font_manager import fontManager, get_font
from matplotlib.ft2font import FT2Font

try:
    from matplotlib.ft2font import RenderMode
except ImportError:  # an older or newer matplotlib: text is drawn its own way
    RenderMode = None

# The private calls below are matplotlib 3.11's (RendererAgg.draw_text and
# _draw_text_glyphs_and_boxes, step for step); another minor version draws text its own way
# until this is checked against it (tests/test_text_cache.py).
SUPPORTED = (
    tuple(matplotlib.__version_info__[:2]) == (3, 11)
    and RenderMode is not None
    and all(hasattr(FT2Font, n) for n in ("_layout", "_render_glyph", "_set_transform"))
)
LAYOUTS = 4096  # strings kept (a page's tick labels, titles and notes: a few hundred)
GLYPHS = 16384  # glyph bitmaps kept (~0.3 KB each at the window's sizes)


class _Lru(OrderedDict):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get_fresh(self, key) -> Any:
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
        return found

    def put(self, key, value) -> None:
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)


# Shared by every renderer of the process: a resize makes a new renderer, the strings stay.
_layouts = _Lru(LAYOUTS)
_glyphs = _Lru(GLYPHS)


class TextCachingRenderer(RendererAgg):
    """RendererAgg whose plain (not math) text comes from the caches above."""

    def draw_text(self, gc, x, y, s, prop, angle, ismath=False, mtext=None) -> None:
        if ismath or not SUPPORTED:
            super().draw_text(gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)
            return
        features = mtext.get_fontfeatures() if mtext is not None else None
        language = mtext.get_language() if mtext is not None else None  # as draw_text does
        fonts = fontManager._find_fonts_by_props(prop)
        size = prop.get_size_in_points()
        flags = get_hinting_flag()
        # features and language may be lists (language: [(tag, start, end), ...]): their repr
        # is hashable and says the same; get_font's own cache keys on the rc settings
        key = (
            s,
            tuple(fonts),
            size,
            self.dpi,
            flags,
            repr(features),
            repr(language),
            rcParams["text.kerning_factor"],
            rcParams["font.enable_last_resort"],
        )
        items = _layouts.get_fresh(key)
        if items is None:
            font = get_font(fonts)
            font.clear()
            font.set_size(size, self.dpi)
            laid = font._layout(s, flags=flags, features=features, language=language)
            items = [(item.ft_object, item.glyph_index, item.x, item.y) for item in laid]
            _layouts.put(key, items)
        self._draw_glyphs(gc, x, y, angle, size, flags, items)

    def _draw_glyphs(self, gc, x, y, angle, size, flags, items) -> None:
        """_draw_text_glyphs_and_boxes for plain text, each glyph's bitmap cached."""
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        antialiased = bool(gc.get_antialiased())
        height = self.height
        matrix = None
        for ft_object, glyph_index, dx, dy in items:  # dy is upwards
            tx = round(0x40 * (x + dx * cos - dy * sin))
            ty = round(0x40 * (height - y + dx * sin + dy * cos))  # FreeType's y is upwards
            key = (
                ft_object,
                size,
                self.dpi,
                glyph_index,
                angle,
                tx & 63,
                ty & 63,
                flags,
                antialiased,
            )
            found = _glyphs.get_fresh(key)
            if found is None:
                if matrix is None:
                    matrix = (0x10000 * np.array([[cos, -sin], [sin, cos]])).round().astype(int)
                ft_object.set_size(size, self.dpi)
                ft_object._set_transform(matrix, [tx & 63, ty & 63])
                mode = RenderMode.NORMAL if antialiased else RenderMode.MONO
                bitmap = ft_object._render_glyph(glyph_index, flags, mode)
                buffer = np.array(bitmap.buffer)  # a copy: the font reuses its own
                if not antialiased:
                    buffer *= 0xFF
                found = (buffer, bitmap.left, bitmap.top)
                _glyphs.put(key, found)
            buffer, left, top = found
            # draw_text_image's y is downwards and the bitmap's bottom side.
            self._renderer.draw_text_image(
                buffer, left + (tx >> 6), int(height) - (top + (ty >> 6)) + buffer.shape[0], 0, gc
            )


class TextCachingCanvas:
    """Mixin for a FigureCanvasAgg subclass (listed before it): its renderer caches text."""

    def get_renderer(self):
        if not SUPPORTED:  # matplotlib's own renderer, as on any other canvas
            return super().get_renderer()  # type: ignore[misc]
        w, h = self.get_width_height(physical=True)  # type: ignore[attr-defined]
        key = (w, h, self.figure.dpi)  # type: ignore[attr-defined]
        if getattr(self, "_lastKey", None) != key:  # FigureCanvasAgg's own reuse rule
            self.renderer = TextCachingRenderer(w, h, self.figure.dpi)  # type: ignore[attr-defined]
            self._lastKey = key
        return self.renderer
