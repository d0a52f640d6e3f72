"""The rest of wandb's surface under `import reslog as wandb`: forked workers, login, save,
artifacts, plots, version, util, mark_preempting, config files and filters, TensorBoard
sync. Each does what wandb users expect or says once why not; none raises."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.test_reslog_api import read_run

ROOT = Path(__file__).resolve().parents[1]


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


def test_wandb_log_in_forked_dataloader_workers_is_ignored_with_one_warning_each(tmp_path):
    proc = run_script(tmp_path, FORKED_WORKERS)
    warnings = [x for x in proc.stderr.splitlines() if "RuntimeWarning" in x]
    assert len(warnings) == 2  # one per worker process, none per call
    assert all("is a fork of pid" in w and "calls here are ignored" in w for w in warnings)
    info, series, _ = read_run(tmp_path / "runs.db")
    assert info.status == "finished" and set(series) == {"train/x"}
    assert series["train/x"] == [(0, 1.0), (1, 5.0), (2, 9.0), (3, 13.0)]
    assert info.summary == {}
