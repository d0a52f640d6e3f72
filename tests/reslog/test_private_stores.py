"""No secret lands in a readable file: credentials are redacted wherever text is stored, stores
and the folders reslog creates for them are private, and `reslog upgrade`'s backup is whole or
absent. Real processes, a real second user (useradd) trying to read, a real full tmpfs."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import reslog
from reslog.tools.maintenance import backup_sqlite
from schema import HEAD_REVISION
from tests.fixtures.disks import small_disk  # noqa: F401 - a fixture
from tests.fixtures.logging_child import ROOT
from tests.fixtures.sshd import bulk_store
from tests.fixtures.users import other_user  # noqa: F401 - a fixture

SECRETS = {
    "url password": "hunter2pw",
    "bearer": "eyJhbGciOiJIUzI1NiJ9abc",
    "query token": "tok9f8e7d6c",
    "github pat": "ghp_" + "Z" * 36,
    "-p flag": "pflagsecret",
    "--key flag": "keyflagsecret",
    "--github_pat flag": "patflagsecret",
    "config bearer": "cfgbearer123456",
    "alert key": "alertkey77777",
}

CHILD = f"""
import sys, reslog
sys.argv = ["train.py", "-p", "pflagsecret", "--key", "keyflagsecret",
            "--github_pat", "patflagsecret", "--lr", "3e-4"]
run = reslog.init(store=STORE_PATH, name="leaky", system=False,
                  config={{"endpoint": "https://hub/api?token=tok9f8e7d6c&page=1",
                          "headers": "Authorization: Bearer cfgbearer123456", "lr": 3e-4}})
run.log({{"loss": 1.0, "note": "curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abc' x"}})
run.alert("upload failed: https://s3/bucket?X-Amz-Signature=sig1&api_key=alertkey77777")
raise RuntimeError("cannot reach postgresql://me:hunter2pw@db/runs with "
                   "{SECRETS["github pat"]}")
"""


def raw_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())


@pytest.mark.integration
def test_secrets_never_reach_the_store_file(tmp_path):
    store = tmp_path / "runs" / "reslog.db"
    code = CHILD.replace("STORE_PATH", repr(str(store)))
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 1 and "RuntimeError" in done.stderr
    data = raw_bytes(store.parent)
    assert b"leaky" in data and b"<redacted>" in data
    leaked = [what for what, secret in SECRETS.items() if secret.encode() in data]
    assert leaked == []
    from tests.reslog.test_reslog_api import read_run

    meta, _series, events = read_run(store)
    assert meta.status == "failed"
    assert "--lr 3e-4" in meta.command and "-p '<redacted>'" in meta.command
    titles = " ".join(e.title + e.body for e in events)
    assert "postgresql://me:<redacted>@db/runs" in titles and "Bearer <redacted>" in titles


def test_a_new_store_and_its_folders_are_private_to_their_owner(tmp_path, other_user):  # noqa: F811
    tmp_path.chmod(0o755)
    store = tmp_path / "a" / "b" / "reslog.db"
    run = reslog.init(store=store, system=False, config={"lr": 1.0})
    run.log({"x": 1.0})
    run._writer.wake.set()
    try:
        files = sorted(store.parent.glob("reslog.db*"))
        assert {f.name for f in files} >= {"reslog.db", "reslog.db-wal", "reslog.db-shm"}
        for f in files:
            assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        for folder in (tmp_path / "a", tmp_path / "a" / "b"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        peek = other_user.run(["cat", str(store)], check=False)
        assert peek.returncode != 0 and b"Permission denied" in peek.stderr
    finally:
        run.finish()


def test_store_mode_can_share_a_store_with_a_group(tmp_path, monkeypatch):
    monkeypatch.setenv("RESLOG_STORE_MODE", "0640")
    store = tmp_path / "shared" / "reslog.db"
    reslog.init(store=store, system=False).finish()
    assert stat.S_IMODE(store.stat().st_mode) == 0o640
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o750
    monkeypatch.setenv("RESLOG_STORE_MODE", "0044")
    with pytest.raises(ValueError, match="owner must keep read and write"):
        reslog.init(store=tmp_path / "other" / "reslog.db", system=False)


def test_an_existing_folder_keeps_its_mode(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    reslog.init(store=folder / "reslog.db", system=False).finish()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "reslog.db").stat().st_mode) == 0o600


def test_a_backup_cut_short_leaves_no_backup_that_would_restore_an_empty_store(small_disk):  # noqa: F811
    """`reslog upgrade`'s backup on a disk that fills up halfway (as an upgrade killed during
    its backup): no `.bak-NNNN` is left, where one holding a fraction of the store was."""
    store = small_disk.root / "reslog.db"
    bulk_store(store, runs=1, keys=2, points=100_000)
    small_disk.fill()
    small_disk.release(2)  # room for part of the copy only
    with pytest.raises(Exception, match="full"):
        backup_sqlite(store, HEAD_REVISION)
    assert [p.name for p in small_disk.root.iterdir() if ".bak" in p.name] == []
    small_disk.release(len(small_disk.fillers))
    backup = backup_sqlite(store, HEAD_REVISION)
    assert backup.name == f"reslog.db.bak-{HEAD_REVISION}"
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
