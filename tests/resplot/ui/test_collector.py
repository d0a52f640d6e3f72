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
