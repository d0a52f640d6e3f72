"""The freed heap handed back to the system, now and then (issue 31, memory flat).

glibc keeps what the window frees between blocks still in use in its arenas: a full draw's
arrays, a resized canvas's buffers, the artists of a page given back. Such holes are reused,
but the RSS never falls below their high-water mark: a 30-minute soak of the window ended with
95 MB of its 745 MB free heap that `malloc_trim` alone returned (docs/benchmarks/viewer.md).
The window trims every TRIM_EVERY_S: 3.5-5.5 ms a trim with a 12-run window's heap (a page
given back trims at once, resplot/ui/page_release.py). Fixing glibc's thresholds instead
(mmap for every block of 1 MB or more) cost every draw its page faults: tried and reverted.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
from collections.abc import Callable

from PyQt5.QtCore import QObject, QTimer

TRIM_EVERY_S = 60.0


@functools.cache
def _libc():
    # find_library runs ldconfig (or a compiler) to find it: once a session, not a trim.
    return ctypes.CDLL(ctypes.util.find_library("c"))


def trim_heap() -> None:
    """Hand the freed heap back to the system (the free pages between blocks in use too)."""
    # Not glibc (macOS, musl): its allocator returns memory its own way.
    with contextlib.suppress(OSError, AttributeError, TypeError):
        _libc().malloc_trim(0)


class HeapTrim(QObject):
    """Trims the heap every `every_s` while its parent (the window) lives; `trims` counts.
    `before` runs first at each trim: what lets go of memory then (the tile cache's idle
    detail tiles) has it handed back by the same trim."""

    def __init__(
        self,
        parent: QObject,
        every_s: float = TRIM_EVERY_S,
        before: Callable[[], object] | None = None,
    ) -> None:
        super().__init__(parent)
        self.trims = 0
        self._before = before
        self.timer = QTimer(self)
        self.timer.setInterval(max(1, int(every_s * 1000)))
        self.timer.timeout.connect(self._trim)
        self.timer.start()

    def _trim(self) -> None:
        if self._before is not None:
            self._before()
        trim_heap()
        self.trims += 1
