"""A chart page left unshown for a while gives back its charts (issue 31, memory flat).

Each page built its figure the first time it was shown and kept it for the rest of the
session: its artists (the All page ~3,400 of them, ~100 MB), its tracks' arrays and the Agg
canvas's buffer. The window's memory then grew in steps as pages were first visited. A page
hidden (another tab shown) for RELEASE_AFTER_S asks each holder to give back what it holds,
through its own `release()`: the page its figure (axes, tracks, legends and notes with their
bitmaps), the canvas its Agg buffer, the layers their saved axes, the crosshair its pixels and
the chart it pointed at, the drag its frame, the toolbar its back and forward views; the
legends' shared scratch canvas goes too. What builds it again (its settings, the cache) stays.
Shown again, it is refreshed and drawn as a first view is (a full draw, the tile wait's
stand-in while tiles load).

A page the user zoomed or panned keeps its charts: a rebuild follows the data again, and the
user's view must not change behind their back."""

from __future__ import annotations

import gc
from collections.abc import Callable

from PyQt5.QtCore import QEvent, QObject, QTimer

from resplot.draw.bitmap_draw import release_scratch
from resplot.ui.heap_trim import trim_heap

RELEASE_AFTER_S = 60.0  # unshown this long, a page gives back its charts


class PageRelease(QObject):
    """Watches one PageView's show and hide events; `after_s` is settable (tests).
    `on_shown`: refresh and draw the page (the window's view_changed)."""

    def __init__(
        self, view, on_shown: Callable[[], None], after_s: float = RELEASE_AFTER_S
    ) -> None:
        super().__init__(view)
        self.view = view
        self.on_shown = on_shown
        self.after_s = after_s
        self.released = False  # the charts were given back and not built again since
        self.releases = 0  # times given back (tests read it)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self._expired)
        view.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        # A spontaneous hide (the window minimised) keeps the page: only another tab hides it.
        if event.type() == QEvent.Hide and not event.spontaneous():
            self.timer.start(max(0, int(self.after_s * 1000)))
        elif event.type() == QEvent.Show:
            self.timer.stop()
            if self.released:
                self.released = False
                self.on_shown()  # refreshed and drawn as a first view
        return False

    def _expired(self) -> None:
        if not self.view.isVisible():
            self.release()

    def release(self) -> bool:
        """Give back the page's artists and pixels; False if the user's zoom or pan keeps them."""
        view = self.view
        if view.page.user_view() or view.drag.active:
            return False
        view.crosshair.release()  # first: it puts its pixels back into the canvas's buffer
        view.drag.release()
        view.toolbar.release()
        view.layers.release()
        view.page.release()
        view.canvas.release()
        release_scratch()
        gc.collect()  # the artists' reference cycles (axes and their children), then the heap
        trim_heap()
        self.released = True
        self.releases += 1
        return True
