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
"""

from __future__ import annotations

import gc


def freeze_startup() -> int:
    """Freeze every object alive now, after a collection of what is garbage already; returns
    how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
