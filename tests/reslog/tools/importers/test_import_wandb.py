"""`reslog import wandb`: offline runs written by the real wandb (offline mode, no network),
read with reslog's own reader (no wandb needed to import)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reslog.tools.cli import main
from tests.reslog.test_reslog_api import read_run

pytestmark = pytest.mark.integration

SCRIPT = """
import math, sys, wandb
run = wandb.init(project="proj", name="tiny-gpt", config={"lr": 0.1, "model": {"layers": 2}},
                 group="sweep", job_type="train", tags=["a"], mode="offline", dir=sys.argv[1])
for s in range(6):
    wandb.log({"train/loss": 1.0 / (s + 1), "val": {"loss": 2.0 - s / 10}, "phase": "warm",
               "nan": math.nan, "flag": s % 2 == 0}, step=s)
wandb.log({"hist": wandb.Histogram([1, 2, 3])}, step=6)
wandb.config.update({"extra": 3})
run.summary["best"] = 0.9
run.finish(exit_code=int(sys.argv[2]))
"""


def write_offline_run(tmp_path: Path, exit_code: int = 0) -> Path:
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "WANDB_SILENT": "true", "WANDB_MODE": "offline"}
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(exit_code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "wandb"


def test_an_offline_run_brings_history_config_summary_and_grouping(tmp_path, capsys):
    wandb_dir = write_offline_run(tmp_path)
    store = tmp_path / "runs.db"
    assert main(["import", "wandb", str(wandb_dir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "imported 'tiny-gpt': 4 keys, 24 points, 1 non-scalar values not imported" in out
    info, series, events = read_run(store)
    assert (info.project, info.name, info.status) == ("proj", "tiny-gpt", "finished")
    assert (info.group, info.job_type, info.tags) == ("sweep", "train", ["a"])
    assert info.config == {"lr": 0.1, "model": {"layers": 2}, "extra": 3}
    assert info.summary["best"] == 0.9 and info.summary["train/loss"] == pytest.approx(1 / 6)
    assert series["train/loss"] == [(s, pytest.approx(1.0 / (s + 1))) for s in range(6)]
    assert series["val/loss"] == [(s, pytest.approx(2.0 - s / 10)) for s in range(6)]
    assert series["flag"] == [(s, float(s % 2 == 0)) for s in range(6)]
    assert len(series["nan"]) == 6 and all(v != v for _, v in series["nan"])
    texts = [(e.step, e.title, e.body) for e in events if e.kind == "text"]
    assert texts[0] == (0, "phase", "warm") and len(texts) == 6
    # idempotent
    assert main(["import", "wandb", str(wandb_dir), "--store", str(store)]) == 0
    assert "already imported 'tiny-gpt'" in capsys.readouterr().out


def test_a_failed_run_keeps_its_status(tmp_path):
    wandb_dir = write_offline_run(tmp_path, exit_code=3)
    store = tmp_path / "runs.db"
    assert main(["import", "wandb", str(wandb_dir), "--store", str(store)]) == 0
    assert read_run(store)[0].status == "failed"


def test_a_truncated_wandb_file_is_one_line_naming_it(tmp_path, capsys):
    wandb_dir = write_offline_run(tmp_path)
    bad = next(wandb_dir.glob("offline-run-*/run-*.wandb"))
    bad.write_bytes(bad.read_bytes()[:-5])
    store = tmp_path / "runs.db"
    assert main(["import", "wandb", str(wandb_dir), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"reslog: import wandb: {bad}: truncated")
    bad.write_bytes(b"PK\x03\x04 not a wandb file")
    assert main(["import", "wandb", str(bad), "--store", str(store)]) == 2
    assert "not a wandb run file" in capsys.readouterr().err
