"""Runs logged under other tools' names fill the System and Timing pages as they fill the
Training page (Lightning's `_step`/`_epoch` families and Hugging Face's throughput names too),
and the default x axis ("auto") places Hugging Face and nanoGPT runs by their own step counter,
so that both share a meaningful axis."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.key_roles import TIMING_ROLES, gpu_series, key_for, step_counter
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import open_window, settle

pytestmark = pytest.mark.integration

N = 200


def _lightning() -> dict:
    # self.log("train_loss", on_step=True, on_epoch=True); self.log("val_loss"); its
    # GPUStatsMonitor's nvidia-smi names.
    s = range(N)
    return {
        "train_loss_step": [(i, 3.0 - i / N) for i in s],
        "train_loss_epoch": [(i, 3.0 - i / N) for i in s[::50]],
        "val_loss_epoch": [(i, 3.1 - i / N) for i in s[::50]],
        "gpu_id: 0/utilization.gpu (%)": [(i, 90.0) for i in s],
        "gpu_id: 0/temperature.gpu (°C)": [(i, 71.0) for i in s],
        "gpu_id: 0/memory.used (MB)": [(i, 30_000.0) for i in s],
    }


def _huggingface() -> dict:
    # wandb's logging-call counter as the step (0..N), the Trainer's global step 30x that.
    s = range(N)
    return {
        "train/loss": [(i, 2.8 - i / N) for i in s],
        "train/global_step": [(i, 30.0 * i) for i in s],
        "train/train_tokens_per_second": [(i, 52_000.0) for i in s],
        "system/gpu.0.gpu": [(i, 80.0) for i in s],
        "system/gpu.0.temp": [(i, 65.0) for i in s],
        "system/gpu.0.powerWatts": [(i, 250.0) for i in s],
        "system/gpu.0.memoryAllocatedBytes": [(i, 4.0e10) for i in s],
    }


def _nanogpt() -> dict:
    s = range(N)
    return {
        "train/loss": [(i, 2.9 - i / N) for i in s],
        "iter": [(i, 25.0 * i) for i in s],
        "sys/gpu0/temp": [(i, 75.0) for i in s],  # short names, as other loggers write them
        "sys/gpu0/power": [(i, 300.0) for i in s],
    }


def _torchtitan() -> dict:
    s = range(N)
    return {
        "loss_metrics/global_avg_loss": [(i, 2.7 - i / N) for i in s],
        "throughput(tps)": [(i, 61_000.0) for i in s],
        "memory/max_reserved(GiB)": [(i, 70.0) for i in s],
        "time_metrics/end_to_end(s)": [(i, 0.5) for i in s],
        "time_metrics/data_loading(s)": [(i, 0.05) for i in s],
    }


def test_names_from_every_tool_are_found():
    assert key_for(_lightning(), "train_loss") == "train_loss_step"  # per step first
    assert key_for(_lightning(), "valid_loss") == "val_loss_epoch"
    assert key_for(_huggingface(), "tokens_per_s") == "train/train_tokens_per_second"
    assert key_for(_torchtitan(), "step", TIMING_ROLES) == "time_metrics/end_to_end(s)"
    assert key_for(_torchtitan(), "data", TIMING_ROLES) == "time_metrics/data_loading(s)"
    assert gpu_series(_lightning())[("temp", 0)] == ("gpu_id: 0/temperature.gpu (°C)", "°C")
    assert gpu_series(_lightning())[("mem_used", 0)] == ("gpu_id: 0/memory.used (MB)", "MB")
    assert gpu_series(_huggingface())[("power", 0)] == ("system/gpu.0.powerWatts", "W")
    assert gpu_series(_nanogpt())[("temp", 0)] == ("sys/gpu0/temp", "°C")
    assert gpu_series(_torchtitan())[("mem_used", 0)] == ("memory/max_reserved(GiB)", "GiB")
    # reslog's own name wins over a short form of the same series.
    both = {"sys/gpu1/temp": 1, "sys/gpu1/temp_c": 1}
    assert gpu_series(both)[("temp", 1)] == ("sys/gpu1/temp_c", "°C")
    assert step_counter(_huggingface()) == "train/global_step"
    assert step_counter(_nanogpt()) == "iter" and step_counter(_torchtitan()) is None


@pytest.fixture
def win(qtbot, tmp_path):
    path = tmp_path / "tools.db"
    engine = new_store(path)
    # Hugging Face's WandbCallback: define_metric("*", step_metric="train/global_step").
    metric = ("metric", "*", None, "info", '{"step_metric": "train/global_step"}')
    runs = (
        ("lightning", _lightning(), ()),
        ("hf", _huggingface(), (metric,)),
        ("nanogpt", _nanogpt(), ()),
        ("torchtitan", _torchtitan(), ()),
    )
    for n, (name, points, events) in enumerate(runs):
        make_run(engine, name=name, points=points, events=events, created_at=BASE_TIME + n)
    engine.dispose()
    w = open_window(qtbot, [path], tmp_path / "settings.json", runs=4, size=(1920, 1080))
    yield w
    w.close()


def _drawn(win) -> dict[str, set[tuple[str, str]]]:
    names = {r.ref: r.name for r in win.cache.runs()}
    out: dict[str, set] = {}
    for (title, ref, key), line in win.current_page().lines().items():
        if len(line.get_xdata()):
            out.setdefault(title, set()).add((names[ref], key))
    return out


def test_the_system_and_timing_pages_read_other_tools_names(win, qtbot):
    win.set_x_axis("step")
    drawn = _drawn(win)
    assert ("lightning", "train_loss_step") in drawn["Loss"]
    assert ("lightning", "val_loss_epoch") in drawn["Loss"]
    assert ("hf", "train/train_tokens_per_second") in drawn["Throughput"]
    win.set_page("system")
    settle(qtbot, win)
    drawn = _drawn(win)
    assert drawn["GPU temperature"] == {
        ("lightning", "gpu_id: 0/temperature.gpu (°C)"),
        ("hf", "system/gpu.0.temp"),
        ("nanogpt", "sys/gpu0/temp"),
    }
    assert drawn["GPU power vs limit"] == {
        ("hf", "system/gpu.0.powerWatts"),
        ("nanogpt", "sys/gpu0/power"),
    }
    assert ("torchtitan", "memory/max_reserved(GiB)") in drawn["GPU memory"]
    memory = next(s for s in win.current_page().specs if s.title == "GPU memory")
    assert set(memory.ylabel.split(", ")) == {"MB", "bytes", "GiB"}  # as logged, said
    win.set_page("timing")
    settle(qtbot, win)
    page = win.current_page()
    stack = page.specs[0]
    assert stack.title == "Step time: torchtitan"
    assert {(it.part, it.key) for it in stack.items} == {
        ("data", "time_metrics/data_loading(s)"),
        ("other", "time_metrics/end_to_end(s)"),
    }
    assert page._extra[0]  # the stack is drawn
    assert ("torchtitan", "time_metrics/end_to_end(s)") in _drawn(win)["Step time"]


def test_by_default_hugging_face_and_nanogpt_runs_share_a_step_axis(win, qtbot):
    assert win.state.x_axis == "auto"
    lines = win.current_page().lines()
    refs = {r.name: r.ref for r in win.cache.runs()}

    def last_x(name: str) -> float:
        return float(np.nanmax(lines[("Loss", refs[name], "train/loss")].get_xdata()))

    assert last_x("hf") == pytest.approx(30.0 * (N - 1))  # its global step, not 0..199
    assert last_x("nanogpt") == pytest.approx(25.0 * (N - 1))  # its iter
    ttn = lines[("Loss", refs["torchtitan"], "loss_metrics/global_avg_loss")]
    assert float(np.nanmax(ttn.get_xdata())) == pytest.approx(N - 1)  # no counter: its steps
    assert win.current_page().x_label == "step"
    win.set_x_axis("step")  # the logged steps, as before
    settle(qtbot, win)
    lines = win.current_page().lines()
    assert float(np.nanmax(lines[("Loss", refs["hf"], "train/loss")].get_xdata())) == N - 1


def test_a_snapshot_uses_the_same_default_axis(tmp_path):
    from resplot.cli import main

    path = tmp_path / "hf.db"
    engine = new_store(path)
    make_run(engine, name="hf", points=_huggingface())
    engine.dispose()
    out = tmp_path / "hf.png"
    assert main(["snapshot", str(path), "-o", str(out)]) == 0
    assert out.stat().st_size > 0


def test_zooming_past_the_end_of_one_runs_counter_draws_the_others(win, qtbot):
    # On the auto axis nanoGPT's iter ends at 4,975 and the HF run's global step at 5,970: a
    # zoom into 5,200..5,900 is wholly past the nanoGPT run (its steps there: none).
    page = win.current_page()
    loss = [s.title for s in page.specs].index("Loss")
    page.axes[loss].set_xlim(5200, 5900)
    settle(qtbot, win)
    refs = {r.name: r.ref for r in win.cache.runs()}
    lines = page.lines()
    hf = np.asarray(lines[("Loss", refs["hf"], "train/loss")].get_xdata())
    nano = np.asarray(lines[("Loss", refs["nanogpt"], "train/loss")].get_xdata())
    assert len(hf) and hf.min() >= 5100 and hf.max() <= 6000
    assert not np.any((nano >= 5200) & (nano <= 5900))
