"""A chart legend drawn from a bitmap of itself while what it shows is unchanged.

A legend of eight series costs matplotlib ~15 ms a draw (text layout and glyphs, offsetbox
packing): four of them were 60 of the 155 ms a zoom spent drawing the training page, for a
zoom or pan changes nothing in them. On Agg (the window's canvas, PNG snapshots) the legend is
drawn once into a bitmap the size of its box, and composited from it (~1 ms) until its text,
place, size or the font chain changes; other renderers (SVG, PDF exports) draw it as usual.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.legend import Legend

MARGIN_PX = 2  # the frame's line and antialiasing reach past the box


class BitmapLegend(Legend):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._bitmap: tuple | None = None  # (key, x, y, RGBA rows bottom first)
        self.renders = 0  # bitmaps drawn afresh (tests read it)

    def draw(self, renderer) -> None:
        if not self.get_visible() or not isinstance(renderer, RendererAgg):
            super().draw(renderer)
            return
        box = self.get_window_extent(renderer)
        key = (
            tuple(t.get_text() for t in self.texts), box.bounds, renderer.dpi,
            renderer.width, renderer.height, tuple(rcParams["font.family"]),
        )  # fmt: skip
        if self._bitmap is None or self._bitmap[0] != key:
            self._bitmap = (key, *self._render(renderer, box))
            self.renders += 1
        _key, x, y, rgba = self._bitmap
        if rgba.size:
            gc = renderer.new_gc()
            try:
                renderer.draw_image(gc, x, y, rgba)
            finally:
                gc.restore()
        self.stale = False

    def _render(self, renderer, box) -> tuple[int, int, np.ndarray]:
        """The legend drawn alone on a transparent canvas of the renderer's size, cut to its
        box: (left, bottom, RGBA rows bottom first, as draw_image takes them)."""
        w, h = int(renderer.width), int(renderer.height)
        scratch = RendererAgg(w, h, renderer.dpi)
        super().draw(scratch)
        x0 = max(0, math.floor(box.x0) - MARGIN_PX)
        x1 = min(w, math.ceil(box.x1) + MARGIN_PX)
        y0 = max(0, math.floor(box.y0) - MARGIN_PX)
        y1 = min(h, math.ceil(box.y1) + MARGIN_PX)
        rows = np.asarray(scratch.buffer_rgba())  # the top row first
        return x0, y0, rows[h - y1 : h - y0, x0:x1][::-1].copy()


def add_legend(ax, handles, labels, **kwargs) -> BitmapLegend:
    """ax.legend(handles, labels, **kwargs), as a BitmapLegend (Axes.legend's own steps)."""
    legend = BitmapLegend(ax, handles, labels, **kwargs)
    ax.legend_ = legend
    legend._remove_method = lambda _legend: setattr(ax, "legend_", None)
    return legend
