"""Python's cyclic garbage collector kept off what the window's process made at start.

A full pass of the collector (generation 2) traverses every container object alive: in the
window ~165,000 at start (the modules, classes and functions that PyQt5, matplotlib, numpy,
pyarrow and SQLAlchemy's imports made) and ~220,000 once every page is built, 70-140 ms a pass
on the GUI thread here. A 30-minute soak of the window ran such a pass every ~11 s: in 8
minutes 43 passes, 245 ms median, 369 ms the longest, 18 of them over the 250 ms stall target
(docs/benchmarks/viewer.md). Objects made by imports live as long as the process and take part
in no cycle that could become garbage, so they are frozen (`gc.freeze`, the permanent
generation): a pass then traverses what the session made since (the pages' artists, the tiles,
the table) and costs 17-58 ms.

Frozen at the start of `resplot open`, before the window exists: the pages' figures are built
after, and a page given back (resplot/ui/page_release.py) leaves reference cycles the
collector must still see. The full passes then run when the window is idle (IdleCollector).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from PyQt5.QtCore import QCoreApplication, QEvent, QObject, QTimer


def freeze_startup() -> int:
    """Freeze every object alive now, after a collection of what is garbage already; returns
    how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


# -- full passes when the window is idle -------------------------------------------------------
GEN2_AFTER = 10  # passes of generation 1 before a full pass is due (CPython's own threshold)
EVERY_S = 10.0  # a due full pass waits for the window to be idle, at most this often ...
LATEST_S = 30.0  # ... and runs this long after the last one, idle or not
QUIET_S = 0.5  # idle: no input for this long and no redraw due
CHECK_MS = 250
_NEVER = 1 << 30  # a threshold no count of generation-1 passes reaches

_INPUT = frozenset(
    {
        QEvent.MouseMove,
        QEvent.MouseButtonPress,
        QEvent.MouseButtonRelease,
        QEvent.MouseButtonDblClick,
        QEvent.Wheel,
        QEvent.KeyPress,
        QEvent.KeyRelease,
        QEvent.Resize,
    }
)


class IdleCollector(QObject):
    """The collector's full passes (generation 2) run when the window is idle, not whenever an
    allocation tips a count: a full pass traverses every object the session made (the pages'
    artists, the tiles, the table), 60-290 ms here, and started inside a zoom's or a page's
    draw (which allocates the most) it lengthened that stall by as much: a 10-minute soak had
    44 such passes, median 186 ms (docs/benchmarks/viewer.md). Generations 0 and 1 (a few ms)
    still run on their own. A pass is due after GEN2_AFTER passes of generation 1, as CPython
    would make it; it waits for no input for QUIET_S and no redraw due (`busy`), at most
    `latest_s` after the last one. None while the collector is disabled (a source's read holds
    it off: schema/store/gc_pause.py). `stop()` gives the thresholds back."""

    def __init__(
        self,
        parent: QObject,
        busy: Callable[[], bool] = lambda: False,
        every_s: float = EVERY_S,
        latest_s: float = LATEST_S,
        quiet_s: float = QUIET_S,
        check_ms: int = CHECK_MS,
    ) -> None:
        super().__init__(parent)
        self.passes = 0  # full passes run
        self.forced = 0  # ... of them, run at latest_s though the window was not idle
        self._busy, self.every_s, self.latest_s, self.quiet_s = busy, every_s, latest_s, quiet_s
        self._last = self._input = time.monotonic()
        self._thresholds = gc.get_threshold()
        gc.set_threshold(self._thresholds[0], self._thresholds[1], _NEVER)
        app = QCoreApplication.instance()
        if app is not None:
            app.installEventFilter(self)
        self.timer = QTimer(self)
        self.timer.setInterval(check_ms)
        self.timer.timeout.connect(self.check)
        self.timer.start()

    def eventFilter(self, obj, event) -> bool:
        if event.type() in _INPUT:
            self._input = time.monotonic()
        return False

    def check(self) -> None:
        """Run a full pass if one is due and the window is idle (or it is past due)."""
        now = time.monotonic()
        if not gc.isenabled() or gc.get_count()[2] < GEN2_AFTER or now - self._last < self.every_s:
            return
        idle = now - self._input >= self.quiet_s and not self._busy()
        if idle or now - self._last >= self.latest_s:
            self.forced += not idle
            gc.collect()
            self.passes += 1
            self._last = time.monotonic()

    def stop(self) -> None:
        self.timer.stop()
        app = QCoreApplication.instance()
        if app is not None:
            app.removeEventFilter(self)
        gc.set_threshold(*self._thresholds)


def collect_when_idle(window) -> IdleCollector:
    """What `resplot open` runs its window with: full passes when it is idle."""
    return IdleCollector(window, busy=window.redraw_due)
