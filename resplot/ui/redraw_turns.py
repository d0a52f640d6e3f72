"""A redraw of a chart page spread over turns of the event loop.

A zoom, pan, resize or page switch asks each series of the charts in view for its view of the
new range (its tiles looked up and joined, buckets turned into points, its smoothed curve),
then sets each chart's artists from them (cut into pixel columns, limits, legend). On the All
page of a 12-run sweep at 1920×1080 that was 60-90 ms of one turn of the event loop, and the
soak's longest stalls were such refreshes, the hover line and the poll waiting behind them.

Here the window's redraw runs as steps (MainWindow._redraw_due): the series' views worked out
a series at a time (ChartPage.warm: nothing the page shows changes, the hover reads the series
as drawn), then the page refreshed a chart at a time (ChartPage.refresh_steps), then drawn in
pieces (resplot/ui/pieces.py). A turn takes steps until it has spent TURN_S. Until the refresh
ends the canvas holds a draw asked for meanwhile (drawn then, it would be drawn again); a
change of view drops the steps left (they were for the view before); data that arrive
meanwhile are drawn by one more redraw after this one (`again`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from resplot.ui.pieces import TURN_S


class RedrawTurns:
    """The redraw of one page under way: `step` runs it until a turn's time is spent."""

    def __init__(self, turn_s: float = TURN_S) -> None:
        self.turn_s = turn_s
        self._page: object | None = None  # the page redrawn
        self._steps: Iterator[None] | None = None  # ... the steps left
        self.again = False  # data came meanwhile: redraw once more after this one
        self._running = False  # a step is running
        self._dropped = False  # ... and asked to drop the steps left (forget)
        self.turns = 0  # turns that yielded (tests and benchmarks read them)

    def step(self, page: object, steps: Callable[[], Iterator[None]]) -> bool:
        """Run the redraw of `page` (`steps()` makes it) for up to a turn: True to be called
        again next turn, False when it is done."""
        if self._steps is None or self._page is not page:
            self.forget()
            self._page, self._steps = page, steps()
        start = time.perf_counter()
        self._running = True
        try:
            for _ in self._steps:
                if self._dropped:
                    self._running = False
                    self.forget()
                    return True  # (for the view it was for: the next one's from the start)
                if time.perf_counter() - start >= self.turn_s:
                    self.turns += 1
                    return True
        finally:
            self._running = False
        self._page, self._steps, self._dropped = None, None, False
        return False

    @property
    def busy(self) -> bool:
        return self._steps is not None

    def pending(self, page: object) -> bool:
        """Whether `page`'s redraw is under way (a draw of it now would be a stale one)."""
        return self._steps is not None and self._page is page

    def forget(self) -> None:
        """Drop the steps left (the view they were for changed, or a redraw ran whole); asked
        by a step itself (a refresh's resize of the canvas), after that step."""
        if self._running:
            self._dropped = True
            return
        if self._steps is not None:
            self._steps.close()
        self._page, self._steps, self._dropped = None, None, False
