"""`import reslog as wandb`: the wandb calls that nanoGPT, Hugging Face's WandbCallback,
Lightning's WandbLogger and Accelerate's WandBTracker make, against a real SQLite store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import reslog
import reslog as wandb
from reslog.tools.cli import main
from schema.store.errors import UnknownRun
from tests.reslog.test_reslog_api import read_run

ROOT = Path(__file__).resolve().parents[3]


def default_store(store_path, monkeypatch):
    """`store_path` as the default store; runs left open are finished afterwards."""
    monkeypatch.setenv("RESLOG_STORE", str(store_path))
    yield store_path
    while reslog.run is not None:
        reslog.finish()


@pytest.fixture
def store(store_path, monkeypatch):
    yield from default_store(store_path, monkeypatch)


def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def train_steps(model: torch.nn.Module, steps: int) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(16, 4)
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        wandb.log({"train/loss": loss.detach()}, step=step)


# Every wandb call of issue 9, each run on a fresh run; `check` reads back what it must store.
CALLS = [
    ("log(dict)", lambda: wandb.log({"a": 1.0}), lambda s: s[1]["a"] == [(0, 1.0)]),
    ("log(step=)", lambda: wandb.log({"a": 1.0}, step=7), lambda s: s[1]["a"] == [(7, 1.0)]),
    (
        "log(commit=False)",
        lambda: (wandb.log({"a": 1.0}, commit=False), wandb.log({"b": 2.0})),
        lambda s: s[1] == {"a": [(0, 1.0)], "b": [(0, 2.0)]},
    ),
    ("log(nested)", lambda: wandb.log({"x": {"y": 3}}), lambda s: s[1]["x/y"] == [(0, 3.0)]),
    (
        "log(str, None, bool)",
        lambda: wandb.log({"s": "text", "n": None, "b": True}),
        lambda s: s[1] == {"b": [(0, 1.0)]} and any(e.kind == "text" for e in s[2]),
    ),
    (
        "log(Table, Image, Histogram, list)",
        lambda: wandb.log(
            {
                "t": wandb.Table(columns=["a"], data=[[1]]),
                "i": [wandb.Image(object())],
                "h": wandb.Histogram([1, 2]),
                "ok": 1.0,
            }
        ),
        lambda s: s[1] == {"ok": [(0, 1.0)]},
    ),
    (
        "run.config.update",
        lambda: wandb.run.config.update({"lr": 0.1}),
        lambda s: s[0].config["lr"] == 0.1,
    ),
    (
        "config.update(allow_val_change)",
        lambda: wandb.config.update({"lr": 0.2}, allow_val_change=True),
        lambda s: s[0].config["lr"] == 0.2,
    ),
    ("config[key] =", lambda: wandb.config.__setitem__("k", 1), lambda s: s[0].config["k"] == 1),
    (
        "config.attr =",
        lambda: setattr(wandb.config, "depth", 2),
        lambda s: s[0].config["depth"] == 2,
    ),
    ("config.attr", lambda: wandb.config.base, None),
    (
        "run.id/name/dir/url/project",
        lambda: (wandb.run.id, wandb.run.name, wandb.run.dir, wandb.run.url, wandb.run.project),
        None,
    ),
    (
        "summary[k] =",
        lambda: wandb.summary.__setitem__("best", 1.5),
        lambda s: s[0].summary == {"best": 1.5},
    ),
    (
        "run.summary.update",
        lambda: wandb.run.summary.update({"x": 1}),
        lambda s: s[0].summary == {"x": 1},
    ),
    (
        "define_metric",
        lambda: (
            wandb.define_metric("train/global_step"),
            wandb.define_metric("*", step_metric="train/global_step", step_sync=True),
        ),
        lambda s: [e.title for e in s[2] if e.kind == "metric"] == ["train/global_step", "*"],
    ),
    ("watch", lambda: wandb.watch(tiny_model(), log="all", log_freq=10), None),
    ("unwatch", lambda: (wandb.watch(m := tiny_model()), wandb.unwatch(m)), None),
    (
        "alert(title=, text=, level=)",
        lambda: wandb.alert(title="slow", text="step time doubled", level=wandb.AlertLevel.WARN),
        lambda s: (
            [(e.title, e.body, e.level) for e in s[2] if e.kind == "alert"]
            == [("slow", "step time doubled", "warning")]
        ),
    ),
    (
        "run.alert(title, text, level)",
        lambda: wandb.run.alert("nan", "loss is NaN", "ERROR"),
        lambda s: (
            [(e.title, e.body, e.level) for e in s[2] if e.kind == "alert"]
            == [("nan", "loss is NaN", "error")]
        ),
    ),
    ("run._label (HF)", lambda: wandb.run._label(code="transformers_trainer"), None),
    ("finish(exit_code=1)", lambda: wandb.finish(exit_code=1), lambda s: s[0].status == "failed"),
    (
        "finish(exit_code=0, quiet=True)",
        lambda: wandb.finish(exit_code=0, quiet=True),
        lambda s: s[0].status == "finished",
    ),
    ("run.finish(1)", lambda: wandb.run.finish(1), lambda s: s[0].status == "failed"),
    ("Settings", lambda: wandb.Settings(start_method="thread", silent=True), None),
]


@pytest.mark.parametrize(("call", "check"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_each_wandb_call_runs_and_stores_what_it_should(store, call, check):
    wandb.init(project="p", config={"base": 1}, system=False)
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", RuntimeWarning
        )  # the not-stored values say so (tested below)
        call()
    uid = wandb.run.uid if wandb.run is not None else None
    wandb.finish()
    stored = read_run(store, uid)
    if check is not None:
        assert check(stored)


def test_init_takes_wandbs_keywords(store, tmp_path):
    with pytest.warns(UserWarning, match="ignores entity, save_code, settings"):
        run = wandb.init(
            project="p",
            name="n",
            group="sweep-1",
            job_type="train",
            entity="me",
            settings=wandb.Settings(),
            save_code=True,
            mode="offline",
            reinit=True,
            system=False,
        )
    assert wandb.run is run and run.group == "sweep-1" and run.id == run.uid
    wandb.finish()
    info = read_run(store)[0]
    assert (info.group, info.job_type) == ("sweep-1", "train")
    with pytest.raises(TypeError, match="unexpected keyword arguments: nonsense"):
        wandb.init(project="p", nonsense=1)
    with pytest.raises(ValueError, match="mode"):
        wandb.init(project="p", mode="cloud")


def test_run_is_none_until_init_and_after_finish(store):
    assert wandb.run is None and wandb.config is None and wandb.summary is None
    if wandb.run is None:  # the idiom HF's and Lightning's integrations use
        wandb.init(project="p", system=False)
    assert wandb.run is not None and wandb.run.name.startswith("p-")
    assert wandb.summary is wandb.run.summary and wandb.config is wandb.run.config
    wandb.finish()
    assert wandb.run is None


def test_reinit_finish_previous_finishes_the_current_run(store):
    first = wandb.init(project="p", system=False)
    second = wandb.init(project="p", reinit="finish_previous", system=False)
    assert first._status == "finished" and wandb.run is second
    assert wandb.init(project="p", reinit="return_previous", system=False) is second


def test_id_and_resume_continue_a_run_by_a_chosen_id(store):
    run = wandb.init(project="p", id="my-run-1", system=False)
    run.log({"a": 1.0})
    run.finish()
    with pytest.raises(ValueError, match=r"already exists.*resume='allow'"):
        wandb.init(project="p", id="my-run-1", system=False)
    with pytest.raises(ValueError, match="already exists"):
        wandb.init(project="p", id="my-run-1", resume="never", system=False)
    with pytest.raises(UnknownRun, match="nope"):
        wandb.init(project="p", id="nope", resume="must", system=False)
    for resume in ("allow", "must", True):
        again = wandb.init(project="p", id="my-run-1", resume=resume, system=False)
        assert again.uid == "my-run-1"
        again.log({"a": 2.0})
        again.finish()
    fresh = wandb.init(project="p", id="other", resume="allow", system=False)
    assert fresh.uid == "other" and fresh.step == 0
    fresh.finish()
    assert read_run(store, "my-run-1")[1]["a"] == [(0, 1.0), (1, 2.0), (2, 2.0), (3, 2.0)]
    latest = wandb.init(project="p", resume=True, system=False)
    assert latest.uid == "other"
    with pytest.raises(ValueError, match="1-32 characters"):
        wandb.init(project="p", id="has space", system=False)


def test_dir_puts_the_store_in_that_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("RESLOG_STORE", raising=False)
    run = wandb.init(project="p", dir=tmp_path / "out", system=False)
    assert run.dir == str(tmp_path / "out")
    assert run.url.endswith(f"{tmp_path / 'out' / 'reslog.db'}#{run.uid}")
    run.finish()
    assert (tmp_path / "out" / "reslog.db").exists()


def test_mode_disabled_writes_nothing_and_every_call_is_a_no_op(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RESLOG_STORE", raising=False)
    run = wandb.init(project="p", mode="disabled", dir=tmp_path / "d", config={"base": 1})
    assert wandb.run is run and run.config.base == 1
    for name, call, _check in CALLS:
        if "finish" not in name:
            call()
    with run.timer("x"):
        pass
    wandb.finish()
    assert wandb.run is None
    assert list(tmp_path.iterdir()) == []


def test_config_updates_are_stored_evented_and_shown(store, capsys):
    run = wandb.init(project="p", config={"lr": 1e-3, "api_key": "s3cret"}, system=False)
    run.config.update({"lr": 3e-4, "hf_token": "hf_x"})
    run.config["model/num_parameters"] = 1234
    run.log({"a": 1.0})
    run.finish()
    info, _, events = read_run(store)
    assert info.config == {
        "lr": 3e-4,
        "api_key": "<redacted>",
        "hf_token": "<redacted>",
        "model/num_parameters": 1234,
    }
    updates = [(e.title, json.loads(e.body)) for e in events if e.kind == "config"]
    assert updates == [
        ("config updated: lr, hf_token", {"lr": 3e-4, "hf_token": "<redacted>"}),
        ("config updated: model/num_parameters", {"model/num_parameters": 1234}),
    ]
    assert main(["show", str(store), run.uid]) == 0
    assert "model/num_parameters  1234" in capsys.readouterr().out


def test_group_and_job_type_filter_reslog_ls(store, capsys):
    for group, job in (("a", "train"), ("a", "eval"), ("b", "train")):
        wandb.init(
            project="p", name=f"{group}-{job}", group=group, job_type=job, system=False
        ).finish()
    assert main(["ls", str(store), "--group", "a", "--job-type", "train"]) == 0
    out = capsys.readouterr().out
    assert "a-train" in out and "a-eval" not in out and "b-train" not in out
    df = reslog.open(store).runs()
    assert sorted(zip(df["group"], df["job_type"], strict=True)) == [
        ("a", "eval"),
        ("a", "train"),
        ("b", "train"),
    ]


@pytest.mark.slow
def test_watch_logs_parameter_and_gradient_norms_every_log_freq_forwards(store):
    run = wandb.init(project="p", system=False)
    model = tiny_model()
    wandb.watch(model, log="all", log_freq=2)
    grads: dict[int, float] = {}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        before = model[0].weight.detach().norm().item()
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grads[step] = (model[0].weight.grad.norm().item(), before)
        opt.step()
        wandb.log({"train/loss": loss.detach()}, step=step)
    run.finish()
    series = read_run(store)[1]
    assert [s for s, _ in series["grad_norm/0.weight"]] == [1, 3]
    for s, v in series["grad_norm/0.weight"]:
        assert v == pytest.approx(grads[s][0], rel=1e-5)
    for s, v in series["param_norm/0.weight"]:
        assert v == pytest.approx(grads[s][1], rel=1e-5)
    assert "grad_norm/2.bias" in series and "param_norm/2.bias" in series


NANOGPT_STYLE = """
import math, sys, torch
import reslog as wandb

# nanoGPT's train.py, reduced: its config globals, wandb.init/log, a tiny char model on CPU.
wandb_log, wandb_project, wandb_run_name = True, "owt", "gpt2-tiny"
batch_size, block_size, n_embd, max_iters, eval_interval, learning_rate = 4, 8, 16, 6, 3, 1e-2
config = {
    k: v for k, v in globals().items()
    if not k.startswith("_") and isinstance(v, (int, float, bool, str))
}
torch.manual_seed(0)
data = torch.randint(0, 32, (512,))
model = torch.nn.Sequential(torch.nn.Embedding(32, n_embd), torch.nn.Linear(n_embd, 32))
opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)
if wandb_log:
    wandb.init(project=wandb_project, name=wandb_run_name, config=config)
for iter_num in range(max_iters):
    ix = torch.randint(len(data) - block_size - 1, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + block_size + 1] for i in ix])
    loss = torch.nn.functional.cross_entropy(model(x).view(-1, 32), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if iter_num % eval_interval == 0 and wandb_log:
        wandb.log({
            "iter": iter_num, "train/loss": loss.item(), "val/loss": loss.item(),
            "lr": learning_rate, "mfu": -100.0,
        })
"""


@pytest.mark.integration
def test_a_nanogpt_style_script_runs_unchanged_with_import_reslog_as_wandb(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(NANOGPT_STYLE))
    store = tmp_path / "runs.db"
    env = {**os.environ, "RESLOG_STORE": str(store), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    info, series, _ = read_run(store)
    assert (info.project, info.name, info.status) == ("owt", "gpt2-tiny", "finished")
    assert info.config["block_size"] == 8
    assert [s for s, _ in series["train/loss"]] == [0, 1] and series["iter"] == [(0, 0.0), (1, 3.0)]


def test_a_store_from_before_run_groups_upgrades_and_keeps_its_runs(store_path, capsys):
    from alembic import command

    from schema.store import migrate
    from schema.store.connect import make_engine, resolve_store
    from tests.fixtures.legacy import as_rows

    run = wandb.init(project="p", name="old", store=store_path, system=False)
    run.log({"a": 1.0})
    run.finish()
    engine = make_engine(resolve_store(store_path))
    as_rows(engine)  # its points back to rows, as a store from before chunks holds them
    cfg = migrate.alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
    engine.dispose()
    assert main(["upgrade", str(store_path), "--no-backup"]) == 0
    assert f"schema 0002 → {migrate.head_revision()}" in capsys.readouterr().out
    info, series, _ = read_run(store_path)
    assert (info.name, info.group, info.job_type, series) == ("old", "", "", {"a": [(0, 1.0)]})
    grouped = wandb.init(project="p", group="g", store=store_path, system=False)
    grouped.finish()
    assert read_run(store_path)[0].group == "g"


# The calls the three frameworks' own wandb integrations make, in their order (transformers
# 5.x WandbCallback.setup/on_log/on_train_end, lightning 2.x WandbLogger, accelerate 1.x
# WandBTracker), with `import reslog as wandb` in place of wandb.


def test_the_calls_of_hugging_faces_wandb_callback(store):
    model = tiny_model()
    if wandb.run is None:
        wandb.init(project="huggingface", name="out", group=None, system=False)
    wandb.config.update({"learning_rate": 5e-5, "output_dir": "out"}, allow_val_change=True)
    if getattr(wandb, "define_metric", None):
        wandb.define_metric("train/global_step")
        wandb.define_metric("*", step_metric="train/global_step", step_sync=True)
    wandb.watch(model, log="gradients", log_freq=100)
    wandb.run._label(code="transformers_trainer")
    wandb.config["model/num_parameters"] = 57
    wandb.termwarn("the run name equals the output dir")
    for step in (10, 20):
        wandb.log({"train/loss": 1.0 / step, "train/epoch": step / 20, "train/global_step": step})
    wandb.log({"eval/loss": 0.5, "eval/runtime": 0.1, "train/global_step": 20})
    for k, v in {"train_runtime": 3.1, "total_flos": 1e12}.items():
        wandb.run.summary[k] = v
    summary = {k: v for k, v in dict(wandb.summary).items() if isinstance(v, (int, float))}
    assert wandb.config.get("model/num_parameters") == 57 and wandb.run.url and wandb.run.id
    wandb.finish()
    info, series, _ = read_run(store)
    # wandb's summary: each logged key's last value and the keys set by hand; the store keeps
    # the hand-set ones (the series rows hold the last values).
    assert summary == {
        "train/loss": 0.05,
        "train/epoch": 1.0,
        "train/global_step": 20,
        "eval/loss": 0.5,
        "eval/runtime": 0.1,
        "train_runtime": 3.1,
        "total_flos": 1e12,
    }
    assert info.summary == {"train_runtime": 3.1, "total_flos": 1e12}
    assert info.config["model/num_parameters"] == 57
    assert dict(series["train/global_step"]) == {0: 10.0, 1: 20.0, 2: 20.0}


def test_the_calls_of_lightnings_wandb_logger(store, tmp_path):
    init = {"name": None, "project": "lightning_logs", "dir": None, "id": None}
    init.update(resume="allow", anonymous=None)
    experiment = wandb.run if wandb.run is not None else wandb.init(**init, system=False)
    experiment.define_metric("trainer/global_step")
    experiment.define_metric("*", step_metric="trainer/global_step", step_sync=True)
    experiment.watch(tiny_model(), log="gradients", log_freq=100, log_graph=True)
    experiment.config.update({"lr": 0.1, "width": 8}, allow_val_change=True)
    for step in range(3):
        experiment.log(dict({"train/loss": 1.0 - step / 10}, **{"trainer/global_step": step}))
    with pytest.warns(RuntimeWarning, match="not logged: key 'samples'"):
        experiment.log(
            {"samples": wandb.Table(columns=["a"], data=[[1]]), "trainer/global_step": 2}
        )
    with pytest.warns(RuntimeWarning, match="not logged: key 'img'"):
        experiment.log({"img": [wandb.Image(object()), wandb.Image(object())]})
    assert experiment.id == experiment.uid and experiment.project == "lightning_logs"
    wandb.finish()
    info, series, _ = read_run(store)
    assert info.config == {"lr": 0.1, "width": 8} and info.status == "finished"
    assert len(series["train/loss"]) == 3


def test_accelerates_own_wandb_tracker_runs_on_reslog(store, monkeypatch):
    from accelerate import Accelerator

    monkeypatch.setitem(sys.modules, "wandb", wandb)  # accelerate's `import wandb` gets reslog
    accelerator = Accelerator(log_with="wandb", cpu=True)
    accelerator.init_trackers(
        "acc-wandb", config={"lr": 0.1}, init_kwargs={"wandb": {"system": False}}
    )
    for step in range(3):
        accelerator.log({"train/loss": 1.0 / (step + 1)}, step=step)
    tracker = accelerator.get_tracker("wandb")
    with pytest.warns(RuntimeWarning, match="not logged: key 'samples'"):
        tracker.log_images({"samples": [object()]}, step=3)
    with pytest.warns(RuntimeWarning, match="not logged: key 'preds'"):
        tracker.log_table("preds", columns=["a"], data=[[1]], step=3)
    accelerator.end_training()
    info, series, _ = read_run(store)
    assert (info.project, info.status, info.config) == ("acc-wandb", "finished", {"lr": 0.1})
    assert series["train/loss"] == [(0, 1.0), (1, 0.5), (2, pytest.approx(1 / 3))]


def test_config_behaves_as_a_mapping_and_any_public_name_is_a_key(store):
    run = wandb.init(project="p", config={"lr": 1}, system=False)
    run.config.version = 2  # a key, not an attribute of the object
    run.config.setdefaults({"lr": 5, "seed": 0})
    assert dict(run.config.items()) == {"lr": 1, "version": 2, "seed": 0}
    assert "seed" in run.config and len(run.config) == 3 and run.config.get("nope", 7) == 7
    with pytest.raises(AttributeError, match="reserved"):
        run.config._private = 1
    with pytest.raises(AttributeError, match="no key 'nope'"):
        _ = run.config.nope
    del run.config["seed"]
    run.finish()
    assert read_run(store)[0].config == {"lr": 1, "version": 2}


def test_define_metric_is_what_resplots_metric_axis_reads(store):
    from resplot.data.xaxis import step_metric

    run = wandb.init(project="p", system=False)
    wandb.define_metric("train/global_step")
    wandb.define_metric("val/*", step_metric="val/step")
    wandb.define_metric("*", step_metric="train/global_step", step_sync=True)
    wandb.define_metric("eval/*", step_metric="eval/step")
    run.finish()
    events = read_run(store)[2]
    assert [json.loads(e.body) for e in events if e.kind == "metric"] == [
        {},
        {"step_metric": "val/step"},
        {"step_metric": "train/global_step"},
        {"step_metric": "eval/step"},
    ]
    assert step_metric(events) == "train/global_step"  # "*" wins over a narrower glob
    assert step_metric([e for e in events if e.title == "val/*"]) == "val/step"
    assert step_metric([]) is None
