"""The window offers as x axes the counters a run logged by name and any key that rises."""

from __future__ import annotations

import pytest

import reslog
from tests.fixtures.windows import open_window

pytestmark = pytest.mark.integration


def test_a_rising_key_and_a_named_counter_are_offered_as_x_axes(qtbot, tmp_path, store_path):
    run = reslog.init(store=store_path, name="custom", system=False)
    for step in range(50):
        run.log(
            {"train/loss": 4.0 / (1 + step), "samples_seen": 32.0 * step, "iter": step}, step=step
        )
    run.finish()
    win = open_window(qtbot, [store_path], tmp_path / "settings.json", runs=1)
    offered = [win.x_combo.itemText(i) for i in range(win.x_combo.count())]
    assert "key:samples_seen" in offered and "key:iter" in offered
    assert "key:train/loss" not in offered
    win.x_combo.setCurrentText("key:samples_seen")
    assert win.state.x_axis == "key:samples_seen"
