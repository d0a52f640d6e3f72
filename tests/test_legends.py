"""Every chart names its runs at any run count: the run strip above the charts lists all 20
runs of a sweep in the window and in `resplot snapshot`, and small charts keep their own
legend with each series' latest value."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.charts import render
from resplot.cli import main
from resplot.headless import Loaded
from resplot.state import ViewState
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window

NAMES = [f"sweep-lr{i:02d}" for i in range(20)]


@pytest.fixture
def sweep(tmp_path):
    path = tmp_path / "sweep20.db"
    engine = new_store(path)
    for i, name in enumerate(NAMES):
        steps = range(0, 500, 5)
        make_run(engine, name=name, created_at=BASE_TIME + i, points={
            "train/loss": [(s, 3.0 + 0.05 * i + np.exp(-s / 100)) for s in steps],
            "valid/loss": [(s, 3.1 + 0.05 * i) for s in steps[::20]],
        })  # fmt: skip
    engine.dispose()
    return path


def _strip_labels(page) -> list[str]:
    return [t.get_text() for t in page.strip.legend.get_texts()]


def _strip_above_the_charts(page) -> None:
    page.figure.canvas.draw()
    box = page.strip.legend.get_window_extent()
    assert box.y0 >= max(ax.title.get_window_extent().y1 for ax in page.axes) - 1
    assert box.x1 <= page.figure.bbox.x1 + 1  # all of it inside the figure


def test_a_snapshot_of_twenty_runs_names_every_run(sweep, tmp_path, capsys):
    with Loaded([str(sweep)]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, ViewState(), refs, fetch=loaded.fetch)
        assert sorted(_strip_labels(page)) == NAMES
        _strip_above_the_charts(page)
    out = tmp_path / "sweep.png"
    assert main(["snapshot", str(sweep), "-o", str(out)]) == 0
    assert "20 runs" in capsys.readouterr().err


def test_the_window_names_twenty_runs_and_small_charts_show_latest_values(sweep, qtbot, tmp_path):
    win = open_window(qtbot, [sweep], tmp_path / "settings.json", runs=20, size=(1280, 800))
    page = win.current_page()
    strip = win.pages["training"].strip  # the window draws the strip in Qt, above the canvas
    assert strip.isVisible() and all(name in strip.text() for name in NAMES)
    for ref in win.state.ticked:  # in each run's colour
        assert win.state.look(ref).color in strip.text()
    # The loss chart has 40 series: no legend of its own to cover it; the strip names them.
    assert page.axes[0].get_legend() is None
    win.table.tick_visible("none")
    ref = next(r.ref for r in win.cache.runs() if r.name == "sweep-lr03")
    win.tick(ref, True)
    win.redraw_now()
    texts = [t.get_text() for t in page.axes[0].get_legend().get_texts()]
    last = 3.0 + 0.05 * 3 + np.exp(-495 / 100)
    assert texts[0] == f"sweep-lr03 train  {last:.4g}"
    win.close()
