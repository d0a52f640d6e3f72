"""A GPU host with `pip install reslog` alone: no numpy, Qt, matplotlib, paramiko, torch, pyarrow.

The extras' modules are made unimportable in a child interpreter (an import hook raising
ModuleNotFoundError, as a missing package does), which is the core install as Python sees it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]

BLOCK = r"""
import importlib.abc, sys
EXTRAS = {"numpy", "PyQt5", "matplotlib", "paramiko", "torch", "pyarrow", "pynvml", "psycopg"}

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in EXTRAS:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled())
"""

CHILD = (
    BLOCK
    + r"""
import os
import reslog
from reslog.tools.cli import main as reslog_main
from resplot.cli import main as resplot_main

store = sys.argv[1]
run = reslog.init(project="p", name="core", store=store, config={"lr": 1e-3})  # system on
for s in range(50):
    with run.timer("forward"):
        pass
    run.log({"train/loss": 1.0 / (1 + s), "ok": True}, step=s)
run.finish()
assert reslog_main(["ls", store]) == 0
assert reslog_main(["export", store, "--format", "md", "-o", store + ".md"]) == 0
assert reslog_main(["export", store, "--format", "parquet", "-o", store + ".parquet"]) == 2
assert resplot_main([store]) == 2
print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in EXTRAS))
"""
)


def test_the_core_install_logs_lists_exports_and_names_the_missing_extras(tmp_path):
    store = tmp_path / "runs" / "reslog.db"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(store)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "loaded: []" in proc.stdout
    assert "core" in proc.stdout  # reslog ls printed the run
    assert "Parquet export needs pyarrow" in proc.stderr
    assert "the viewer needs the gui extra: pip install 'reslog[gui]'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "| lr" not in (tmp_path / "runs" / "reslog.db.md").read_text()  # one run: no diff
    assert not (tmp_path / "runs" / "reslog.db.parquet").exists()
