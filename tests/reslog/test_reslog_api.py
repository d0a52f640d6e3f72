"""The reslog API end to end against real SQLite stores: what is logged is what readers read."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import reslog
from schema import open_store
from schema.store.errors import UnknownRun
from schema.store.read import fetch_events, fetch_points, key_names, list_runs

ROOT = Path(__file__).resolve().parents[2]


def read_run(store, uid: str | None = None):
    """(run info, {key: [(step, value), ...]}, events) of one run (the newest by default)."""
    engine = open_store(store)
    try:
        with engine.connect() as conn:
            runs = list_runs(conn)
            row_id, info = next(
                ((i, r) for i, r in reversed(runs) if uid is None or r.ref.uid == uid)
            )
            pts = fetch_points(conn, [row_id])
            names = key_names(conn)
            series: dict[str, list[tuple[int, float]]] = {}
            for k, s, v in zip(pts.key_ids, pts.steps, pts.values, strict=True):
                series.setdefault(names[k], []).append((s, v))
            return info, series, fetch_events(conn, row_id, info.ref)
    finally:
        engine.dispose()


def test_logged_values_come_back_with_steps_and_the_run_finishes(store_path):
    run = reslog.init(project="p", name="n", store=store_path, system=False, flush_interval=0.05)
    for i in range(5):
        run.log({"train/loss": 1.0 / (i + 1), "train/lr": 0.1 * i})
    run.log({"valid/loss": 0.7}, step=10)
    run.log({"train/loss": 0.1})
    assert run.step == 12
    assert run.finish() is True
    info, series, _ = read_run(store_path, run.uid)
    assert info.status == "finished"
    assert info.ended_at is not None and info.project == "p" and info.name == "n"
    assert series["train/loss"] == [(i, 1.0 / (i + 1)) for i in range(5)] + [(11, 0.1)]
    assert series["train/lr"] == [(i, 0.1 * i) for i in range(5)]
    assert series["valid/loss"] == [(10, 0.7)]


def test_nan_and_infinities_round_trip(store_path):
    run = reslog.init(project="p", store=store_path, system=False)
    run.log({"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "int": 3, "bool": True})
    run.finish()
    _, series, _ = read_run(store_path)
    assert math.isnan(series["nan"][0][1])
    assert series["inf"] == [(0, math.inf)]
    assert series["-inf"] == [(0, -math.inf)]
    assert series["int"] == [(0, 3.0)] and series["bool"] == [(0, 1.0)]


def test_any_unicode_key_is_stored_as_given(store_path):
    keys = ["损失/train", "ünïcødé λ", "emoji 🚀/x", "spaces and/slashes/ok", ""]
    run = reslog.init(project="p", store=store_path, system=False)
    run.log({k: float(i) for i, k in enumerate(keys)})
    run.finish()
    _, series, _ = read_run(store_path)
    assert {k: v[0][1] for k, v in series.items()} == {k: float(i) for i, k in enumerate(keys)}


def test_timer_values_land_at_the_next_log_and_accumulate_within_a_step(store_path):
    run = reslog.init(project="p", store=store_path, system=False)
    with run.timer("forward"):
        time.sleep(0.02)
    with run.timer("forward"):
        time.sleep(0.02)
    run.log({"train/loss": 1.0}, step=7)
    run.log({"train/loss": 0.5})  # no timer ran since: no time/forward at step 8
    run.finish()
    _, series, _ = read_run(store_path)
    [(step, seconds)] = series["time/forward"]
    assert step == 7
    assert 0.04 <= seconds < 5.0


def test_summary_alerts_and_events_are_stored(store_path):
    run = reslog.init(project="p", store=store_path, system=False)
    run.log({"train/loss": 2.0}, step=3)
    run.summary["best_valid_ppl"] = 15.6
    run.summary.update(last_step=3)
    run.alert("loss is NaN", level="error", body="at step 3")
    run.event("checkpoint", "step 4000")
    with pytest.raises(ValueError, match="level"):
        run.event("note", "x", level="fatal")
    run.finish()
    info, _, events = read_run(store_path)
    assert info.summary == {"best_valid_ppl": 15.6, "last_step": 3}
    got = [(e.kind, e.level, e.title, e.body, e.step) for e in events]
    assert got == [
        ("alert", "error", "loss is NaN", "at step 3", 3),
        ("checkpoint", "info", "step 4000", "", 3),
    ]


def test_config_is_stored_as_json_with_secrets_redacted(store_path):
    config = {
        "lr": 3e-4,
        "batch_tokens": 524288,
        "tokenizer": "bbpe.json",
        "pad_token": "<pad>",
        "flops_per_token": 7.2e8,
        "HF_TOKEN": "hf_abc",
        "wandb": {"api_key": "k123", "project": "z"},
        "db": {"password": "pw"},
        "path": Path("/data"),
    }
    run = reslog.init(project="p", config=config, store=store_path, system=False)
    run.finish()
    info, _, _ = read_run(store_path)
    assert info.config == {
        "lr": 3e-4,
        "batch_tokens": 524288,
        "tokenizer": "bbpe.json",
        "pad_token": "<pad>",
        "flops_per_token": 7.2e8,
        "HF_TOKEN": "<redacted>",
        "wandb": {"api_key": "<redacted>", "project": "z"},
        "db": {"password": "<redacted>"},
        "path": "/data",
    }
    raw = open_store(store_path).connect().exec_driver_sql("SELECT config FROM runs").scalar()
    assert "hf_abc" not in raw and "k123" not in raw and "pw" not in json.loads(raw)["db"].values()


def test_context_manager_finishes_and_marks_failures(store_path):
    with reslog.init(project="p", name="ok", store=store_path, system=False) as run:
        run.log({"a": 1.0})
    with (
        pytest.raises(ZeroDivisionError),
        reslog.init(project="p", name="bad", store=store_path, system=False) as bad,
    ):
        bad.log({"a": 1.0})
        1 / 0  # noqa: B018
    ok_info, _, _ = read_run(store_path, run.uid)
    bad_info, _, bad_events = read_run(store_path, bad.uid)
    assert ok_info.status == "finished"
    assert bad_info.status == "failed"
    assert bad_events[-1].kind == "alert" and "ZeroDivisionError" in bad_events[-1].title


@pytest.mark.parametrize(("code", "status"), [(0, "finished"), (None, "finished"), (3, "failed")])
def test_sys_exit_inside_the_with_block_sets_the_status_from_the_exit_code(
    store_path, code, status
):
    with pytest.raises(SystemExit), reslog.init(project="p", store=store_path, system=False) as run:
        run.log({"a": 1.0})
        sys.exit(code)
    info, series, events = read_run(store_path, run.uid)
    assert info.status == status and series["a"] == [(0, 1.0)]
    titles = [e.title for e in events]
    assert titles == ([] if status == "finished" else ["run failed: sys.exit(3): exit status 3"])


def test_module_level_functions_act_on_the_current_run(store_path):
    run = reslog.init(project="p", store=store_path, system=False)
    assert reslog.current() is run
    reslog.log({"x": 1.0})
    reslog.log({"x": 2.0}, step=5)
    assert reslog.finish() is True
    assert reslog.current() is not run
    _, series, _ = read_run(store_path, run.uid)
    assert series["x"] == [(0, 1.0), (5, 2.0)]


def test_log_after_finish_warns_once_and_stores_nothing(store_path):
    run = reslog.init(project="p", store=store_path, system=False)
    run.log({"x": 1.0})
    run.finish()
    with pytest.warns(RuntimeWarning, match="finished"):
        run.log({"x": 2.0})
    run.log({"x": 3.0})
    _, series, _ = read_run(store_path)
    assert series["x"] == [(0, 1.0)]


def test_resume_appends_continues_the_step_and_records_an_event(store_path):
    first = reslog.init(project="p", name="r", store=store_path, system=False, config={"a": 1})
    first.log({"loss": 3.0})
    first.log({"loss": 2.0})
    first.summary["best"] = 2.0
    first.finish()
    again = reslog.init(store=store_path, resume=first.uid, system=False, config={"b": 2})
    assert again.uid == first.uid and again.step == 2 and again.name == "r"
    again.log({"loss": 1.0})
    again.summary["last"] = 1.0
    again.finish()
    info, series, events = read_run(store_path, first.uid)
    assert series["loss"] == [(0, 3.0), (1, 2.0), (2, 1.0)]
    assert info.status == "finished"
    assert info.config == {"a": 1, "b": 2}
    assert info.summary == {"best": 2.0, "last": 1.0}
    assert [(e.kind, e.step) for e in events] == [("resume", 2)]
    with pytest.raises(UnknownRun, match="nope"):
        reslog.init(store=store_path, resume="nope", system=False)


def test_host_identity_and_ddp_rank_come_from_the_environment(store_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "3")
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.5)
    run.finish()
    explicit = reslog.init(project="p", store=store_path, system=False, rank=0, world_size=2)
    explicit.finish()
    info, _, _ = read_run(store_path, run.uid)
    assert (info.rank, info.world_size, info.pid) == (3, 8, os.getpid())
    assert info.host and info.command and info.heartbeat_interval == 0.5
    assert info.git_commit is None or len(info.git_commit) == 40
    info2, _, _ = read_run(store_path, explicit.uid)
    assert (info2.rank, info2.world_size) == (0, 2)


def test_default_store_is_reslog_store_env_then_runs_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RESLOG_STORE", raising=False)
    run = reslog.init(project="p", system=False)
    run.finish()
    assert (tmp_path / "runs" / "reslog.db").is_file()
    monkeypatch.setenv("RESLOG_STORE", str(tmp_path / "elsewhere.db"))
    run = reslog.init(project="p", system=False)
    run.finish()
    info, _, _ = read_run(tmp_path / "elsewhere.db")
    assert info.ref.uid == run.uid


def test_system_metrics_arrive_at_the_current_step_without_advancing_it(store_path):
    run = reslog.init(project="p", store=store_path, system=True, system_interval=0.05)
    run.log({"train/loss": 1.0}, step=41)
    before = run._writer.side_logged  # the sampler's first sample may precede the log (step 0)
    deadline = time.monotonic() + 20
    while run._writer.side_logged == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.step == 42
    run.finish()
    _, series, _ = read_run(store_path)
    assert series["sys/ram_used_gib"], "no system sample was stored"
    steps = {step for step, _ in series["sys/ram_used_gib"]}
    assert 41 in steps and steps <= {0, 41}


@pytest.mark.integration
def test_import_reslog_loads_no_torch_numpy_or_nvml():
    heavy = "('torch', 'numpy', 'pynvml')"
    code = f"import sys, reslog; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "[]"


def test_event_text_and_summary_keys_that_cannot_be_stored_as_given_never_block_the_writer(
    store_path,
):
    run = reslog.init(project="p", store=store_path, system=False, flush_interval=0.05)
    run.log({"train/loss": 1.0})
    run.event("note", "bad \ud800 title", body="nul \x00 byte")
    run.summary[("a", 1)] = 2.0
    run.summary["cycle"] = cycle = {}
    cycle["self"] = cycle
    run.log({"train/loss": 0.5})
    assert run.finish(timeout=5) is True
    info, series, events = read_run(store_path)
    assert series["train/loss"] == [(0, 1.0), (1, 0.5)]
    assert [(e.title, e.body) for e in events] == [("bad \\ud800 title", "nul \\x00 byte")]
    assert info.summary["('a', 1)"] == 2.0 and isinstance(info.summary["cycle"], str)
