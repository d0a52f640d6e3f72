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


def test_the_window_trims_each_minute_after_letting_idle_zoom_detail_go(qtbot, monkeypatch):
    import numpy as np

    import resplot.data.tiles as tiles_mod
    from resplot.data.cache import DETAIL_IDLE_S, SeriesCache
    from resplot.data.model import RunRef
    from resplot.data.tiles import Tile, empty_columns
    from resplot.ui.heap_trim import TRIM_EVERY_S
    from resplot.ui.window import MainWindow

    clock = [1000.0]  # the tile cache's time.monotonic(), moved by hand
    monkeypatch.setattr(tiles_mod.time, "monotonic", lambda: clock[0])
    cache = SeriesCache()
    ref = RunRef("local", "a.db", "u1")

    def ten_rows(level: int) -> Tile:
        cols = {c: np.zeros(10, a.dtype) for c, a in empty_columns(level).items()}
        return Tile(level, 0, cols, 0)

    # raw and fine: a zoom's detail; 1: the overview
    tiles = {level: ten_rows(level) for level in (0, -2, 1)}
    for tile in tiles.values():
        cache.put_tile(ref, "loss", tile)
    held = cache.tile_bytes
    win = MainWindow(cache)
    qtbot.addWidget(win)
    assert win.heap_trim.timer.isActive()
    assert win.heap_trim.timer.interval() == int(TRIM_EVERY_S * 1000) == 60_000
    clock[0] += DETAIL_IDLE_S - 1
    win.heap_trim.timer.timeout.emit()
    assert win.heap_trim.trims == 1 and cache.tile_bytes == held  # not idle long enough yet
    clock[0] += 1
    win.heap_trim.timer.timeout.emit()
    assert win.heap_trim.trims == 2
    assert cache.tile_bytes == tiles[1].nbytes  # the overview's tile alone
