"""Runs logged under other projects' key names fill the Training page, and a logged counter
(nanoGPT's `iter`, Hugging Face's `train/epoch`) can be the x axis."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.key_roles import counter_keys, gpu_series, key_for, rising_keys
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

STEPS = list(range(0, 400, 4))


def _nanogpt() -> dict:
    # What nanoGPT's train.py logs to wandb: iter, train/loss, val/loss, lr, mfu (percent).
    return {
        "iter": [(s, float(s * 10)) for s in STEPS],
        "train/loss": [(s, 4.0 * np.exp(-s / 200) + 2) for s in STEPS],
        "val/loss": [(s, 4.1 * np.exp(-s / 200) + 2) for s in STEPS[::25]],
        "lr": [(s, 6e-4 * min(1.0, s / 40)) for s in STEPS],
        "mfu": [(s, 31.5) for s in STEPS],
    }


def _huggingface() -> dict:
    # Hugging Face Trainer's wandb/tensorboard names.
    return {
        "train/loss": [(s, 3.0 * np.exp(-s / 200) + 2) for s in STEPS],
        "eval/loss": [(s, 3.2 * np.exp(-s / 200) + 2) for s in STEPS[::25]],
        "train/learning_rate": [(s, 5e-5) for s in STEPS],
        "train/grad_norm": [(s, 1.0 + 0.01 * s) for s in STEPS],
        "train/epoch": [(s, s / 400) for s in STEPS],
    }


def test_each_role_finds_the_first_name_a_run_logged():
    assert key_for(_nanogpt(), "valid_loss") == "val/loss"
    assert key_for(_huggingface(), "lr") == "train/learning_rate"
    assert key_for({"lr-AdamW": 1, "epoch": 1}, "lr") == "lr-AdamW"  # Lightning
    assert key_for({"loss_metrics/global_avg_loss": 1}, "train_loss").startswith("loss_metrics")
    assert key_for({"other": 1}, "mfu") is None
    assert counter_keys(["iter", "train/epoch", "train/loss", "lr"]) == ["iter", "train/epoch"]


@pytest.fixture
def win(qtbot, tmp_path):
    path = tmp_path / "others.db"
    engine = new_store(path)
    make_run(engine, name="nanogpt", points=_nanogpt(), created_at=BASE_TIME)
    make_run(engine, name="hf", points=_huggingface(), created_at=BASE_TIME + 1)
    engine.dispose()
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=2)
    yield w
    w.close()


@pytest.mark.integration
def test_nanogpt_and_hugging_face_runs_fill_the_training_page(win):
    page = win.current_page()
    names = {r.ref: r.name for r in win.cache.runs()}
    drawn = {}
    for (title, ref, key), line in page.lines().items():
        assert len(line.get_xdata()) > 0, (title, key)
        drawn.setdefault(title, set()).add((names[ref], key))
    assert drawn["Loss"] == {
        ("nanogpt", "train/loss"),
        ("nanogpt", "val/loss"),
        ("hf", "train/loss"),
        ("hf", "eval/loss"),
    }
    assert drawn["Learning rate"] == {("nanogpt", "lr"), ("hf", "train/learning_rate")}
    assert drawn["Gradient norm"] == {("hf", "train/grad_norm")}
    assert drawn["MFU"] == {("nanogpt", "mfu")}
    mfu = page.axes[[s.title for s in page.specs].index("MFU")]
    assert mfu.yaxis.get_major_formatter()(31.5, 0).startswith("31")  # a percent, not 3150 %


@pytest.mark.integration
def test_a_logged_counter_is_an_x_axis(win, qtbot):
    choices = [win.x_combo.itemText(i) for i in range(win.x_combo.count())]
    assert "key:iter" in choices and "key:train/epoch" in choices
    before = win.redraw_count
    win.x_combo.setCurrentText("key:iter")
    settle(qtbot, win, before)
    page = win.current_page()
    nano = next(r.ref for r in win.cache.runs() if r.name == "nanogpt")
    line = page.lines()[("Loss", nano, "train/loss")]
    # iter = 10 × step in this run: the last point sits at iter 3960.
    assert max(line.get_xdata()) == pytest.approx(10 * STEPS[-1])
    assert page.x_label == "iter"  # the window's x control names it (snapshots: under charts)
    # The hf run has no iter: it cannot be placed on this axis and is not drawn there.
    hf = next(r.ref for r in win.cache.runs() if r.name == "hf")
    assert len(page.lines()[("Loss", hf, "train/loss")].get_xdata()) == 0
    note = page._notes[[s.title for s in page.specs].index("Loss")].get_text()
    assert "not on this x axis" in note and "hf train" in note
    # Its series are not waiting for tiles: the page is whole, and settles (a poll that brings
    # nothing new leaves it alone; the unplaced series kept it unsettled, walked each poll).
    assert page.incomplete() == 0
    assert page._settled is not None


@pytest.mark.slow
def test_a_snapshot_can_use_a_logged_counter_as_its_x_axis(tmp_path, capsys):
    from resplot.cli import main

    path = tmp_path / "nano.db"
    engine = new_store(path)
    make_run(engine, name="nanogpt", points=_nanogpt())
    make_run(engine, name="hf", points=_huggingface(), created_at=BASE_TIME + 1)
    engine.dispose()
    out = tmp_path / "iter.png"
    assert main(["snapshot", str(path), "-o", str(out), "--x", "key:iter"]) == 0
    assert out.stat().st_size > 0
    # The hf run has no iter (its charts' notes say so): not "tiles did not arrive".
    err = capsys.readouterr().err
    assert "did not arrive" not in err, err
    assert main(["snapshot", str(path), "-o", str(out), "--x", "iterations"]) == 1
    assert "key:NAME" in capsys.readouterr().err


def test_rising_keys_are_offered_as_x_axes_from_the_summaries_alone():
    from schema.store.rollup import fold

    steps = list(range(10))
    walls = [float(s) for s in steps]

    def agg(values):
        return fold(steps[: len(values)], walls[: len(values)], [float(v) for v in values])

    aggs = [
        ("samples_seen", agg([0, 32, 64, 96, 128])),  # rises: an x axis
        ("train/loss", agg([4, 3, 2.5, 2.4, 2.2])),  # falls
        ("flat", agg([1, 1, 1, 1])),  # constant: places nothing
        ("lr", agg([0, 1, 2, 1, 0.5])),  # warmup then decay: max not last
        ("seen", agg([0, 1, 2])),  # rises in one run ...
        ("seen", agg([2, 1, 0])),  # ... falls in another: not an axis for all
        ("sys/disk_read_bytes", agg([0, 1, 2, 3])),  # telemetry counters are not offered
        ("two", agg([0, 1])),  # too few points to tell
    ]
    assert rising_keys(aggs) == ["samples_seen"]


def test_gpu_series_read_reslogs_keys_through_the_one_gpu_key_parse():
    keys = [
        "sys/gpu0/temp_c",
        "sys/gpu0/temp",  # a short form beside reslog's own: reslog's wins
        "sys/gpu1/temperature",
        "sys/gpu12/power_w",
        "sys/gpu2/bogus",
        "system/gpu.3.temp",
        "gpu_id: 4/power.draw (W)",
        "train/gpu0/temp_c",
    ]
    assert gpu_series(keys) == {
        ("temp", 0): ("sys/gpu0/temp_c", "°C"),
        ("temp", 1): ("sys/gpu1/temperature", "°C"),
        ("power", 12): ("sys/gpu12/power_w", "W"),
        ("temp", 3): ("system/gpu.3.temp", "°C"),
        ("power", 4): ("gpu_id: 4/power.draw (W)", "W"),
    }
