"""A chart's note drawn from a bitmap of itself while what it says is unchanged.

matplotlib 3.11 lays text out and renders it glyph by glyph at each draw: a chart's note
(`min–max per 512 steps · smoothed 512-step means`) cost ~7 ms a draw, and a live poll draws
every note of the page with the series over the saved axes (resplot/ui/layers.py): 25-35 ms
of a 12-run Training page's poll (scripts/bench/bench_live_poll.py). On Agg a note drawn twice
alike is drawn into a bitmap the size of its box and composited from it, as chart legends are
(resplot/draw/legend_bitmap.py): the first draw of a new text is direct, and so is any draw on
another renderer (SVG, PDF), of a clipped text, or of one partly off the canvas.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.text import Text

MARGIN_PX = 2  # antialiasing past the text's box


class BitmapText(Text):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._bitmap: tuple | None = None  # (key, left and bottom relative to the box, RGBA)
        self._last: tuple | None = None  # what the last draw showed, and where
        self.renders = 0  # bitmaps drawn afresh (tests read it)

    def draw(self, renderer) -> None:
        if (
            not self.get_visible()
            or not self.get_text()
            or not isinstance(renderer, RendererAgg)
            or self.get_clip_on()
        ):
            super().draw(renderer)
            return
        box = self.get_window_extent(renderer)
        key = (
            self.get_text(),
            str(self.get_color()),
            self.get_alpha(),
            self.get_fontsize(),
            tuple(rcParams["font.family"]),
            renderer.dpi,
            round(box.width, 3),
            round(box.height, 3),
            round(box.x0 % 1, 3),
            round(box.y0 % 1, 3),
        )
        room = MARGIN_PX + 1
        inside = room <= min(box.x0, box.y0, renderer.width - box.x1, renderer.height - box.y1)
        if not inside:
            super().draw(renderer)
            return
        if self._bitmap is None or self._bitmap[0] != key:
            if key != self._last:  # new text or place: drawn directly (it may change again)
                self._last = key
                super().draw(renderer)
                return
            x, y, rgba = self._render(renderer, box)
            self._bitmap = (key, x - box.x0, y - box.y0, rgba)
            self.renders += 1
        _key, dx, dy, rgba = self._bitmap
        gc = renderer.new_gc()
        try:
            renderer.draw_image(gc, round(box.x0 + dx), round(box.y0 + dy), rgba)
        finally:
            gc.restore()
        self.stale = False

    def _render(self, renderer, box) -> tuple[int, int, np.ndarray]:
        """The text drawn alone on a transparent canvas of the renderer's size, cut to its
        box: (left, bottom, RGBA rows bottom first, as draw_image takes them)."""
        w, h = int(renderer.width), int(renderer.height)
        scratch = RendererAgg(w, h, renderer.dpi)
        super().draw(scratch)
        x0, x1 = math.floor(box.x0) - MARGIN_PX, math.ceil(box.x1) + MARGIN_PX
        y0, y1 = math.floor(box.y0) - MARGIN_PX, math.ceil(box.y1) + MARGIN_PX
        rows = np.asarray(scratch.buffer_rgba())  # the top row first
        return x0, y0, rows[h - y1 : h - y0, x0:x1][::-1].copy()
