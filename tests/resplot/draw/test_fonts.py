"""Chinese run names and keys draw as glyphs, not boxes, in snapshots and in the window: a CJK
font (CI installs fonts-noto-cjk, see .ci/run) joins matplotlib's fallback chain."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from resplot.cli import main
from resplot.draw import fonts
from tests.fixtures.postgres import missing_system_dependency
from tests.fixtures.stores import make_run, new_store
from tests.fixtures.windows import open_window

NAME = "学习率扫描-运行"
KEY = "训练/损失"


@pytest.fixture
def cjk_store(tmp_path):
    if fonts.find_cjk() is None:
        missing_system_dependency("a CJK font (apt-get install fonts-noto-cjk)")
    path = tmp_path / "中文.db"
    engine = new_store(path)
    steps = range(0, 200, 2)
    make_run(
        engine,
        name=NAME,
        points={
            KEY: [(s, 3.0 + np.exp(-s / 40)) for s in steps],
            "train/loss": [(s, 3.0 + np.exp(-s / 40)) for s in steps],
        },
    )
    engine.dispose()
    return path


def _missing_glyphs(caught) -> list[str]:
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def test_a_snapshot_of_chinese_keys_and_run_names_misses_no_glyph(cjk_store, tmp_path, capsys):
    out = tmp_path / "snap.png"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["snapshot", str(cjk_store), "-o", str(out), "--keys", "训练/*"]) == 0
    assert out.stat().st_size > 0
    assert _missing_glyphs(caught) == []
    assert "CJK" not in capsys.readouterr().err  # a font is installed: no install hint


@pytest.mark.integration
def test_the_window_draws_chinese_names_without_missing_glyphs(cjk_store, qtbot, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        win = open_window(qtbot, [cjk_store], tmp_path / "settings.json", runs=1)
        win.set_custom_keys("训练/*")
        win.set_page("custom")
        win.redraw_now()
        win.current_page().figure.canvas.draw()
        strip = win.pages["custom"].strip.text().replace("\u2011", "-")  # non-breaking "-"
        legend = [t.get_text() for t in win.current_page().axes[0].get_legend().get_texts()]
        win.grab()
        win.close()
    assert NAME in strip and legend[0].startswith(NAME)  # the run strip and the chart legend
    assert _missing_glyphs(caught) == []


def test_cjk_text_is_recognised_and_latin_is_not():
    assert fonts.has_cjk(["loss", KEY])
    assert fonts.has_cjk(["ラン"]) and fonts.has_cjk(["실행"])
    assert not fonts.has_cjk(["train/loss", "lr-3e-4", "café"])


def test_without_a_cjk_font_the_note_is_said_once(monkeypatch):
    # Stand-in for a machine without CJK fonts (this one has one, and fonts cannot be
    # uninstalled from a test): the font lookup's cached answer is set to "none found".
    monkeypatch.setattr(fonts, "_checked", True)
    monkeypatch.setattr(fonts, "_found", None)
    monkeypatch.setattr(fonts, "_said", False)
    assert fonts.missing_note(["train/loss", "lr-3e-4"]) is None  # nothing to say: no CJK
    note = fonts.missing_note([NAME])
    assert note is not None and "fonts-noto-cjk" in note
    assert fonts.missing_note([KEY]) is None  # once
