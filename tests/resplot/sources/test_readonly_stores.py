"""A store in a folder its reader cannot write (an archive, a read-only mount, another user's
runs): read through `reslog ls`, `reslog.open` and the agent (resplot), immutable when no writer
is live there, and a message saying what is wrong when a write-ahead log holds data that cannot
be read without a -shm file. The readers are real processes that cannot override file modes
(root's CAP_DAC_OVERRIDE dropped with setpriv, as tests/fixtures/logging_child.py does)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import reslog
from resplot.data.cache import SeriesCache
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from tests.fixtures.logging_child import ROOT
from tests.fixtures.postgres import missing_system_dependency

pytestmark = pytest.mark.integration

CAPS = "-dac_override,-dac_read_search"


def obeying_modes() -> list[str]:
    """A command prefix under which this process's files modes hold, root or not."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        missing_system_dependency("setpriv (util-linux) to drop root's file override")
    return ["setpriv", f"--inh-caps={CAPS}", f"--bounding-set={CAPS}", "--"]


def reslog_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*obeying_modes(), sys.executable, "-m", "reslog.tools.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def freeze(folder: Path) -> None:
    for f in folder.iterdir():
        f.chmod(0o444)
    folder.chmod(0o555)


@pytest.fixture
def archived(tmp_path):
    """A finished store whose folder and files were then made read-only."""
    folder = tmp_path / "archive"
    run = reslog.init(store=folder / "reslog.db", name="done", system=False)
    for i in range(50):
        run.log({"loss": 1.0 / (i + 1)})
    run.finish()
    freeze(folder)
    try:
        yield folder / "reslog.db"
    finally:
        folder.chmod(0o755)


def test_reslog_ls_and_open_read_a_store_in_a_read_only_folder(archived):
    done = reslog_cli("ls", str(archived))
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout and "finished" in done.stdout
    code = (
        f"import reslog; s = reslog.open({str(archived)!r}); print(len(s.history('done', 'loss')))"
    )
    read = subprocess.run(
        [*obeying_modes(), sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert read.returncode == 0 and read.stdout.strip() == "50", read.stderr
    assert sorted(p.name for p in archived.parent.iterdir()) == ["reslog.db"]  # nothing made


def test_resplot_reads_a_store_in_a_read_only_folder(archived, tmp_path):
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec {" ".join(obeying_modes())} {sys.executable} "$@"\n')
    python.chmod(0o755)
    src = LocalSource(parse_spec(str(archived)), python=str(python))
    try:
        cache = SeriesCache()
        src.poll(cache)
        [run] = cache.runs()
        assert run.name == "done" and run.status == "finished"
    finally:
        src.close()


WRITER = textwrap.dedent(
    """
    import sys, time, reslog
    run = reslog.init(store=sys.argv[1], name="killed", system=False, flush_interval=0.05)
    for i in range(100):
        run.log({"loss": 1.0})
    while run._writer.committed < 100:
        time.sleep(0.01)
    print("ok", flush=True)
    time.sleep(60)
    """
)


def test_a_write_ahead_log_that_cannot_be_read_there_is_said_so(tmp_path):
    folder = tmp_path / "crashed"
    store = folder / "reslog.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert proc.stdout.readline().strip() == "ok"
    proc.send_signal(signal.SIGKILL)  # its -wal keeps the committed rows, not yet checkpointed
    proc.wait(timeout=30)
    assert (folder / "reslog.db-wal").stat().st_size > 0
    (folder / "reslog.db-shm").unlink()
    freeze(folder)
    try:
        done = reslog_cli("ls", str(store))
    finally:
        folder.chmod(0o755)
    assert done.returncode == 2
    assert "write-ahead log" in done.stderr and "make the folder writable" in done.stderr
    assert "attempt to write a readonly database" not in done.stderr
