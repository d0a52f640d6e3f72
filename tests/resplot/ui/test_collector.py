"""`resplot open` freezes what its imports made, so that the collector's full passes traverse
only the session's own objects (resplot/ui/collector.py). Each check runs in a child process:
a freeze is for a process's life."""

from __future__ import annotations

import pytest

from tests.fixtures.python_child import run_json
from tests.fixtures.stores import BASE_TIME, make_run, new_store

pytestmark = pytest.mark.integration  # a child process each

# The first turn of the window's event loop: what the collector sees, then quit.
OPEN_AND_LOOK = """
import gc, json, sys
from PyQt5.QtCore import QTimer
from PyQt5.QtWidgets import QApplication
from matplotlib.figure import Figure
from PyQt5.QtWidgets import QMainWindow

app = QApplication(sys.argv[:1])
seen = {}

def look():
    seen["seen"] = gc.get_objects()  # the generations the collector passes over (not frozen)
    seen["frozen"] = gc.get_freeze_count()
    app.quit()

QTimer.singleShot(0, look)
from resplot.cli import main

rc = main([sys.argv[1]])
objects = seen.pop("seen")
print(json.dumps({
    "rc": rc,
    "frozen": seen["frozen"],
    "figures seen": sum(isinstance(o, Figure) for o in objects),
    "windows seen": sum(isinstance(o, QMainWindow) for o in objects),
    "imported modules seen": sum(
        any(o is sys.modules[name] for o in objects)
        for name in ("matplotlib.figure", "PyQt5.QtWidgets", "resplot.ui.window")
    ),
}))
"""

# After the freeze, garbage made of reference cycles is still collected.
CYCLES_AFTER = """
import gc, json, weakref
from resplot.ui.collector import freeze_startup

class Node:
    pass

frozen = freeze_startup()
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
found = gc.collect()
print(json.dumps({"frozen": frozen, "collected": found, "alive": gone() is not None}))
"""


def test_the_window_freezes_its_imports_and_not_its_own_objects(tmp_path):
    path = tmp_path / "runs.db"
    engine = new_store(path)
    make_run(engine, name="a", created_at=BASE_TIME, points={"train/loss": [(0, 2.0), (1, 1.5)]})
    engine.dispose()
    seen = run_json(OPEN_AND_LOOK, str(path))
    assert seen["rc"] == 0
    # PyQt5, matplotlib, numpy, SQLAlchemy: some 100,000 objects made by imports
    assert seen["frozen"] > 50_000
    assert seen["imported modules seen"] == 0  # imported before the window: frozen
    # made after: the window and its pages' figures, which a page gives back (page_release.py)
    assert seen["windows seen"] >= 1
    assert seen["figures seen"] >= 1


def test_cycles_made_after_the_freeze_are_still_collected():
    seen = run_json(CYCLES_AFTER)
    assert seen["frozen"] > 0
    assert seen["collected"] >= 2 and not seen["alive"]


# Full passes when idle: none while input comes or a redraw is due (until the latest), one
# soon after; none while the collector is disabled; the thresholds given back.
IDLE_PASSES = """
import gc, json, sys, time
from PyQt5.QtCore import QEvent, QPointF, Qt
from PyQt5.QtGui import QMouseEvent
from PyQt5.QtWidgets import QApplication, QWidget
from resplot.ui.collector import GEN2_AFTER, IdleCollector

app = QApplication(sys.argv[:1])
before = gc.get_threshold()
full = []
gc.callbacks.append(
    lambda phase, info: full.append(1) if phase == "stop" and info["generation"] == 2 else None
)
widget = QWidget()
widget.show()
busy = [False]
idle = IdleCollector(
    widget, busy=lambda: busy[0], every_s=0.3, latest_s=3.0, quiet_s=0.4, check_ms=20
)

class Node:
    pass

def spin(seconds, moving=False):
    # Reference cycles enough for passes of generations 0 and 1 to start on their own.
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(2000):
            a, b = Node(), Node()
            a.other, b.other = b, a
        if moving:
            point = QPointF(10, 10)
            move = QMouseEvent(QEvent.MouseMove, point, Qt.NoButton, Qt.NoButton, Qt.NoModifier)
            QApplication.sendEvent(widget, move)
        app.processEvents()
        time.sleep(0.005)

out = {"gen2_after": GEN2_AFTER}
spin(1.5, moving=True)  # input all along, short of latest_s
out["while moving"] = [len(full), idle.passes, gc.get_count()[2]]
spin(1.0)  # quiet
out["when quiet"] = [len(full), idle.passes, idle.forced]
busy[0] = True
spin(1.0)
out["busy, early"] = [len(full), idle.passes]
spin(3.0)  # past latest_s
out["busy, late"] = [len(full), idle.passes, idle.forced]
busy[0] = False
gc.disable()
passes = idle.passes
spin(1.0)
out["disabled"] = idle.passes - passes
gc.enable()
idle.stop()
out["thresholds"] = [list(before), list(gc.get_threshold())]
print(json.dumps(out))
"""


def test_full_passes_wait_for_the_window_to_be_idle():
    seen = run_json(IDLE_PASSES)
    n = seen["gen2_after"]
    moving, passes, pending = seen["while moving"]
    assert moving == 0 and passes == 0  # none on its own, none under input
    assert pending >= n  # ... though one was due
    full, passes, forced = seen["when quiet"]
    assert passes >= 1 and forced == 0 and full == passes  # each pass one of generation 2
    full_early, passes_early = seen["busy, early"]
    assert full_early == passes_early
    full_late, passes_late, forced_late = seen["busy, late"]
    assert passes_early == passes  # a redraw due: held off
    assert forced_late >= 1 and passes_late > passes_early and full_late == passes_late
    assert seen["disabled"] == 0
    before, after = seen["thresholds"]
    assert after == before
