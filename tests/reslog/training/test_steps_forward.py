"""Steps only go forward within a process (wandb's rule): a log() call at a step below one
already logged is not stored, with one warning per key naming the steps, so it can never start
a new take and hide what was logged since. A new take starts only when a process resumes a
run (init(resume=...)) and logs from a lower step again; the chart's reads and the exports
then agree on which points are current."""

from __future__ import annotations

import csv
import io
import warnings
from pathlib import Path

import pytest

import reslog
from reslog.tools.cli import main
from tests.fixtures.wandb_twin import run_as
from tests.reslog.test_reslog_api import read_run

# The case, the same script under the real wandb (offline) and `import reslog as
# wandb`: 100 automatic steps, then log(step=50), then 10 more automatic steps.
SCRIPT = """
{import_line}
import json, sys
run = wandb.init(project="p", name="steps", mode="offline", dir=sys.argv[1])
for i in range(100):
    wandb.log({"train/loss": 1.0 / (i + 1)})
wandb.log({"train/loss": 5.0, "other": 1.0}, step=50)
after = run.step
for i in range(10):
    wandb.log({"train/loss": 2.0 + i})
print("RESULT " + json.dumps({"step_after_behind": after, "step_at_end": run.step}))
wandb.finish()
"""


def current_points(store: Path, key: str) -> list[tuple[int, float]]:
    with reslog.open(store) as r:
        [uid] = r.runs()["uid"].tolist()[-1:]
        df = r.points(uid, key)
    return list(zip(df["step"].tolist(), df["value"].tolist(), strict=True))


@pytest.mark.integration
def test_a_lower_step_is_dropped_with_a_warning_as_wandb_does_cell_by_cell(tmp_path):
    theirs, _, wandb_dir = run_as(tmp_path, SCRIPT, "wandb")
    ours, stderr, reslog_dir = run_as(tmp_path, SCRIPT, "reslog")
    assert ours == theirs == {"step_after_behind": 100, "step_at_end": 110}
    # wandb's own record of the run, read back through `reslog import wandb`
    wandb_store = tmp_path / "from-wandb.db"
    assert main(["import", "wandb", str(wandb_dir / "wandb"), "--store", str(wandb_store)]) == 0
    expected = read_run(wandb_store)[1]["train/loss"]
    stored = current_points(reslog_dir / "reslog.db", "train/loss")
    assert len(stored) == 110 and stored == expected  # every value, each at wandb's step
    assert "other" not in read_run(reslog_dir / "reslog.db")[1]
    assert stderr.count("RuntimeWarning") == 1
    assert "not stored: train/loss, other at step 50, behind step 99 logged before" in stderr


def test_one_warning_per_key_and_one_event_counting_them_at_finish(store_path):
    run = reslog.init(store=store_path, system=False)
    for step in range(10):
        run.log({"a": 1.0, "b": 2.0}, step=step)
    with pytest.warns(RuntimeWarning, match=r"not stored: a at step 3, behind step 9") as w:
        run.log({"a": 0.5}, step=3)
    assert len(w) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "a" was named already: counted, not warned about
        run.log({"a": 0.5}, step=5)
    with pytest.warns(RuntimeWarning, match=r"not stored: b at step 7"):
        run.log({"a": 0.5, "b": 0.5}, step=7)
    with pytest.warns(RuntimeWarning, match=r"not stored: t at step 2"):
        run.log({"t": "text behind", "a": 1.0}, step=2)  # the slow path: text too
    assert run.step == 10  # the counter stays
    run.log({"a": 3.0})
    run.finish()
    _info, series, events = read_run(store_path)
    assert series["a"] == [(s, 1.0) for s in range(10)] + [(10, 3.0)]
    assert series["b"] == [(s, 2.0) for s in range(10)]
    skipped = [(e.title, e.body) for e in events if e.kind == "skipped"]
    assert skipped[-1] == (
        "6 logged values were not stored: their step was behind one already logged (3 keys)",
        "a: 4 at steps 2-7\nb: 1 at step 7\nt: 1 at step 2",
    )
    assert not [e for e in events if e.kind == "text"]


def test_equal_steps_held_steps_and_timers_are_not_behind(store_path):
    run = reslog.init(store=store_path, system=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.log({"a": 1.0}, step=5)
        run.log({"b": 1.0}, step=5)  # the same step again: another key at step 5
        run.log({"c": 1.0}, step=5, commit=False)
        run.log({"d": 1.0})  # commits c and d at the held step 5
        with run.timer("fwd"):
            pass
        run.log({"a": 2.0}, step=6)
    with run.timer("fwd"):
        pass
    with pytest.warns(RuntimeWarning, match="behind"):
        run.log({"a": 0.0}, step=1)  # rejected: the timer waits for the next stored call
    run.log({"a": 3.0}, step=7)
    run.finish()
    series = read_run(store_path)[1]
    assert series["a"] == [(5, 1.0), (6, 2.0), (7, 3.0)]
    assert series["b"] == series["c"] == series["d"] == [(5, 1.0)]
    assert [s for s, _ in series["time/fwd"]] == [6, 7]


def test_a_resumed_process_starts_a_new_take_and_every_reader_agrees(store_path, capsys):
    run = reslog.init(store=store_path, name="r", system=False)
    for step in range(100):
        run.log({"loss": float(step)}, step=step)
    run.finish()
    again = reslog.init(store=store_path, resume=run.uid, system=False)
    assert again.step == 100
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the first step of a resumed process may go back
        for step in range(60, 80):
            again.log({"loss": 1000.0 + step}, step=step)
    with pytest.warns(RuntimeWarning, match="behind step 79"):
        again.log({"loss": -1.0}, step=70)  # within that process, forward only again
    again.finish()
    expected = [(s, float(s)) for s in range(60)] + [(s, 1000.0 + s) for s in range(60, 80)]
    assert current_points(store_path, "loss") == expected
    with reslog.open(store_path) as r:
        history = r.history("r", "loss", samples=1000)
    assert list(zip(history["step"], history["last"], strict=True)) == expected
    assert main(["export", str(store_path), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(int(r["step"]), float(r["value"])) for r in rows if r["key"] == "loss"] == expected
