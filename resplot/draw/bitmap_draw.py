"""An artist drawn once into a bitmap and composited from it after: what BitmapLegend
(resplot/draw/legend_bitmap.py) and BitmapText (resplot/draw/text_bitmap.py) share."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from matplotlib.backends.backend_agg import RendererAgg


def drawn_alone(
    draw: Callable[[RendererAgg], None], renderer: RendererAgg, box, margin: int
) -> tuple[int, int, np.ndarray]:
    """`draw` run alone on a transparent canvas of the renderer's size, cut to `box` and
    `margin` pixels around it: (left, bottom, RGBA rows bottom first, as draw_image takes them)."""
    w, h = int(renderer.width), int(renderer.height)
    scratch = RendererAgg(w, h, renderer.dpi)
    draw(scratch)
    x0, x1 = math.floor(box.x0) - margin, math.ceil(box.x1) + margin
    y0, y1 = math.floor(box.y0) - margin, math.ceil(box.y1) + margin
    rows = np.asarray(scratch.buffer_rgba())  # the top row first
    return x0, y0, rows[h - y1 : h - y0, x0:x1][::-1].copy()


def paste(renderer: RendererAgg, x: float, y: float, rgba: np.ndarray) -> None:
    """A bitmap of drawn_alone() composited at (x, y), its left and bottom."""
    gc = renderer.new_gc()
    try:
        renderer.draw_image(gc, round(x), round(y), rgba)
    finally:
        gc.restore()
