"""An artist drawn once into a bitmap and composited from it after: what BitmapLegend
(resplot/draw/legend_bitmap.py) is drawn with.

A bitmap composited over the canvas is not, to the last colour level, the artist drawn
directly over it: Agg blends each of the artist's layers (a legend's translucent frame, its
lines, its glyphs) into the pixels below in turn, rounding at each step, and the bitmap's
single blend rounds otherwise (up to 2 levels where the background is not white). So an
artist that has a bitmap is drawn from a bitmap at every draw on Agg, its first included:
which way it is drawn never depends on how many draws came before, and a blitted frame
(resplot/ui/layers.py) is the pixels of a full draw of the same state.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg

_CLEAR_PX = 16  # cleared around a cut after use: antialiasing that reached past the margin

_scratch = threading.local()  # one transparent canvas per thread, reused (no alloc per draw)


def _scratch_renderer(w: int, h: int, dpi: float) -> RendererAgg:
    found = getattr(_scratch, "renderer", None)
    if found is None or (int(found.width), int(found.height), found.dpi) != (w, h, dpi):
        found = RendererAgg(w, h, dpi)
        _scratch.renderer = found
    return found


def scratch_bytes() -> int:
    """Bytes of this thread's scratch canvas (one RGBA canvas of the last page drawn)."""
    found = getattr(_scratch, "renderer", None)
    return 0 if found is None else memoryview(found.buffer_rgba()).nbytes


def release_scratch() -> None:
    """Give back this thread's scratch canvas (a page's size, 10-80 MB); the next bitmap
    drawn makes one again."""
    _scratch.renderer = None


def drawn_alone(
    draw: Callable[[RendererAgg], None], renderer: RendererAgg, box, margin: int
) -> tuple[int, int, np.ndarray]:
    """`draw` run alone on a transparent canvas of the renderer's size, cut to `box` and
    `margin` pixels around it: (left, bottom, RGBA rows bottom first, as draw_image takes them)."""
    w, h = int(renderer.width), int(renderer.height)
    scratch = _scratch_renderer(w, h, renderer.dpi)
    draw(scratch)
    x0, x1 = math.floor(box.x0) - margin, math.ceil(box.x1) + margin
    y0, y1 = math.floor(box.y0) - margin, math.ceil(box.y1) + margin
    rows = np.asarray(scratch.buffer_rgba())  # the top row first
    cut = rows[h - y1 : h - y0, x0:x1][::-1].copy()
    pad = _CLEAR_PX
    rows[max(h - y1 - pad, 0) : max(h - y0 + pad, 0), max(x0 - pad, 0) : x1 + pad] = 0
    return x0, y0, cut


def paste(renderer: RendererAgg, x: float, y: float, rgba: np.ndarray) -> None:
    """A bitmap of drawn_alone() composited at (x, y), its left and bottom."""
    gc = renderer.new_gc()
    try:
        renderer.draw_image(gc, round(x), round(y), rgba)
    finally:
        gc.restore()
