"""Many hosts, one store: processes log into one PostgreSQL server, resplot reads it back whole.

The path a team takes when one SQLite file per machine is no longer enough: every process gets
the same SQLAlchemy URL, and resplot/`resplot export` read the server directly.
"""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from resplot.cli import main as resplot_main

ROOT = Path(__file__).resolve().parents[3]

HOST = r"""
import math, sys, reslog
url, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
run = reslog.init(project="shared", name=name, store=url, system=False,
                  config={"host": name, "lr": 1e-3 if name == "gpu-a" else 3e-4})
for s in range(steps):
    loss = math.nan if s == 7 else 5.0 / (1 + s)
    run.log({"train/loss": loss, "train/lr": 1e-3, "train/tokens": 1024.0 * (s + 1)}, step=s)
run.summary["best"] = 5.0 / steps
run.finish()
print(run.uid, flush=True)
"""


@pytest.mark.postgres
def test_two_hosts_log_into_one_postgres_store_and_resplot_exports_every_point(pg_store, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    steps = 400
    hosts = [
        subprocess.Popen(
            [sys.executable, "-c", HOST, pg_store, name, str(steps)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("gpu-a", "gpu-b")
    ]
    for proc in hosts:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "locked" not in err and "Traceback" not in err, err

    long = tmp_path / "points.csv"
    assert resplot_main(["export", pg_store, "--format", "csv", "-o", str(long)]) == 0
    rows = list(csv.DictReader(io.StringIO(long.read_text())))
    by_run: dict[str, dict[int, float]] = {}
    for r in rows:
        if r["key"] == "train/loss":
            by_run.setdefault(r["run"], {})[int(r["step"])] = float(r["value"])
    assert sorted(by_run) == ["gpu-a", "gpu-b"]
    for losses in by_run.values():
        assert sorted(losses) == list(range(steps))
        assert math.isnan(losses[7])  # NaN survives the server and the export
        assert losses[399] == pytest.approx(5.0 / 400)
    assert len(rows) == 2 * steps * 3

    table = tmp_path / "table.md"
    assert resplot_main(["export", pg_store, "--format", "md", "-o", str(table)]) == 0
    text = table.read_text()
    # Only the config keys that differ between the hosts' runs, and both runs, appear.
    assert "| host" in text and "| lr" in text and "gpu-a" in text and "gpu-b" in text
