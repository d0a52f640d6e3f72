"""What the training loop gives reslog: the keys, events and config of its run, no store without
logging, and a run per rank of a job (or rank 0's only) with one system sampler per host."""

from __future__ import annotations

import math
import time

import pytest

from schema.store.connect import open_store
from schema.store.read import key_names, list_runs, run_key_ids
from tests.fixtures.trainer_runs import DEBUG, debug_cfg, run_series
from trainer.distributed import DistInfo
from trainer.metrics import Logger, make_logger
from trainer.train import main


@pytest.mark.slow
def test_the_reslog_run_receives_the_expected_keys_events_and_config(tmp_path):
    rc = main(
        [
            "--config",
            str(DEBUG),
            "--train.steps",
            "12",
            "--train.eval_every",
            "6",
            "--train.ckpt_every",
            "6",
            "--train.save_final",
            "true",
            "--train.ckpt_dir",
            str(tmp_path / "ckpt"),
            "--logging.store",
            str(tmp_path / "runs" / "reslog.db"),
            "--logging.name",
            "keys-test",
            "--logging.print_every",
            "0",
            "--logging.system_interval",
            "0.2",
            "--train.threads",
            "1",
        ]
    )
    assert rc == 0
    series, events, runs = run_series(tmp_path / "runs" / "reslog.db")
    assert len(runs) == 1
    run = runs[0]
    assert run.name == "keys-test" and run.status == "finished"
    expected = {
        "train/loss",
        "train/lr",
        "train/grad_norm",
        "train/tokens_per_s",
        "train/tokens",
        "time/data",
        "time/forward",
        "time/backward",
        "time/optimizer",
        "time/step",
        "valid/loss",
        "valid/ppl",
    }
    assert expected <= set(series)
    assert "train/mfu" not in series  # CPU: no peak FLOP/s, so no MFU rather than a guess
    assert any(k.startswith("sys/") for k in series)  # system telemetry of the host
    assert sorted(series["time/step"]) == list(range(1, 13))
    for s in range(1, 13):
        parts = sum(series[f"time/{p}"][s] for p in ("data", "forward", "backward", "optimizer"))
        assert 0 < parts <= series["time/step"][s] + 1e-9
    assert series["train/tokens"][12] == 12 * 8 * 64 * 2
    assert set(series["valid/loss"]) == {6, 12}
    assert series["valid/ppl"][12] == pytest.approx(math.exp(series["valid/loss"][12]))

    kinds = [(e.kind, e.step) for e in events]
    assert ("checkpoint", 6) in kinds and ("checkpoint", 12) in kinds
    schedule = [e.title for e in events if e.kind == "schedule"]
    assert schedule == ["warmup -> stable at step 6", "stable -> decay at step 9"]

    assert run.config["model"]["dim"] == 64 and run.config["optim"]["lr"] == 3e-3
    assert run.config["runtime"]["kernels"]["attention"] == "sdpa"
    assert run.summary["runtime/n_params"] > 0 and "best_valid_loss" in run.summary


def test_no_log_writes_no_store(tmp_path):
    rc = main(
        [
            "--config",
            str(DEBUG),
            "--no-log",
            "--train.steps",
            "2",
            "--train.ckpt_dir",
            str(tmp_path / "ckpt"),
            "--logging.store",
            str(tmp_path / "runs" / "reslog.db"),
        ]
    )
    assert rc == 0
    assert not (tmp_path / "runs").exists()


def test_make_logger_gives_every_rank_a_run_of_the_job_and_each_host_one_sampler(tmp_path):
    cfg = debug_cfg(
        tmp_path,
        "--logging.name",
        "lm",
        "--logging.system",
        "true",
        "--logging.system_interval",
        "0.05",
    )
    off = debug_cfg(tmp_path, "--logging.enabled", "false")
    assert type(make_logger(off, DistInfo(), None, {})) is Logger
    assert not (tmp_path / "runs").exists()
    # Rank 1 (local rank 1): its own run of job "j1", resumed by its own uid, no sampler.
    rank1 = make_logger(cfg, DistInfo(rank=1, local_rank=1, world_size=4), None, {}, job="j1")
    uid = rank1.uid
    rank1.close()
    again = make_logger(cfg, DistInfo(rank=1, local_rank=1, world_size=4), uid, {}, job="j1")
    assert again.uid == uid
    # Local rank 0 of another host: its rank's run, and the host's telemetry.
    host = make_logger(cfg, DistInfo(rank=2, local_rank=0, world_size=4), None, {"n": 1}, job="j1")
    time.sleep(0.3)
    again.close()
    host.close()
    engine = open_store(str(tmp_path / "runs" / "reslog.db"), readonly=True)
    try:
        with engine.connect() as conn:
            runs = sorted(list_runs(conn), key=lambda item: item[1].rank)
            names = key_names(conn)
            keys = {
                info.rank: {names[k] for k in run_key_ids(conn, run_id)} for run_id, info in runs
            }
    finally:
        engine.dispose()
    assert [(r.name, r.rank, r.world_size, r.status, r.group) for _, r in runs] == [
        ("lm-rank1", 1, 4, "finished", "j1"),
        ("lm-rank2", 2, 4, "finished", "j1"),
    ]
    assert runs[1][1].config["runtime"] == {"n": 1}
    assert runs[1][1].config["logging"]["name"] == "lm"
    assert not any(k.startswith("sys/") for k in keys[1])
    assert any(k.startswith("sys/") for k in keys[2])


def test_make_logger_rank0_only_gives_each_host_one_run_and_other_ranks_none(tmp_path):
    cfg = debug_cfg(tmp_path, "--logging.name", "lm", "--logging.every_rank", "false")
    assert type(make_logger(cfg, DistInfo(rank=1, local_rank=1, world_size=4), None, {})) is Logger
    assert not (tmp_path / "runs").exists()
    # Local rank 0 of another host: a telemetry run of its own, never rank 0's resumed one.
    host = make_logger(cfg, DistInfo(rank=2, local_rank=0, world_size=4), "rank-0-uid", {"n": 1})
    host.close()
    _, _, runs = run_series(tmp_path / "runs" / "reslog.db")
    assert [(r.name, r.rank, r.world_size, r.status) for r in runs] == [
        ("lm-host-rank2", 2, 4, "finished")
    ]


class LateTimer:
    """The trainer's StepTimer with each step's timings handed over `lag` steps late, as CUDA
    events do on a GPU (``poll`` answers only for steps whose last event has completed; the GPU
    check on an H200 saw them come a step or more behind). A stand-in for the GPU's clock: on
    the CPU a step's marks resolve at once. The timings themselves are the real ones."""

    def __init__(self, inner, lag: int):
        self.inner, self.lag = inner, lag
        self.held: list = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def poll(self):
        self.held += self.inner.poll()
        ready, self.held = self.held[: -self.lag], self.held[-self.lag :]
        return ready

    def drain(self):
        out, self.held = self.held + self.inner.drain(), []
        return out


@pytest.mark.slow
@pytest.mark.parametrize("lag", [1, 3])
def test_timings_that_resolve_steps_late_are_stored_at_their_own_step(tmp_path, lag, recwarn):
    from trainer.train import Trainer

    cfg = debug_cfg(
        tmp_path,
        "--train.steps",
        "10",
        "--train.eval_every",
        "5",
        "--train.ckpt_every",
        "0",
        "--train.save_final",
        "false",
        "--logging.name",
        "late",
    )
    trainer = Trainer(cfg)
    trainer.timer = LateTimer(trainer.timer, lag)
    try:
        trainer.train()
    finally:
        trainer.close()
    series, _, _ = run_series(tmp_path / "runs" / "reslog.db")
    steps = list(range(1, 11))
    for key in ("train/loss", "train/grad_norm", "time/step", "time/forward", "train/tokens_per_s"):
        assert sorted(series[key]) == steps, key
    assert set(series["valid/loss"]) == {5, 10}
    assert not [w for w in recwarn if "not stored" in str(w.message)]
