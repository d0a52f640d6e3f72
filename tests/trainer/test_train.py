"""The training loop on CPU: learning, exact resume, config errors, schedules, checkpoints and
the golden loss curve of the debug model (what reaches the reslog store: test_train_logging.py)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

from tests.fixtures.trainer_runs import DEBUG, debug_cfg, run_series
from trainer import checkpoint
from trainer.config import ConfigError, ScheduleConfig, load_config
from trainer.metrics import Logger, peak_flops
from trainer.schedules import Schedule
from trainer.train import Trainer, main, parse_args

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "assets" / "golden_loss_debug.json"


class RecordingLogger(Logger):
    """Keeps what the trainer logs in memory (the Logger interface is the collaborator here)."""

    def __init__(self):
        self.points: dict[str, dict[int, float]] = {}
        self.events: list[tuple[str, str]] = []

    def log(self, metrics, step):
        for k, v in metrics.items():
            self.points.setdefault(k, {})[step] = float(v)

    def event(self, kind, title, body="", level="info"):
        self.events.append((kind, title))


# --------------------------------------------------------------------------- learning


@pytest.mark.slow
def test_debug_model_loss_falls(tmp_path):
    cfg = debug_cfg(
        tmp_path, "--train.steps", "40", "--train.eval_every", "0", "--data.grad_accum", "1"
    )
    log = RecordingLogger()
    trainer = Trainer(cfg, logger=log)
    try:
        trainer.train()
    finally:
        trainer.close()
    loss = log.points["train/loss"]
    assert sorted(loss) == list(range(1, 41))
    first, last = sum(loss[s] for s in range(1, 6)) / 5, sum(loss[s] for s in range(36, 41)) / 5
    assert first > math.log(128) - 0.3  # starts near uniform over 128 tokens
    assert last < first - 1.5, f"loss did not fall: {first:.3f} -> {last:.3f}"


def _golden_losses(tmp_path: Path) -> list[float]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # reductions split across threads would change the last bits
    try:
        cfg = debug_cfg(
            tmp_path,
            "--train.steps",
            "20",
            "--train.eval_every",
            "0",
            "--train.save_final",
            "false",
            "--schedule.kind",
            "cosine",
        )
        log = RecordingLogger()
        trainer = Trainer(cfg, logger=log)
        try:
            trainer.train()
        finally:
            trainer.close()
    finally:
        torch.set_num_threads(threads)
    return [log.points["train/loss"][s] for s in range(1, 21)]


@pytest.mark.slow
def test_golden_loss_curve_of_the_debug_model(tmp_path):
    losses = _golden_losses(tmp_path)
    if os.environ.get("TRAINER_REGEN_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(
            json.dumps(
                {
                    "config": "trainer/configs/debug.toml --train.steps 20 "
                    "--schedule.kind cosine, 1 thread",
                    "torch": torch.__version__,
                    "loss": losses,
                },
                indent=1,
            )
        )
    golden = json.loads(GOLDEN.read_text())["loss"]
    how = (
        "the debug model's loss curve changed. If the change is intended (model, init, data "
        "or optimizer), regenerate the golden file with: TRAINER_REGEN_GOLDEN=1 "
        ".venv/bin/pytest tests/trainer/test_train.py -k golden, and commit it"
    )
    assert len(losses) == len(golden) == 20
    for step, (got, want) in enumerate(zip(losses, golden, strict=True), 1):
        assert abs(got - want) <= 2e-3 + 1e-3 * abs(want), f"step {step}: {got} vs {want}: {how}"


# --------------------------------------------------------------------------- resume


@pytest.mark.slow
def test_checkpoint_and_resume_continue_bit_for_bit_in_the_same_run(tmp_path):
    steps = ["--train.steps", "12", "--train.eval_every", "4", "--train.save_final", "true"]
    full_dir, split_dir = tmp_path / "full", tmp_path / "split"

    full = Trainer(debug_cfg(full_dir, *steps))
    try:
        full.train()
    finally:
        full.close()

    # The same run, stopped after 6 steps by a "crash" right after the checkpoint at step 6 ...
    first = Trainer(debug_cfg(split_dir, *steps, "--train.ckpt_every", "6"))
    try:
        while first.step < 6:
            first.log_step(*first.train_step())
            if first.step % 4 == 0:
                first.evaluate()
        first.save_checkpoint()
    finally:
        first.close("killed")
    uid = first.logger.uid
    # ... and resumed from it: the rest of the run, into the same reslog run.
    second = Trainer(debug_cfg(split_dir, *steps, "--train.ckpt_every", "6"), resume="auto")
    assert second.step == 6 and second.logger.uid == uid
    try:
        second.train()
    finally:
        second.close()

    a, _, _ = run_series(full_dir / "runs" / "reslog.db")
    b, events_b, runs_b = run_series(split_dir / "runs" / "reslog.db")
    assert len(runs_b) == 1 and runs_b[0].status == "finished"
    for key in ("train/loss", "train/grad_norm", "train/lr", "train/tokens", "valid/loss"):
        assert a[key] == b[key], key  # exact equality: same floats, same steps
    assert sorted(b["train/loss"]) == list(range(1, 13))

    final_a = checkpoint.load(checkpoint.find_latest(full_dir / "ckpt"))[0]
    final_b = checkpoint.load(checkpoint.find_latest(split_dir / "ckpt"))[0]
    assert final_a["step"] == final_b["step"] == 12
    for name, tensor in final_a["model"].items():
        assert torch.equal(tensor, final_b["model"][name]), name
    kinds = [e.kind for e in events_b]
    assert "resume" in kinds and kinds.count("checkpoint") == 2  # steps 6 and 12


def test_resume_auto_without_a_checkpoint_starts_fresh(tmp_path, capsys):
    trainer = Trainer(
        debug_cfg(tmp_path, "--train.steps", "2"), resume="auto", logger=RecordingLogger()
    )
    trainer.close()
    assert trainer.step == 0
    assert "starting fresh" in capsys.readouterr().out


def test_resume_refuses_a_checkpoint_of_another_model(tmp_path):
    t = Trainer(
        debug_cfg(tmp_path, "--train.steps", "1", "--train.save_final", "true"),
        logger=RecordingLogger(),
    )
    try:
        t.train()
    finally:
        t.close()
    with pytest.raises(ConfigError, match=r"\[model\] differs"):
        Trainer(debug_cfg(tmp_path, "--model.dim", "32"), resume="auto", logger=RecordingLogger())


def test_checkpoints_are_pruned_to_keep_last(tmp_path):
    t = Trainer(
        debug_cfg(
            tmp_path,
            "--train.steps",
            "8",
            "--train.ckpt_every",
            "2",
            "--train.keep_last",
            "2",
            "--train.eval_every",
            "0",
        ),
        logger=RecordingLogger(),
    )
    try:
        t.train()
    finally:
        t.close()
    names = [p.name for p in checkpoint.list_checkpoints(tmp_path / "ckpt")]
    assert names == ["step_00000006", "step_00000008"]
    assert not list((tmp_path / "ckpt").glob("*.tmp*"))
    _, rank_state = checkpoint.load(tmp_path / "ckpt" / "step_00000008")
    assert set(rank_state) == {"loader", "rng", "run_uid"} and "python" in rank_state["rng"]


# --------------------------------------------------------------------------- config and CLI


def test_the_logging_flags_of_a_job_parse():
    cfg, _ = parse_args(["--config", str(DEBUG), "--logging.stall_after", "120"])
    assert cfg.logging.stall_after == 120.0 and cfg.logging.every_rank and cfg.logging.group == ""
    cfg, _ = parse_args(["--config", str(DEBUG), "--stall_after", "none", "--group", "j7"])
    assert cfg.logging.stall_after is None and cfg.logging.group == "j7"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--optim.lr", "-1"], "--optim.lr=-1.0: must be > 0"),
        (["--lr", "abc"], "--optim.lr='abc': expected a number"),
        (["--train.steps", "2.5"], "--train.steps='2.5': expected an integer"),
        (
            ["--schedule.kind", "linear"],
            "--schedule.kind='linear': must be cosine, wsd or constant",
        ),
        (["--model.n_heads", "3"], "--model.dim=64: must be divisible by --model.n_heads=3"),
        (["--data.seq_len", "128"], "--data.seq_len=128: longer than --model.max_seq_len=64"),
        (["--bogus", "1"], "--bogus: unknown flag"),
        (["--train.bogus", "1"], "--train.bogus: unknown flag"),
        (["--seed"], "--seed: missing value"),
        (["--logging.stall_after", "-1"], "--logging.stall_after=-1.0: must be none"),
        (["--logging.every_rank", "maybe"], "--logging.every_rank='maybe': expected true or"),
    ],
)
def test_config_errors_name_the_flag(args, needle, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--config", str(DEBUG), *args])
    assert e.value.code == 2
    assert needle in capsys.readouterr().err


def test_overrides_reach_their_sections_and_unknown_toml_keys_are_refused(tmp_path):
    cfg, _ = parse_args(
        [
            "--config",
            str(DEBUG),
            "--lr",
            "1e-3",
            "--schedule.kind=constant",
            "--logging.tags",
            "a,b",
            "--compile",
            "false",
        ]
    )
    assert cfg.optim.lr == 1e-3 and cfg.schedule.kind == "constant"
    assert cfg.logging.tags == ["a", "b"] and cfg.train.compile is False
    assert cfg.to_dict()["model"]["vocab_size"] == 128
    bad = tmp_path / "bad.toml"
    bad.write_text("[optim]\nlearning_rate = 1.0\n")
    with pytest.raises(ConfigError, match=r"--optim.learning_rate: unknown key in .*bad.toml"):
        load_config(bad)
    bad.write_text("[optimizer]\nlr = 1.0\n")
    with pytest.raises(ConfigError, match=r"unknown section \[optimizer\]"):
        load_config(bad)


def test_every_shipped_config_loads():
    for path in sorted((REPO / "trainer" / "configs").glob("*.toml")):
        cfg = load_config(path)
        assert cfg.train.steps > 0, path


# --------------------------------------------------------------------------- schedules, MFU table


def test_schedules_warm_up_then_follow_their_shape():
    cos = Schedule.from_config(ScheduleConfig("cosine", 10, 0.1), 1.0, 111)
    assert cos(0) == pytest.approx(0.1) and cos(9) == pytest.approx(1.0)
    assert cos(110) == pytest.approx(0.1) and cos(60) == pytest.approx(0.55)
    assert [cos.phase(s) for s in (0, 9, 10, 110)] == ["warmup", "warmup", "decay", "decay"]

    wsd = Schedule.from_config(ScheduleConfig("wsd", 10, 0.0, decay_frac=0.2), 1.0, 100)
    assert wsd(50) == 1.0 and wsd(79) == 1.0 and wsd(99) == pytest.approx(0.0)
    assert [wsd.phase(s) for s in (5, 10, 79, 80)] == ["warmup", "stable", "stable", "decay"]

    const = Schedule.from_config(ScheduleConfig("constant", 0), 2.0, 10)
    assert const(0) == const(9) == 2.0 and const.phase(0) == "stable"


def test_peak_flops_table_matches_device_names():
    assert peak_flops("NVIDIA H100 80GB HBM3") == ("H100 SXM", 989e12)
    assert peak_flops("NVIDIA H100 PCIe")[0] == "H100 PCIe"
    assert peak_flops("NVIDIA H200")[0] == "H200"
    assert peak_flops("NVIDIA A100-SXM4-80GB")[0] == "A100"
    assert peak_flops("NVIDIA L40S")[0] == "L40S"
    assert peak_flops("NVIDIA GeForce RTX 4090")[0] == "RTX 4090"
    assert peak_flops("Some Future Accelerator") is None


# --------------------------------------------------------------------------- the real data path


def test_training_on_prepared_shards_then_generating_from_the_checkpoint(tmp_path, capsys):
    from trainer.generate import main as generate_main
    from trainer.prepare import prepare

    raw = tmp_path / "raw" / "docs.jsonl"
    raw.parent.mkdir()
    with raw.open("w") as f:  # real text: this repository's own trainer sources, in chunks
        for i, src in enumerate(sorted((REPO / "trainer").glob("*.py"))):
            text = src.read_text()
            for j in range(0, len(text), 2000):
                f.write(
                    json.dumps(
                        {
                            "id": f"{i}-{j}",
                            "data_src": "repo",
                            "category": "code",
                            "title": src.name,
                            "content": text[j : j + 2000],
                        }
                    )
                    + "\n"
                )
    data = tmp_path / "data"
    manifest = prepare(
        [raw], data, vocab_size=384, valid_fraction=0.1, force=True, log=lambda s: None
    )
    rc = main(
        [
            "--config",
            str(DEBUG),
            "--no-log",
            "--data.source",
            "shards",
            "--data.dir",
            str(data),
            "--model.vocab_size",
            "0",
            "--train.steps",
            "6",
            "--train.eval_every",
            "3",
            "--train.save_final",
            "true",
            "--train.threads",
            "1",
            "--train.ckpt_dir",
            str(tmp_path / "ckpt"),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "valid loss" in out
    main_state, rank_state = checkpoint.load(checkpoint.find_latest(tmp_path / "ckpt"))
    assert main_state["config"]["model"]["vocab_size"] == manifest["vocab_size"]
    assert rank_state["loader"]["step"] == 6 * 2  # ShardLoader position: 6 steps x 2 micro-batches

    rc = generate_main(
        [
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--prompt",
            "def ",
            "--max-new-tokens",
            "8",
            "--greedy",
        ]
    )
    assert rc == 0
    assert "--- sample 1\ndef " in capsys.readouterr().out


def test_a_spent_time_budget_stops_cleanly_with_a_note_and_a_checkpoint(tmp_path):
    store = tmp_path / "runs" / "reslog.db"
    rc = main(
        [
            "--config",
            str(DEBUG),
            "--train.steps",
            "1000",
            "--train.max_minutes",
            "1e-9",  # spent after the first step
            "--train.save_final",
            "true",
            "--train.ckpt_dir",
            str(tmp_path / "ckpt"),
            "--logging.store",
            str(store),
        ]
    )
    assert rc == 0
    series, events, runs = run_series(store)
    assert sorted(series["train/loss"]) == [1]
    assert [e.title for e in events if e.kind == "note"] == [
        "time budget of 1e-09 min reached at step 1"
    ]
    assert ("checkpoint", 1) in [(e.kind, e.step) for e in events]
    assert runs[0].status == "finished"
    with pytest.raises(SystemExit):
        parse_args(["--config", str(DEBUG), "--train.max_minutes", "-1"])


# --------------------------------------------------------------------------- review edge cases


def test_the_last_step_reaches_the_minimum_lr_even_with_a_single_decay_step():
    # 10 steps, decay_frac 0.1: one decay step, which must be the minimum lr, not the peak.
    wsd = Schedule.from_config(ScheduleConfig("wsd", 2, 0.1, decay_frac=0.1), 1.0, 10)
    assert wsd.phase(9) == "decay" and wsd(9) == pytest.approx(0.1)
    # Cosine whose warmup leaves one step: that step is the end of the decay.
    cos = Schedule.from_config(ScheduleConfig("cosine", 9, 0.1), 1.0, 10)
    assert cos(8) == pytest.approx(1.0) and cos(9) == pytest.approx(0.1)


class SummaryLogger(RecordingLogger):
    def __init__(self):
        super().__init__()
        self.summaries: dict[str, object] = {}

    def summary(self, values):
        self.summaries.update(values)


def test_grad_accum_logs_the_mean_micro_batch_loss_and_counts_every_token(tmp_path):
    logger = SummaryLogger()
    cfg = debug_cfg(tmp_path, "--train.steps", "3", "--data.grad_accum", "3", "--grad_clip", "0.01")
    t = Trainer(cfg, logger=logger)
    micro: list[float] = []
    t.raw_model.register_forward_hook(lambda m, args, out: micro.append(float(out.detach())))
    try:
        for _ in range(3):
            t.log_step(*t.train_step())
    finally:
        t.close()
    assert len(micro) == 9
    for step in (1, 2, 3):
        want = sum(micro[3 * (step - 1) : 3 * step]) / 3
        assert logger.points["train/loss"][step] == pytest.approx(want, rel=1e-6)
        assert logger.points["train/tokens"][step] == step * 8 * 64 * 3
    # The logged grad norm is the one before clipping: above the clip threshold.
    assert min(logger.points["train/grad_norm"].values()) > 0.1


def test_step_times_are_not_kept_forever_without_ddp(tmp_path):
    t = Trainer(debug_cfg(tmp_path, "--train.steps", "5"), logger=RecordingLogger())
    try:
        t.train()
        # Per-rank step times are only gathered under DDP; kept otherwise, they grow per step.
        assert t._rank_times == []
    finally:
        t.close()


def test_the_best_validation_loss_survives_a_resume(tmp_path):
    args = ["--train.steps", "4", "--train.eval_every", "2", "--train.ckpt_every", "2"]
    first = Trainer(debug_cfg(tmp_path, *args), logger=SummaryLogger())
    try:
        first.log_step(*first.train_step())
        first.log_step(*first.train_step())
        best = first.evaluate()
        first.save_checkpoint()
    finally:
        first.close()
    assert best is not None
    logger = SummaryLogger()
    second = Trainer(debug_cfg(tmp_path, *args, "--optim.lr", "3.0"), "auto", logger=logger)
    try:
        second.train()  # a huge lr: the validation loss after the resume is worse
    finally:
        second.close()
    assert second.best_valid == best and logger.summaries["best_valid_loss"] == best


def test_a_train_split_too_small_for_one_step_is_a_flag_error(tmp_path, capsys):
    from trainer.prepare import prepare

    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"content": f"doc {i}"}) + "\n" for i in range(20)))
    prepare([raw], tmp_path / "data", vocab_size=320, log=lambda s: None)
    args = ["--config", str(DEBUG), "--no-log", "--data.source", "shards", "--model.vocab_size"]
    rc = main([*args, "0", "--data.dir", str(tmp_path / "data"), "--train.steps", "1"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--data.dir=" in err and "split 'train'" in err and "needs at least" in err
    # A vocabulary given on the command line does not hide a directory without a manifest.
    rc = main([*args, "128", "--data.dir", str(tmp_path / "nothing"), "--train.steps", "1"])
    assert rc == 2 and "no manifest.json" in capsys.readouterr().err


def test_a_store_that_cannot_be_opened_is_one_line_before_step_0(tmp_path, capsys):
    not_a_store = tmp_path / "notes.db"
    not_a_store.write_text("my notes, not a database\n" * 100)
    args = ["--config", str(DEBUG), "--data.source", "synthetic", "--train.steps", "1"]
    rc = main([*args, "--logging.store", str(not_a_store)])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not a SQLite database" in err and "Traceback" not in err
    assert not_a_store.read_text().startswith("my notes")  # left as it was


def _unfused(main: dict, trainer: Trainer) -> dict:
    """A checkpoint's main state rewritten in the layout of the model before issue 13 (separate
    wq/wk/wv and w1/w3, their AdamW moments per matrix): what such a checkpoint holds."""
    from trainer import legacy

    m = trainer.raw_model
    model = {}
    for name, tensor in main["model"].items():
        olds = legacy.old_names(name)
        for old, block in zip(olds, tensor.split(m._fused_rows(name)), strict=True):
            model[old] = block.clone()
    state, groups, index = {}, [], 0
    pairs = zip(main["optimizer"]["param_groups"], trainer._param_groups(), strict=True)
    for group, (names, _) in pairs:
        ids = []
        for new_id, name in zip(group["params"], names, strict=True):
            rows = m._fused_rows(name)
            for k in range(len(rows)):
                s = main["optimizer"]["state"][new_id]
                state[index] = {
                    key: v.split(rows)[k].clone() if v.dim() > 0 else v.clone()
                    for key, v in s.items()
                }
                ids.append(index)
                index += 1
        groups.append({**group, "params": ids})
    return {**main, "model": model, "optimizer": {"state": state, "param_groups": groups}}


@pytest.mark.slow
def test_a_checkpoint_of_the_unfused_model_resumes_exactly_like_the_fused_one(tmp_path):
    steps = ["--train.steps", "8", "--train.eval_every", "0", "--logging.enabled", "false"]
    first = Trainer(debug_cfg(tmp_path / "fused", *steps), logger=RecordingLogger())
    try:
        while first.step < 4:
            first.log_step(*first.train_step())
        path = first.save_checkpoint()
        old_dir = tmp_path / "unfused" / "ckpt" / path.name
        old_dir.mkdir(parents=True)
        for f in path.iterdir():
            (old_dir / f.name).write_bytes(f.read_bytes())
        main = torch.load(path / "model.pt", weights_only=False)
        torch.save(_unfused(main, first), old_dir / "model.pt")
    finally:
        first.close()
    assert (
        "layers.0.attention.wq.weight"
        in torch.load(old_dir / "model.pt", weights_only=False)["model"]
    )

    losses = []
    for name in ("fused", "unfused"):
        log = RecordingLogger()
        t = Trainer(debug_cfg(tmp_path / name, *steps), resume="auto", logger=log)
        try:
            assert t.step == 4
            t.train()
        finally:
            t.close()
        losses.append([log.points["train/loss"][s] for s in range(5, 9)])
    assert losses[0] == losses[1]  # the same floats: stacking the matrices is exact
