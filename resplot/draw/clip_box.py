"""One clip box a chart, shared by the artists drawn in it.

An artist added to an axes is clipped to the axes' patch: `Artist.set_clip_path(ax.patch)`
gives each artist its own `TransformedBbox` of the unit box through the patch's transform,
a chain of transform nodes (the patch's `BboxTransformTo`, its rotation about a point, their
composites) held by weak links to their parents. That chain is 41 of the 54 objects Python's
cyclic collector traverses for a line drawn in a chart (a bare Line2D: 13), and a full pass
of the collector, a pause of the GUI thread, lasts as long as the objects alive it traverses
(docs/benchmarks/viewer.md, "one clip box a chart"). Every such box of an axes holds the same
rectangle, so its artists share one, made the same way: the same clip, the same pixels.
A resize then invalidates one box an axes, not one an artist.
"""

from __future__ import annotations

import threading
from weakref import WeakKeyDictionary

from matplotlib.artist import Artist
from matplotlib.transforms import Bbox, TransformedBbox

# The axes' shared box (it holds the axes' transforms, not the axes: an axes let go drops it).
# Exports build and draw figures on worker threads.
_boxes: WeakKeyDictionary = WeakKeyDictionary()
_lock = threading.Lock()


def axes_clip_box(ax) -> TransformedBbox:
    """The box `set_clip_path(ax.patch)` gives an artist, one for all of the axes' artists."""
    with _lock:
        box = _boxes.get(ax)
        if box is None:
            box = _boxes[ax] = TransformedBbox(Bbox.unit(), ax.patch.get_transform())
        return box


def share_clip_box(ax, *artists: Artist) -> None:
    """Clip `artists`, added to `ax` (which gave each its own box), to the axes' shared box."""
    box = axes_clip_box(ax)
    for artist in artists:
        artist.set_clip_box(box)
