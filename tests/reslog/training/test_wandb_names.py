"""The rest of wandb's surface under `import reslog as wandb`: forked workers, login, save,
artifacts, plots, version, util, mark_preempting, config files and filters, TensorBoard
sync. Each does what wandb users expect or says once why not; none raises."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import reslog as wandb
from tests.reslog.test_reslog_api import read_run
from tests.reslog.training.test_wandb_surface import default_store

ROOT = Path(__file__).resolve().parents[3]


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "runs.db")],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


FORKED_WORKERS = """
import sys, torch
import reslog as wandb

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        wandb.log({"worker/item": float(i)})  # in a forked DataLoader worker
        wandb.run.summary["worker"] = i
        return torch.tensor([float(i)])

run = wandb.init(project="p", name="fork", store=sys.argv[1], system=False)
loader = torch.utils.data.DataLoader(
    Data(), batch_size=2, num_workers=2, multiprocessing_context="fork"
)
for step, batch in enumerate(loader):
    wandb.log({"train/x": batch.sum().item()}, step=step)
wandb.finish()
"""


@pytest.mark.integration
def test_wandb_log_in_forked_dataloader_workers_is_ignored_with_one_warning_each(tmp_path):
    proc = run_script(tmp_path, FORKED_WORKERS)
    warnings = [x for x in proc.stderr.splitlines() if "RuntimeWarning" in x]
    assert len(warnings) == 2  # one per worker process, none per call
    assert all("is a fork of pid" in w and "calls here are ignored" in w for w in warnings)
    info, series, _ = read_run(tmp_path / "runs.db")
    assert info.status == "finished" and set(series) == {"train/x"}
    assert series["train/x"] == [(0, 1.0), (1, 5.0), (2, 9.0), (3, 13.0)]
    assert info.summary == {}


@pytest.fixture
def store(store_path, monkeypatch):
    yield from default_store(store_path, monkeypatch)


def test_login_says_once_that_there_is_nothing_to_log_in_to(store):
    with pytest.warns(UserWarning, match=r"login\(\) does nothing") as got:
        assert wandb.login(key="abc", relogin=True) is True
    assert len(got) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert wandb.login() is True  # said once


def test_version_util_and_plot(store):
    assert wandb.__version__ == importlib.metadata.version("reslog")
    run_id = wandb.util.generate_id()
    assert len(run_id) == 8 and run_id.isalnum() and run_id == run_id.lower()
    run = wandb.init(project="p", id=wandb.util.generate_id(), resume="allow", system=False)
    table = wandb.Table(columns=["x", "y"], data=[[1, 2], [2, 4]])
    chart = wandb.plot.line(table, "x", "y", title="y by x")
    assert isinstance(chart, wandb.plot.CustomChart) and chart.kind == "line"
    with pytest.warns(RuntimeWarning, match=r"key 'chart': wandb.plot charts are not stored"):
        wandb.log({"chart": chart, "y": 4.0})
    for make in (wandb.plot.scatter, wandb.plot.bar, wandb.plot.histogram):
        make(table, "x", "y")
    wandb.plot.confusion_matrix(probs=None, y_true=[0, 1], preds=[0, 1], class_names=["a", "b"])
    wandb.plot.line_series(xs=[0, 1], ys=[[1, 2]], keys=["a"], title="t")
    wandb.plot.pr_curve([0, 1], [[0.2, 0.8], [0.6, 0.4]])
    wandb.plot.roc_curve([0, 1], [[0.2, 0.8], [0.6, 0.4]])
    run.finish()
    assert read_run(store)[1] == {"y": [(0, 4.0)]}


def test_mark_preempting_is_an_event(store):
    run = wandb.init(project="p", system=False)
    wandb.mark_preempting()
    run.finish()
    [event] = [e for e in read_run(store)[2] if e.kind == "preempting"]
    assert event.level == "warning" and "resume" in event.title


def test_save_copies_files_beside_the_store_with_their_digests(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "a.pt").write_bytes(b"weights-a")
    (tmp_path / "ckpt" / "b.pt").write_bytes(b"weights-b")
    (tmp_path / "notes.txt").write_text("v1")
    run = wandb.init(project="p", system=False)
    copies = wandb.save("ckpt/*.pt", policy="now")
    run.save(str(tmp_path / "notes.txt"))  # "live": now, and again at finish if it changed
    run.save("late.txt", policy="end")
    folder = Path(run.dir) / "files" / run.uid
    deadline = time.monotonic() + 60
    while not (folder / "notes.txt").exists():  # copied on the worker thread
        assert time.monotonic() < deadline
        time.sleep(0.02)
    (tmp_path / "notes.txt").write_text("v2, changed")
    (tmp_path / "late.txt").write_text("written at the end")
    assert copies == [str(folder / "ckpt" / "a.pt"), str(folder / "ckpt" / "b.pt")]
    run.finish()
    assert (folder / "ckpt" / "a.pt").read_bytes() == b"weights-a"
    assert (folder / "notes.txt").read_text() == "v2, changed"
    assert (folder / "late.txt").read_text() == "written at the end"
    files = [
        json.loads(e.body) | {"title": e.title} for e in read_run(store)[2] if e.kind == "file"
    ]
    assert [f["title"] for f in files] == [
        "ckpt/a.pt",
        "ckpt/b.pt",
        "notes.txt",
        "notes.txt",
        "late.txt",
    ]
    assert files[0]["sha256"] == hashlib.sha256(b"weights-a").hexdigest()
    assert files[0]["source"] == str(tmp_path / "ckpt" / "a.pt") and files[0]["size"] == 9
    assert files[3]["sha256"] == hashlib.sha256(b"v2, changed").hexdigest()
    with pytest.raises(ValueError, match="policy"):
        wandb.init(project="p", system=False).save("x", policy="sometimes")


def test_artifacts_are_recorded_with_paths_and_digests_not_uploaded(store, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "model" / "weights.bin").write_bytes(b"\0" * 1000)
    (tmp_path / "vocab.txt").write_text("a\nb\n")
    run = wandb.init(project="p", system=False)
    art = wandb.Artifact("tiny-model", type="model", metadata={"params": 57})
    art.add_dir(str(tmp_path / "model"))
    art.add_file(str(tmp_path / "vocab.txt"), name="tokenizer/vocab.txt")
    art.add_reference("s3://bucket/data/shard-0.bin")
    with art.new_file("card.md", mode="w") as fh:  # HF's WandbCallback writes models this way
        fh.write("# tiny")
    assert run.log_artifact(art, aliases=["final_model"]) is art
    path_art = wandb.log_artifact(str(tmp_path / "vocab.txt"), type="dataset")
    with pytest.warns(UserWarning, match="Table objects are not stored"):
        art.add(wandb.Table(columns=["a"]), "table")
    run.finish()
    events = [e for e in read_run(store)[2] if e.kind == "artifact"]
    assert [e.title for e in events] == [
        "artifact tiny-model:v0 (model), 5 files",
        "artifact vocab.txt:v0 (dataset), 1 files",
    ]
    body = json.loads(events[0].body)
    assert body["aliases"] == ["latest", "final_model"] and body["metadata"] == {"params": 57}
    by_name = {f["name"]: f for f in body["files"]}
    assert by_name["weights.bin"]["sha256"] == hashlib.sha256(b"\0" * 1000).hexdigest()
    assert by_name["weights.bin"]["path"] == str(tmp_path / "model" / "weights.bin")
    assert by_name["tokenizer/vocab.txt"]["size"] == 4
    assert by_name["shard-0.bin"] == {
        "name": "shard-0.bin",
        "reference": "s3://bucket/data/shard-0.bin",
    }
    kept = Path(by_name["card.md"]["path"])  # moved out of its temporary folder, kept
    assert kept.read_text() == "# tiny" and kept.is_relative_to(Path(run.dir) / "files" / run.uid)
    assert body["digest"] == art.digest and len(art.digest) == 64
    assert json.loads(events[1].body)["files"][0]["path"] == str(tmp_path / "vocab.txt")
    assert path_art.name == "vocab.txt"


def test_a_config_file_and_config_key_filters(store, tmp_path):
    path = tmp_path / "config-defaults.yaml"
    path.write_text(
        "wandb_version: 1\nlr:\n  desc: learning rate\n  value: 0.001\nbatch_size: 32\n"
        "model:\n  layers: 2\n  dim: 64\nsecret_token: abc\n"
    )
    run = wandb.init(project="p", config=str(path), system=False)
    assert dict(run.config) == {
        "lr": 0.001,
        "batch_size": 32,
        "model": {"layers": 2, "dim": 64},
        "secret_token": "abc",
    }
    run.finish()
    assert read_run(store)[0].config["secret_token"] == "<redacted>"
    cfg = {"lr": 0.1, "seed": 1, "debug": True}
    run = wandb.init(project="p", config=cfg, config_exclude_keys=["debug"], system=False)
    assert dict(run.config) == {"lr": 0.1, "seed": 1}
    run.finish()
    run = wandb.init(project="p", config=cfg, config_include_keys=["lr"], system=False)
    assert dict(run.config) == {"lr": 0.1}
    run.finish()
    assert read_run(store)[0].config == {"lr": 0.1}
    json_path = tmp_path / "c.json"
    json_path.write_text('{"a": 1}')
    assert dict(wandb.init(project="p", config=json_path, system=False).config) == {"a": 1}
    wandb.finish()
    with pytest.raises(ValueError, match="cannot read it"):
        wandb.init(project="p", config=str(tmp_path / "missing.yaml"), system=False)


def test_sync_tensorboard_logs_what_summarywriter_writes_as_it_writes_it(store, tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from tests.reslog.tools.importers.test_importers import tensorboard_scalars

    run = wandb.init(project="p", sync_tensorboard=True, system=False)
    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in range(0, 60, 3):
        writer.add_scalar("Loss/train", 1.0 / (step + 1), step)
        writer.add_scalar("lr", 0.1 * 0.9**step, step, new_style=True)
    writer.add_histogram("weights", np.arange(10.0), 0)
    writer.add_hparams({"lr": 0.1, "depth": 3}, {"hparam/acc": 0.9}, run_name="hp")
    wandb.log({"own/metric": 1.0})  # the run's own logging goes on beside it
    assert run.summary["Loss/train"] == pytest.approx(1.0 / 58)  # live: read as written
    writer.close()
    run.finish()
    info, series, events = read_run(store)
    expected = tensorboard_scalars(tmp_path / "tb")
    for tag, points in expected.items():
        assert series[tag] == [(s, v) for s, _w, v in points], tag
    assert series["own/metric"] == [(0, 1.0)] and series["hparam/acc"] == [(0, pytest.approx(0.9))]
    assert info.config == {"lr": 0.1, "depth": 3}
    [skipped] = [e for e in events if e.kind == "skipped"]
    assert skipped.body == "weights (histograms): 1"
    # after finish, a writer no longer feeds the run
    w2 = SummaryWriter(str(tmp_path / "tb2"))
    w2.add_scalar("late", 1.0, 0)
    w2.close()
    assert "late" not in read_run(store)[1]


def test_sync_tensorboard_without_a_tensorboard_package_says_so_once(store, monkeypatch):
    import reslog.integrations.tensorboard as tb_sync

    monkeypatch.setattr(tb_sync, "WRITERS", (("no_such_tb_package.writer", "EventFileWriter"),))
    with pytest.warns(UserWarning, match="neither tensorboard nor tensorboardX is installed"):
        run = wandb.init(project="p", sync_tensorboard=True, system=False)
    run.finish()
