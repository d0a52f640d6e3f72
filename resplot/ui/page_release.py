"""A chart page left unshown for a while gives back its charts (issue 31, memory flat).

Each page built its figure the first time it was shown and kept it for the rest of the
session: its artists (the All page ~3,400 of them, ~100 MB), its tracks' arrays and the Agg
canvas's buffer. The window's memory then grew in steps as pages were first visited. A page
hidden (another tab shown) for RELEASE_AFTER_S clears its figure and drops the canvas's
renderer, the saved background of its layers, the crosshair's pixels and axes and the drag's
frame; what builds it again (its settings, the cache) stays. Shown again, it is refreshed and
drawn as a first view is (a full draw, the tile wait's stand-in while tiles load).

A page the user zoomed or panned keeps its charts: a rebuild follows the data again, and the
user's view must not change behind their back."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc

import numpy as np
from matplotlib.transforms import IdentityTransform
from PyQt5.QtCore import QEvent, QObject, QTimer

RELEASE_AFTER_S = 60.0  # unshown this long, a page gives back its charts


def _trim() -> None:
    """Hand the freed heap back to the system: glibc keeps what thousands of small artists
    freed (~100 MB after the All page) in its arenas, so the RSS would not fall without it."""
    # Not glibc (macOS, musl): its allocator returns memory its own way.
    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)


class PageRelease(QObject):
    """Watches one PageView's show and hide events; `after_s` is settable (tests)."""

    def __init__(self, view, after_s: float = RELEASE_AFTER_S) -> None:
        super().__init__(view)
        self.view = view
        self.after_s = after_s
        self.released = False  # the charts were given back and not built again since
        self.releases = 0  # times given back (tests read it)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._expired)
        view.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        # A spontaneous hide (the window minimised) keeps the page: only another tab hides it.
        if event.type() == QEvent.Hide and not event.spontaneous():
            self._timer.start(max(0, int(self.after_s * 1000)))
        elif event.type() == QEvent.Show:
            self._timer.stop()
            if self.released:
                self.released = False
                self.view._on_view_changed()  # refresh and draw it as a first view
        return False

    def _expired(self) -> None:
        if not self.view.isVisible():
            self.release()

    def release(self) -> bool:
        """Give back the page's artists and pixels; False if the user's zoom or pan keeps them."""
        view = self.view
        page = view.page
        if not page.follow or page._user_y or view.drag.active:
            return False
        cross = view.crosshair
        cross.hide()
        # The overlay's collections point at a chart's transform and box: they kept its axes.
        cross.dots.set_offsets(np.empty((0, 2)))
        cross.dots.set_offset_transform(IdentityTransform())
        cross.dots.set_clip_box(None)
        cross.rules.set_segments([])
        cross._under, cross.drawn = [], False
        view.drag._base, view.drag._charts = None, []
        view.toolbar.update()  # the zoom tool's back and forward views of the old axes
        layers = view.layers
        layers.background, layers.drawn, layers._size = None, [], None
        page._rebuild([], page.x_mode, page.grid)  # the figure cleared, its lists emptied
        page._layout = None  # the next refresh lays the page out anew
        page.specs, page._x_steps = [], {}
        canvas = view.canvas
        if hasattr(canvas, "renderer"):
            del canvas.renderer  # the Agg buffer; get_renderer makes one for the next draw
        canvas._lastKey = None
        gc.collect()  # the artists' reference cycles (axes and their children), then the heap
        _trim()
        self.released = True
        self.releases += 1
        return True
