"""A chart legend drawn from a bitmap of itself while what it shows is unchanged.

A legend of eight series costs matplotlib ~15 ms a draw (text layout and glyphs, offsetbox
packing): four of them were 60 of the 155 ms a zoom spent drawing the training page, for a
zoom or pan changes nothing in them but, at times, the corner they sit in. On Agg (the window's
canvas, PNG snapshots) a legend drawn twice alike is drawn into a bitmap the size of its box,
and composited from it (~1 ms) until its text, size or the font chain changes; a legend whose
text changes at every draw (a live run's latest value, each poll) is drawn into a new bitmap
at each draw, so that a draw never depends on the draws before it (bitmap_draw.py). Other
renderers (SVG, PDF exports) draw it as usual. Agg puts text at whole pixels and the frame
between them, so a bitmap is only reused where the box has the same fraction of a pixel: one a
corner.
"""

from __future__ import annotations

import numpy as np
from matplotlib import rcParams
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.legend import Legend

from resplot.draw.bitmap_draw import drawn_alone, paste

MARGIN_PX = 2  # the frame's line and antialiasing reach past the box
BITMAPS = 4  # kept per legend: one for each corner it was placed in


class BitmapLegend(Legend):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # (what it shows, its box's place within a pixel) -> (left and bottom relative to the
        # box, RGBA rows bottom first); the newest BITMAPS of them
        self._bitmaps: dict[tuple, tuple[float, float, np.ndarray]] = {}
        self.renders = 0  # bitmaps drawn afresh (tests read it)

    def draw(self, renderer) -> None:
        if not self.get_visible() or not isinstance(renderer, RendererAgg):
            super().draw(renderer)
            return
        box = self.get_window_extent(renderer)
        key = (
            tuple(t.get_text() for t in self.texts),
            round(box.width, 3),
            round(box.height, 3),
            renderer.dpi,
            tuple(rcParams["font.family"]),
            round(box.x0 % 1, 3),
            round(box.y0 % 1, 3),
        )
        room = MARGIN_PX + 1
        inside = room <= min(box.x0, box.y0, renderer.width - box.x1, renderer.height - box.y1)
        if not inside:  # partly off the canvas (a tiny chart): a cut bitmap would lose a part
            super().draw(renderer)
            return
        found = self._bitmaps.pop(key, None)
        if found is None:
            # Drawn into a bitmap even for a text new at this draw (a live poll's latest
            # value): a direct draw is not its bitmap's pixels to the last level
            # (bitmap_draw.py), and which way a legend is drawn must not depend on the draws
            # before, or a blitted frame is not the pixels of a full draw.
            x, y, rgba = self._render(renderer, box)
            found = (x - box.x0, y - box.y0, rgba)
            self.renders += 1
            while len(self._bitmaps) >= BITMAPS:
                del self._bitmaps[next(iter(self._bitmaps))]
        self._bitmaps[key] = found  # the newest last
        dx, dy, rgba = found
        paste(renderer, box.x0 + dx, box.y0 + dy, rgba)
        self.stale = False

    def _render(self, renderer, box) -> tuple[int, int, np.ndarray]:
        """The legend drawn alone, cut to its box (bitmap_draw.drawn_alone)."""
        return drawn_alone(super().draw, renderer, box, MARGIN_PX)


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
