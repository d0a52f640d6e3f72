"""When the window draws a page whose tiles are on their way: at once when they come, a coarser
stand-in only if they are slow, never a page of empty axes in between. And what it says when
the tiles in view hold more than the cache's bound."""

from __future__ import annotations

from PyQt5.QtCore import QTimer

from resplot.ui.page_view import PageCanvas

# While the tiles a view asked for are on their way, the stand-in (a coarser level) is drawn
# only if they take longer than this. A full draw of a page costs 150-300 ms of the GUI thread,
# and the tiles that arrive during it wait for it: at 250 ms, a zoom into the 34M-point store
# (tiles in ~250 ms over SSH) often drew twice and took 0.6 s instead of 0.4 s. Until then the
# canvas shows what it had, in the new limits.
STAND_IN_DELAY_MS = 500
# Where the stand-in would be the page's first picture (a first view in the fine range: level 1
# comes at once, the fine tiles after the host has folded every raw point in view, ~1 s for a
# training page of 8 runs x 20,000 steps), the empty page waits only this long: a local store's
# fine tiles come within it (one draw), a remote page shows level 1 meanwhile.
FIRST_STAND_IN_DELAY_MS = 100


class TileWait:
    """A MainWindow's rule for drawing the page in view while the tiles its last refresh asked
    for load (`after_refresh`), whether their arrival should draw at once (`awaiting`), and
    its word when the tiles in view pass the bound (`say_over`)."""

    def __init__(self, win) -> None:
        self.win = win
        self.awaiting = False  # the last refresh asked for tiles: draw when they come
        self.stand_in = QTimer(win)
        self.stand_in.setSingleShot(True)
        self.stand_in.setInterval(STAND_IN_DELAY_MS)
        self.stand_in.timeout.connect(self._stand_in)
        self._pictured: dict[str, bool] = {}  # page: whether its last draw showed data
        self._tiles_read = -1  # the cache's tiles_put when the last redraw read it
        self._said_over = False  # the status bar has said the tiles in view pass the bound

    def _stand_in(self) -> None:
        """Draw the page with its coarser stand-ins, unless a redraw of it is under way over
        turns (resplot/ui/redraw_turns.py): its charts half refreshed, and its end presents."""
        if not self.win.redraw_turns.busy:
            self.win.page_view().present()

    def watch(self, page: str, view) -> None:
        """Follow the draws of one page's view (a chart page or the Ranks page)."""
        view.canvas.mpl_connect("draw_event", lambda _e: self._drawn(page, view))
        if isinstance(view.canvas, PageCanvas):
            view.canvas.hold_resize_draw = lambda: self._first_tiles_pending(view)

    def after_refresh(self, view, waiting: int) -> None:
        """Draw what the page's refresh set, or fetch the `waiting` tiles it asked for first."""
        poller = self.win.poller
        self.awaiting = bool(waiting) and poller is not None
        if self.awaiting:
            poller.poll_now()  # the charts want detail: fetch it now, not at the next tick
            # Draw the stand-in (coarser tiles) if the finer ones are slow; with nothing to
            # stand in (a first view), a draw would only hold up the one that shows the data.
            if view.page.shows_data() and not self.stand_in.isActive():
                first = not self.pictured(self.win.state.page)
                self.stand_in.start(FIRST_STAND_IN_DELAY_MS if first else STAND_IN_DELAY_MS)
            return
        self.stand_in.stop()
        view.present()

    def say_over(self) -> None:
        """Once each time it happens: the charts in view need more tile memory than
        tile_cache_mb, so the cache holds them above it (rather than drop tiles it draws)."""
        win = self.win
        over = win.cache.tiles_over
        if over and not self._said_over:
            held, limit = (win.cache.tile_limit + over) >> 20, win.cache.tile_limit >> 20
            win.statusBar().showMessage(
                f"the charts in view hold {held} MB of tiles, above tile_cache_mb ({limit} MB): "
                f"all kept; raise tile_cache_mb in {win.settings_path or 'the settings'} or "
                "plot fewer runs",
                30000,
            )
        self._said_over = bool(over)

    def reading(self) -> None:
        """A redraw starts reading the cache."""
        self._tiles_read = self.win.cache.tiles_put

    def drew_every_tile(self) -> bool:
        """Whether the last redraw read every tile the cache holds: none has come since (a
        tile put by a poller is drawn only once its signal, queued, reaches this thread)."""
        return self._tiles_read == self.win.cache.tiles_put

    def pictured(self, page: str) -> bool:
        """Whether the last draw of `page` showed data."""
        return self._pictured.get(page, False)

    def _drawn(self, page: str, view) -> None:
        self._pictured[page] = view.page.shows_data()

    def _first_tiles_pending(self, view) -> bool:
        """Whether the page has nothing to draw yet but has asked for tiles: their arrival
        draws it."""
        if self.win.poller is None or view.page.shows_data():
            return False
        return self.awaiting or self.win.cache.wanted_count() > 0
