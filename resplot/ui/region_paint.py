"""A canvas paint that copies only the parts of a region that changed. Qt hands a paint event
the union of what was marked for repaint since the last paint (the hover line's strips on
every chart, where the readout was before it moved); matplotlib's Agg canvas paints that
union's bounding rectangle, which for a line on two chart columns is half the page. Here each
strip is copied on its own, in one paint (a repaint per strip made Qt flush its backing store
for each: ~0.3 ms a strip, five a move).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from matplotlib.transforms import Bbox
from PyQt5.QtCore import QRect
from PyQt5.QtGui import QPaintEvent, QRegion

# Up to this many rectangles a paint copies one by one; past it (a region of many scattered
# pieces) the bounding rectangle costs less than the paints.
MAX_RECTS = 16


def strips(rects: list[QRect]) -> list[QRect]:
    """A region's rectangles, its horizontal bands joined again: Qt splits two strips side by
    side into a piece per band where their heights differ; one above the other with the same
    columns are one strip."""
    out: list[QRect] = []
    for rect in sorted(rects, key=lambda r: (r.left(), r.width(), r.top())):
        last = out[-1] if out else None
        if (
            last is not None
            and last.left() == rect.left()
            and last.width() == rect.width()
            and last.top() + last.height() == rect.top()
        ):
            out[-1] = QRect(last.left(), last.top(), last.width(), last.height() + rect.height())
        else:
            out.append(rect)
    return out


def paint_region(event, paint: Callable[[QPaintEvent], None]) -> None:
    """Paint `event`'s region with `paint` (the canvas's own paintEvent) a strip at a time."""
    region = event.region()
    if region.rectCount() <= 1:
        paint(event)
        return
    pieces = strips(region.rects())
    if len(pieces) > MAX_RECTS:
        paint(event)
        return
    for rect in pieces:
        paint(QPaintEvent(rect))


def qt_rect(box: Bbox, canvas) -> QRect:
    """A box of figure pixels as the widget's rectangle (logical pixels, y down), grown to
    whole pixels."""
    ratio = canvas.device_pixel_ratio or 1.0
    height = canvas.figure.bbox.height
    left, right = math.floor(box.x0 / ratio), math.ceil(box.x1 / ratio)
    top, bottom = math.floor((height - box.y1) / ratio), math.ceil((height - box.y0) / ratio)
    return QRect(left, top, right - left, bottom - top)


def update_boxes(canvas, boxes: list[Bbox]) -> None:
    """Mark boxes of figure pixels for Qt's next paint, as one region: Qt paints it once with
    whatever else changed meanwhile, each strip copied on its own (paint_region). A repaint a
    box, as matplotlib's blit does, flushed the window's backing store for each (~0.3 ms)."""
    region = QRegion()
    for box in boxes:
        region += qt_rect(box, canvas)
    if not region.isEmpty():
        canvas.update(region)
