"""DDP with 2 CPU processes (gloo) under a real torchrun, logging into a real SQLite store."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schema.store.connect import open_store
from schema.store.read import key_names, list_runs
from tests.fixtures.stored_points import all_points
from trainer import checkpoint

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def torchrun(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "trainer.train",
        "--config",
        str(REPO / "trainer/configs/debug.toml"),
        "--train.ckpt_dir",
        str(tmp_path / "ckpt"),
        "--train.threads",
        "1",
        "--logging.store",
        str(tmp_path / "runs" / "reslog.db"),
        "--logging.name",
        "ddp",
        "--logging.print_every",
        "0",
        *args,
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, (
        f"torchrun failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return proc


@pytest.mark.slow
def test_two_cpu_ranks_log_a_run_each_joined_as_one_job(tmp_path):
    torchrun(
        tmp_path,
        "--train.steps",
        "8",
        "--train.eval_every",
        "4",
        "--logging.log_every",
        "2",
        "--train.save_final",
        "true",
        "--logging.system_interval",
        "0.2",
    )
    engine = open_store(str(tmp_path / "runs" / "reslog.db"), readonly=True)
    try:
        with engine.connect() as conn:
            runs = dict(list_runs(conn))
            names = key_names(conn)
            series_of: dict[str, dict[str, dict[int, float | None]]] = {}
            for run_id, run in runs.items():
                held = series_of.setdefault(run.name, {})
                for _i, _r, key_id, step, _w, value in all_points(conn, [run_id]):
                    held.setdefault(names[key_id], {})[step] = value
    finally:
        engine.dispose()
    # One run per rank, joined by one job id (the group), each with its own step phases.
    assert sorted(r.name for r in runs.values()) == ["ddp", "ddp-rank1"]
    info = next(r for r in runs.values() if r.name == "ddp")
    other = next(r for r in runs.values() if r.name == "ddp-rank1")
    assert info.status == other.status == "finished"
    assert (info.rank, other.rank) == (0, 1) and info.world_size == other.world_size == 2
    assert info.group and info.group == other.group
    assert info.config["runtime"]["job"] == info.group
    series, rank1 = series_of["ddp"], series_of["ddp-rank1"]
    for held in (series, rank1):
        for phase in ("data", "h2d", "forward", "backward", "comm", "optimizer", "step"):
            assert sorted(held[f"time/{phase}"]) == [2, 4, 6, 8], phase
        for step in (2, 4, 6, 8):
            parts = sum(held[f"time/{p}"][step] for p in ("data", "h2d", "forward", "backward"))
            parts += held["time/comm"][step] + held["time/optimizer"][step]
            assert 0 < parts <= held["time/step"][step] + 1e-9
    # Rank 1's run holds its phases only: the job's scalars and events are rank 0's.
    assert set(rank1) == {k for k in rank1 if k.startswith("time/")}
    # One telemetry sampler per host: rank 0's.
    assert not any(k.startswith("sys/") for k in rank1)

    # Every rank's step time, gathered to rank 0 once per log interval.
    for r in (0, 1):
        times = series[f"time/rank{r}/step"]
        assert sorted(times) == [2, 4, 6, 8]
        assert all(t is not None and t > 0 for t in times.values())
    assert sorted(series["train/loss"]) == [2, 4, 6, 8]
    assert all(v is not None and math.isfinite(v) for v in series["train/loss"].values())
    assert set(series["valid/loss"]) == {4, 8}
    # Both ranks' batches count: 2 ranks x 8 sequences x 64 tokens x 2 micro-batches per step.
    assert series["train/tokens"][8] == 8 * 2 * 8 * 64 * 2
    assert any(k.startswith("sys/") for k in series)
    assert info.config["runtime"]["world_size"] == 2

    # The checkpoint has one state file per rank, written into one directory.
    latest = checkpoint.find_latest(tmp_path / "ckpt")
    assert latest is not None and latest.name == "step_00000008"
    assert sorted(p.name for p in latest.iterdir()) == ["model.pt", "rank0.pt", "rank1.pt"]
