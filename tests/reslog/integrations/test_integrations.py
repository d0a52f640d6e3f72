"""Hugging Face Trainer, Lightning and Accelerate logging into reslog: the real libraries, tiny
models, on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import reslog
from tests.reslog.test_reslog_api import read_run

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def store(store_path, monkeypatch):
    monkeypatch.setenv("RESLOG_STORE", str(store_path))
    monkeypatch.setenv("WANDB_DISABLED", "true")
    yield store_path
    while reslog.run is not None:
        reslog.finish()


# -- Hugging Face -----------------------------------------------------------------------------

HF_SETUP = """
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

class Tokens(torch.utils.data.Dataset):
    def __init__(self, fail_after=None):
        self.fail_after, self.calls = fail_after, 0
    def __len__(self):
        return 64
    def __getitem__(self, i):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise OSError("shard train_00003.bin: input/output error (simulated)")
        ids = torch.arange(i, i + 8) % 32
        return {"input_ids": ids, "labels": ids}

def tiny_trainer(out, callbacks, fail_at=None):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32, n_positions=8)
    )
    train = Tokens(None if fail_at is None else 2 * fail_at)  # 2 samples a step
    args = TrainingArguments(
        output_dir=out, max_steps=6, logging_steps=2, eval_strategy="steps", eval_steps=3,
        per_device_train_batch_size=2, per_device_eval_batch_size=4, report_to=[],
        use_cpu=True, save_strategy="no", include_num_input_tokens_seen=True,
        run_name="tiny-gpt2", learning_rate=1e-3, disable_tqdm=True, hub_token="hf_secret",
    )
    return Trainer(model=model, args=args, train_dataset=train, eval_dataset=Tokens(),
                   callbacks=callbacks)
"""


def hf_namespace() -> dict:
    ns: dict = {}
    exec(textwrap.dedent(HF_SETUP), ns)  # the same code runs in the failure test's child
    return ns


HF_SCRIPT = """
import json, sys
from reslog.integrations.huggingface import ReslogCallback
trainer = tiny_trainer(sys.argv[1], [ReslogCallback(system=False)])
trainer.train()
evaluated = trainer.evaluate()  # after train(): the same run, as WandbCallback
predicted = trainer.predict(Tokens()).metrics
print("RESULT " + json.dumps({
    "history": trainer.state.log_history, "evaluated": evaluated, "predicted": predicted,
}))
"""  # the run is finished by reslog's exit hooks, as wandb finishes WandbCallback's


def run_hf_script(tmp_path: Path, store: Path, body: str) -> subprocess.CompletedProcess:
    """HF_SETUP and `body` as a script in a fresh process logging into `store`."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(HF_SETUP) + textwrap.dedent(body))
    env = {**os.environ, "RESLOG_STORE": str(store), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.integration
def test_huggingface_trainer_logs_train_eval_and_predict_into_one_run_cell_by_cell(tmp_path):
    import json

    store = tmp_path / "runs.db"
    proc = run_hf_script(tmp_path, store, HF_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT ") :])
    info, series, _ = read_run(store)
    assert (info.project, info.name, info.status) == ("huggingface", "tiny-gpt2", "finished")
    assert len(reslog.open(store).runs()) == 1  # train, evaluate and predict: one run
    # Every value HF logged (trainer.state.log_history), at its step, cell by cell.
    expected: dict[str, list] = {}
    for entry in result["history"]:
        step = entry["step"]
        for key, value in entry.items():
            if key in (
                "step",
                "train_runtime",
                "train_samples_per_second",
                "train_steps_per_second",
                "train_loss",
                "total_flos",
            ):
                continue
            name = "eval/" + key[5:] if key.startswith("eval_") else "train/" + key
            expected.setdefault(name, []).append((step, float(value)))
    for key, points in expected.items():
        assert series[key] == points, key
    assert [s for s, _ in series["train/loss"]] == [2, 4, 6]
    assert [s for s, _ in series["eval/loss"]] == [3, 6, 6]  # the last from evaluate()
    assert series["eval/loss"][-1][1] == result["evaluated"]["eval_loss"]
    assert series["test/loss"] == [(6, result["predicted"]["test_loss"])]
    assert dict(series["train/tokens"])[6] == 96.0
    assert info.config["learning_rate"] == 1e-3 and info.config["hub_token"] == "<redacted>"
    assert info.config["model"]["n_layer"] == 1 and info.config["model/num_parameters"] > 0
    assert info.summary["train_runtime"] > 0 and info.summary["global_step"] == 6
    assert "train_loss" in info.summary and "train/train_loss" not in series


@pytest.mark.slow
def test_huggingface_callback_is_silent_off_rank_zero(store, tmp_path):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from reslog.integrations.huggingface import ReslogCallback

    cb = ReslogCallback(system=False)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    state = TrainerState(is_world_process_zero=False, global_step=3)
    cb.on_train_begin(args, state, TrainerControl())
    cb.on_log(args, state, TrainerControl(), logs={"loss": 1.0})
    cb.on_train_end(args, state, TrainerControl())
    assert cb.run is None and not store.exists()


def test_huggingface_hyper_parameter_search_makes_a_run_per_trial(store, tmp_path):
    """The callbacks as Trainer.hyperparameter_search calls them (no search backend here): a
    trial's on_train_begin finishes the previous trial's run and starts its own."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from reslog.integrations.huggingface import ReslogCallback

    cb = ReslogCallback(system=False)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    runs = []
    for trial in range(2):
        state = TrainerState(is_world_process_zero=True, global_step=2, is_hyper_param_search=True)
        cb.on_train_begin(args, state, TrainerControl())
        cb.on_log(args, state, TrainerControl(), logs={"loss": 1.0 + trial})
        runs.append(cb.run)
    assert runs[0] is not runs[1] and runs[0]._status == "finished" and runs[1]._status is None
    runs[1].finish()
    assert [read_run(store, r.uid)[1]["train/loss"] for r in runs] == [[(2, 1.0)], [(2, 2.0)]]


@pytest.mark.integration
def test_huggingface_training_that_raises_ends_the_run_failed(tmp_path):
    store = tmp_path / "runs.db"
    failing = """
    import sys
    from reslog.integrations.huggingface import ReslogCallback
    tiny_trainer(sys.argv[1], [ReslogCallback(system=False)], fail_at=3).train()
    """
    proc = run_hf_script(tmp_path, store, failing)
    assert proc.returncode == 1 and "input/output error" in proc.stderr
    info, series, events = read_run(store)
    assert info.status == "failed" and [s for s, _ in series["train/loss"]] == [2]
    assert "input/output error" in events[-1].title


# -- Lightning --------------------------------------------------------------------------------


def lightning_module(fail_at: int | None = None):
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self, lr: float = 0.05, width: int = 8):
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, width), torch.nn.Linear(width, 1))

        def training_step(self, batch, idx):
            if fail_at is not None and self.global_step >= fail_at:
                raise RuntimeError("loss is NaN (simulated)")
            loss = self.net(batch[0]).pow(2).mean()
            self.log("train/loss", loss)
            return loss

        def validation_step(self, batch, idx):
            self.log("val/loss", self.net(batch[0]).pow(2).mean())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    data = torch.utils.data.TensorDataset(torch.randn(32, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    return Tiny(), loader


def lightning_trainer(logger, steps: int = 6):
    import lightning.pytorch as pl

    return pl.Trainer(
        max_steps=steps,
        logger=logger,
        accelerator="cpu",
        log_every_n_steps=1,
        val_check_interval=3,
        limit_val_batches=2,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )


@pytest.mark.slow
def test_lightning_logger_takes_hyperparameters_metrics_and_the_final_status(store):
    from reslog.integrations.lightning import ReslogLogger

    logger = ReslogLogger(project="lm", name="tiny", system=False)
    model, loader = lightning_module()
    lightning_trainer(logger).fit(model, loader, loader)
    info, series, _ = read_run(store)
    assert (info.project, info.name, info.status) == ("lm", "tiny", "finished")
    assert info.config == {"lr": 0.05, "width": 8}
    assert [s for s, _ in series["train/loss"]] == [0, 1, 2, 3, 4, 5]
    assert len(series["val/loss"]) == 2 and "epoch" in series
    assert logger.version == info.ref.uid
    # trainer.test later continues the same run
    lightning_trainer(logger).validate(model, loader)
    again = read_run(store)[0]
    assert again.ref.uid == info.ref.uid and again.status == "finished"


@pytest.mark.slow
def test_lightning_failure_finalizes_the_run_failed(store):
    from reslog.integrations.lightning import ReslogLogger

    model, loader = lightning_module(fail_at=2)
    with pytest.raises(RuntimeError, match="simulated"):
        lightning_trainer(ReslogLogger(project="lm", system=False)).fit(model, loader)
    info, series, _ = read_run(store)
    assert info.status == "failed" and [s for s, _ in series["train/loss"]] == [0, 1]


def test_lightning_logger_does_nothing_off_rank_zero(store, monkeypatch):
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    from reslog.integrations.lightning import ReslogLogger

    monkeypatch.setattr(rank_zero_only, "rank", 1)
    logger = ReslogLogger(project="lm", system=False)
    logger.log_hyperparams({"lr": 1})
    logger.log_metrics({"a": 1.0}, step=0)
    logger.finalize("success")
    assert reslog.run is None and not store.exists()


# -- Accelerate -------------------------------------------------------------------------------


def test_accelerate_tracker_logs_config_and_values(store):
    from accelerate import Accelerator

    from reslog.integrations.accelerate import ReslogTracker

    accelerator = Accelerator(log_with=ReslogTracker(system=False), cpu=True)
    accelerator.init_trackers(
        "acc", config={"lr": 0.1, "batch": 4}, init_kwargs={"reslog": {"name": "first"}}
    )
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = accelerator.prepare(model, opt)
    for step in range(5):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        accelerator.log({"train/loss": loss.item(), "note": "warmup"}, step=step)
    assert accelerator.get_tracker("reslog", unwrap=True) is reslog.run
    accelerator.end_training()
    info, series, events = read_run(store)
    assert (info.project, info.name, info.status) == ("acc", "first", "finished")
    assert info.config == {"lr": 0.1, "batch": 4}
    assert [s for s, _ in series["train/loss"]] == [0, 1, 2, 3, 4]
    assert sum(e.kind == "text" for e in events) == 5


def test_accelerate_init_trackers_names_the_run_over_the_trackers_own(store):
    from accelerate import Accelerator

    from reslog.integrations.accelerate import ReslogTracker

    tracker = ReslogTracker("fallback", system=False)
    accelerator = Accelerator(log_with=tracker, cpu=True)
    accelerator.init_trackers("my-project")
    accelerator.log({"a": 1.0}, step=0)
    accelerator.end_training()
    assert read_run(store)[0].project == "my-project" and tracker.run_name == "my-project"
    alone = ReslogTracker("fallback", system=False)  # started without init_trackers
    alone.log({"a": 1.0}, step=0)
    alone.finish()
    assert read_run(store)[0].project == "fallback"


ACCELERATE_WITHOUT_WANDB = """
import importlib.metadata, sys
real = importlib.metadata.metadata
def metadata(name):  # as on a machine where the wandb package is not installed
    if name == "wandb":
        raise importlib.metadata.PackageNotFoundError(name)
    return real(name)
importlib.metadata.metadata = metadata
import reslog
sys.modules["wandb"] = reslog
from accelerate import Accelerator
accelerator = Accelerator(log_with="wandb", cpu=True)
accelerator.init_trackers("acc", config={"lr": 0.1})
accelerator.log({"train/loss": 1.0}, step=0)
accelerator.end_training()
print("RESULT", len(accelerator.trackers))
"""


@pytest.mark.integration
def test_accelerates_own_wandb_tracker_needs_the_wandb_package_installed(tmp_path):
    """What docs/integrations.md says: Accelerate enables log_with="wandb" only when a wandb
    distribution is installed (it reads its metadata), so `sys.modules["wandb"] = reslog`
    alone logs nothing. wandb is installed here: the script hides its metadata, as a machine
    without it would be."""
    store = tmp_path / "runs.db"
    env = {**os.environ, "RESLOG_STORE": str(store), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", ACCELERATE_WITHOUT_WANDB],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "RESULT 0" in proc.stdout  # no tracker: Accelerate dropped "wandb"
    assert not store.exists()
