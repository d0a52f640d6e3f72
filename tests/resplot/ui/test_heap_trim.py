"""The window hands the freed heap back to the system each minute (resplot/ui/heap_trim.py):
holes glibc keeps between blocks still in use, which only malloc_trim returns. Run in a child
process, whose heap is its own."""

from __future__ import annotations

import pytest

from tests.fixtures.python_child import run_json

pytestmark = pytest.mark.integration  # a child process, the window

HOLES_THEN_TRIMS = """
import gc, json, time
from PyQt5.QtCore import QObject
from PyQt5.QtWidgets import QApplication
from resplot.ui.heap_trim import HeapTrim

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS"))

app = QApplication([])
owner = QObject()
trim = HeapTrim(owner, every_s=0.2)
# 2 kB blocks (past pymalloc: glibc's), one in 64 kept: ~190 MB of holes between them
blocks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]
kept = blocks[::64]
del blocks
gc.collect()
held = rss()
end = time.monotonic() + 5
while trim.trims < 1 and time.monotonic() < end:
    app.processEvents()
    time.sleep(0.01)
print(json.dumps({"held": held, "after": rss(), "trims": trim.trims, "kept": len(kept)}))
"""


def test_the_heap_freed_between_blocks_in_use_is_handed_back_by_the_timer():
    seen = run_json(HOLES_THEN_TRIMS, timeout=120)
    assert seen["trims"] >= 1 and seen["kept"] == 1563
    assert seen["held"] - seen["after"] > 100  # MB: the holes, not the blocks kept (3 MB)


def test_the_window_trims_each_minute(qtbot):
    from resplot.data.cache import SeriesCache
    from resplot.ui.heap_trim import TRIM_EVERY_S
    from resplot.ui.window import MainWindow

    win = MainWindow(SeriesCache())
    qtbot.addWidget(win)
    assert win.heap_trim.timer.isActive()
    assert win.heap_trim.timer.interval() == int(TRIM_EVERY_S * 1000) == 60_000
