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
collector must still see.

A pass still traversed the session's objects: 140-290 ms in a soak with two live runs (two
loggers sharing the two cores), ~4 passes a minute, a third of them over 250 ms. So the window
freezes what it made too (`SessionFreeze`): every FREEZE_EVERY_S, a collection of the objects
made since the last freeze (young ones mostly: 5-30 ms), then a freeze of what survived it. A
frozen object is still freed when nothing refers to it; only garbage in reference cycles among
frozen objects waits, for the thaw every THAW_EVERY freezes (all objects put back and
collected, then frozen again: one full pass every ten minutes) or for a page given back
(`collect_all`: its charts are such cycles).
"""

from __future__ import annotations

import gc

from PyQt5.QtCore import QObject, QTimer

FREEZE_EVERY_S = 30.0
THAW_EVERY = 20  # freezes: a thaw every ten minutes


def freeze_startup() -> int:
    """Freeze every object alive now, after a collection of what is garbage already; returns
    how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def collect_all() -> int:
    """Collect every object's garbage, the frozen ones' too (frozen again after, if any
    were); returns how many objects were found unreachable."""
    frozen = gc.get_freeze_count()
    if frozen:
        gc.unfreeze()
    found = gc.collect()
    if frozen:
        gc.freeze()
    return found


class SessionFreeze(QObject):
    """Freezes the window's surviving objects every `every_s`, thaws and collects them all
    every `thaw_every` freezes (the module's docstring), where the process froze its imports
    at start (`resplot open`: freeze_startup); elsewhere (tests, other hosts of the window) it
    leaves the collector alone. `freezes` and `thaws` count."""

    def __init__(
        self, parent: QObject, every_s: float = FREEZE_EVERY_S, thaw_every: int = THAW_EVERY
    ) -> None:
        super().__init__(parent)
        self.thaw_every = thaw_every
        self.freezes = self.thaws = 0
        self.timer = QTimer(self)
        self.timer.setInterval(max(1, int(every_s * 1000)))
        self.timer.timeout.connect(self.tick)
        if gc.get_freeze_count() and gc.isenabled():
            self.timer.start()

    def tick(self) -> None:
        self.freezes += 1
        if self.freezes % self.thaw_every == 0:
            collect_all()
            self.thaws += 1
            return
        gc.collect()  # the unfrozen: what the session made since the last freeze
        gc.freeze()
