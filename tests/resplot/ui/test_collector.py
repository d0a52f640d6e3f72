"""`resplot open` freezes what its imports made, so that the collector's full passes traverse
only the session's own objects, and the window freezes those that survive too, thawing them
now and then (resplot/ui/collector.py). Each check runs in a child process: a freeze is for a
process's life."""

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

# The window's own objects frozen as they survive, cycles among them collected at the thaw.
SESSION_FREEZE = """
import gc, json, sys, weakref
from PyQt5.QtCore import QObject
from PyQt5.QtWidgets import QApplication
from resplot.ui.collector import SessionFreeze, collect_all, freeze_startup

app = QApplication(sys.argv[:1])
holder = QObject()
idle = SessionFreeze(holder).timer.isActive()  # nothing frozen at start: left alone
freeze_startup()
freeze = SessionFreeze(holder, every_s=3600, thaw_every=3)
ticking = freeze.timer.isActive()

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)

young = cycle()  # garbage before the freeze: collected by it, not frozen
kept = [Node(), Node()]
kept[0].other, kept[1].other = kept[1], kept[0]
old = weakref.ref(kept[0])
frozen_before = gc.get_freeze_count()
freeze.tick()
out = {"idle": idle, "ticking": ticking, "young gone": young() is None,
       "frozen more": gc.get_freeze_count() > frozen_before}
del kept  # a cycle of frozen objects: garbage that passes no longer see
gc.collect()
out["frozen garbage after a pass"] = old() is not None
freeze.tick()
out["after the second freeze"] = old() is not None
freeze.tick()  # the third: the thaw
out["after the thaw"] = old() is not None
out["thaws"] = freeze.thaws
out["still frozen"] = gc.get_freeze_count() > 0
page = [Node(), Node()]  # as a page's charts: frozen, then given back
page[0].other, page[1].other = page[1], page[0]
charts = weakref.ref(page[0])
freeze.tick()
del page
out["collect_all"] = collect_all() >= 2 and charts() is None and gc.get_freeze_count() > 0
print(json.dumps(out))
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


def test_the_sessions_survivors_are_frozen_and_their_cycles_collected_at_the_thaw():
    seen = run_json(SESSION_FREEZE)
    assert seen["idle"] is False and seen["ticking"] is True
    assert seen["young gone"] and seen["frozen more"]
    # Garbage among frozen objects waits for the thaw (or a page given back: collect_all).
    assert seen["frozen garbage after a pass"] and seen["after the second freeze"]
    assert seen["after the thaw"] is False and seen["thaws"] == 1 and seen["still frozen"]
    assert seen["collect_all"]
