"""A page's refresh worked out ahead, a turn of the event loop at a time.

A zoom, pan or page switch asks each series of the charts in view for its view of the new
range: its tiles looked up and joined, buckets turned into points, its smoothed curve (a
page's refresh, resplot/draw/charts.py). On the All page of a 12-run sweep at 1920×1080 that
was ~90 ms of one turn, two thirds of it those views, and the soak's longest stalls were such
refreshes, one turn each, the hover line and the poll waiting. Here the views are worked out
first, a series at a time (ChartPage.warm: nothing the page shows changes, the hover reads
the series as drawn), yielding to the event loop once a turn has spent TURN_S; the refresh
then finds them made and sets the artists in one short turn, and the draw in pieces follows
(resplot/ui/pieces.py). Until the refresh the canvas holds a draw asked for meanwhile: drawn
then, it would be the new limits over the old series, drawn again once refreshed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from resplot.ui.pieces import TURN_S


class WarmUp:
    """The warm-up of one page's next refresh: `step` runs it until a turn's time is spent."""

    def __init__(self, turn_s: float = TURN_S) -> None:
        self.turn_s = turn_s
        self._page: object | None = None  # the page warmed
        self._steps: Iterator[None] | None = None  # ... its warm-up under way
        self._ready = False  # ... done in a turn that has spent most of its time: refresh next
        self.turns = 0  # turns that yielded (tests and benchmarks read them)

    def step(self, page: object, warm: Callable[[], Iterator[None]]) -> bool:
        """Warm `page` (`warm()` makes its warm-up, ChartPage.warm) for up to a turn: True to
        be called again next turn, False when its refresh should run now."""
        if self._ready and self._page is page:
            self.forget()
            return False
        if self._steps is None or self._page is not page:
            self._page, self._steps = page, warm()
        start = time.perf_counter()
        for _ in self._steps:
            if time.perf_counter() - start >= self.turn_s:
                self.turns += 1
                return True
        self._steps = None
        # The refresh takes about a third of what the warm-up did: after a long one, in a turn
        # of its own.
        if time.perf_counter() - start >= self.turn_s / 2:
            self._ready = True
            self.turns += 1
            return True
        self.forget()
        return False

    def pending(self, page: object) -> bool:
        """Whether `page`'s refresh waits for its warm-up (a draw now would be a stale one)."""
        return self._page is page and (self._steps is not None or self._ready)

    def forget(self) -> None:
        """Drop the warm-up under way (the view it was for changed, or a refresh ran)."""
        if self._steps is not None:
            self._steps.close()
        self._page, self._steps, self._ready = None, None, False
