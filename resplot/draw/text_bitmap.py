"""A chart's note drawn from a bitmap of itself while what it says is unchanged.

matplotlib 3.11 lays text out and renders it glyph by glyph at each draw: a chart's note
(`min–max per 512 steps · smoothed 512-step means`) cost ~7 ms a draw, and a live poll draws
every note of the page with the series over the saved axes (resplot/ui/layers.py): 25-35 ms
of a 12-run Training page's poll (scripts/bench/bench_live_poll.py). On Agg a note drawn twice
alike is drawn into a bitmap the size of its box and composited from it, as chart legends are
(resplot/draw/legend_bitmap.py), its first draw included (a direct draw differs by a colour
level here and there: bitmap_draw.py); a draw on another renderer (SVG, PDF), of a clipped
text, or of one partly off the canvas is direct.
"""

from __future__ import annotations

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.text import Text

from resplot.draw.bitmap_draw import drawn_alone, paste

MARGIN_PX = 2  # antialiasing past the text's box


class BitmapText(Text):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._bitmap: tuple | None = None  # (key, left and bottom relative to the box, RGBA)
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
            # Drawn into a new bitmap even at its first draw: a direct draw is not its pixels
            # to the last level (bitmap_draw's docstring), and a blitted frame must be.
            x, y, rgba = self._render(renderer, box)
            self._bitmap = (key, x - box.x0, y - box.y0, rgba)
            self.renders += 1
        _key, dx, dy, rgba = self._bitmap
        paste(renderer, box.x0 + dx, box.y0 + dy, rgba)
        self.stale = False

    def _render(self, renderer, box) -> tuple[int, int, np.ndarray]:
        """The text drawn alone, cut to its box (bitmap_draw.drawn_alone)."""
        return drawn_alone(super().draw, renderer, box, MARGIN_PX)
