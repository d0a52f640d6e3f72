"""The GUI soak: a minute of clicking, hovering, zooming, paging and resizing the real window
while a real process logs runs into its store (tests/soak_window.py), in a child pytest process,
so that a crash of the window (SIGSEGV: issue 21's run table told Qt that rows moved without
warning it first) fails here with the child's output instead of killing the test runner.

Once under offscreen Qt, once in a real X window (Xvfb, the xcb platform: real window-system
events, expose and resize). Both run in CI (.ci/run installs xvfb and the xcb libraries).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.postgres import missing_system_dependency

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
SOAK = "tests/soak_window.py"


def _run_soak(prefix: list[str], platform: str, seconds: float, tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": platform, "RESPLOT_SOAK_S": str(seconds)}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [
        *prefix,
        sys.executable,
        "-X",
        "faulthandler",
        "-m",
        "pytest",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        f"--basetemp={tmp_path / 'soak'}",
        SOAK,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = (proc.stdout + proc.stderr)[-6000:]
    # A crash is a negative code (killed by a signal) or 128+signal through a shell.
    assert proc.returncode == 0, f"the window's soak ended with rc {proc.returncode}:\n{out}"
    assert "1 passed" in proc.stdout, out
    # matplotlib's callbacks and Qt's event handlers print an exception and go on: the window
    # stays up, but what the person did was lost.
    both = proc.stdout + proc.stderr
    at = both.find("Traceback")
    assert at < 0, f"the window's soak printed an exception:\n{both[at : at + 3000]}"
    print(next((ln for ln in proc.stdout.splitlines() if ln.startswith("soak:")), ""))


@pytest.mark.slow
def test_a_minute_of_clicks_while_runs_log_does_not_crash_the_window(tmp_path):
    _run_soak([], "offscreen", 60, tmp_path)


@pytest.mark.slow
def test_clicks_in_a_real_x_window_while_runs_log_do_not_crash_it(tmp_path):
    if shutil.which("xvfb-run") is None or shutil.which("Xvfb") is None:
        missing_system_dependency("Xvfb (apt-get install xvfb xauth)")
    xvfb = ["xvfb-run", "-a", "-s", "-screen 0 1920x1080x24"]
    _run_soak(xvfb, "xcb", 10, tmp_path)  # two turns of every page and row in a real window
