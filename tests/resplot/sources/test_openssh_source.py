"""`host:path#via=openssh`: the agent over the system ssh binary, against the sshd fixture,
including a ControlMaster that later sources reuse without logging in again."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from resplot.data.cache import SeriesCache
from resplot.sources import open_source
from resplot.sources.base import AuthFailed
from resplot.sources.client import AgentConnectionError
from resplot.sources.openssh import OpenSSHSource
from resplot.sources.spec import parse_spec
from resplot.ssh.options import SSHOptions
from tests.fixtures import sshd as sshd_fixtures
from tests.fixtures.postgres import missing_system_dependency
from tests.fixtures.stores import make_run, new_store

sshd_env = sshd_fixtures.sshd_env
ssh_config = sshd_fixtures.ssh_config


@pytest.fixture(autouse=True)
def _ssh_client():
    if shutil.which("ssh") is None:
        missing_system_dependency("OpenSSH client (ssh)")


def store_at(path):
    engine = new_store(path)
    make_run(
        engine, name="via-openssh", points={"train/loss": [(s, 1.0 / (s + 1)) for s in range(200)]}
    )
    engine.dispose()
    return path


def test_spec_options_combine_and_a_hash_in_a_path_stays_in_the_path():
    s = parse_spec("gpu:runs/reslog.db#via=openssh&python=/opt/py/bin/python")
    assert (s.path, s.via, s.python) == ("runs/reslog.db", "openssh", "/opt/py/bin/python")
    assert parse_spec("gpu:runs/#3/reslog.db").path == "runs/#3/reslog.db"
    from resplot.sources import SpecError

    with pytest.raises(SpecError, match="via=telnet is not known"):
        parse_spec("gpu:x.db#via=telnet")


def test_a_store_is_read_through_the_ssh_binary(ssh_config, tmp_path):
    store = store_at(tmp_path / "reslog.db")
    ssh = SSHOptions(ssh_config=ssh_config)
    src = open_source(parse_spec(f"target:{store}#via=openssh&python={sys.executable}"), ssh)
    assert isinstance(src, OpenSSHSource)
    cache = SeriesCache()
    try:
        src.poll(cache)
        assert [r.name for r in cache.runs()] == ["via-openssh"]
        argv = Path(f"/proc/{src.client.info['pid']}/cmdline").read_bytes().split(b"\0")
        assert argv[:4] == [sys.executable.encode(), b"-I", b"-S", b"-c"]  # from memory, no file
    finally:
        src.close()


def test_a_python_too_old_for_the_agent_is_named_through_the_ssh_binary(ssh_config, tmp_path):
    from tests.reslog.agent.test_agent_launcher import old_python

    store = store_at(tmp_path / "reslog.db")
    src = OpenSSHSource(
        parse_spec(f"target:{store}#via=openssh"),
        SSHOptions(ssh_config=ssh_config),
        python=old_python("3.6"),
    )
    try:
        with pytest.raises(AgentConnectionError, match=r"needs Python >= 3\.8.*\(3\.6\."):
            src.poll(SeriesCache())
    finally:
        src.close()


def test_an_open_controlmaster_is_reused(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    import tempfile

    control = tempfile.mkdtemp(prefix="cm", dir="/tmp")  # a socket path must be short
    extra = f"Host target\n  ControlMaster auto\n  ControlPath {control}/%p\n  ControlPersist 60\n"
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    store = store_at(tmp_path / "reslog.db")
    before = sshd_env.target.log_text().count("Accepted publickey")
    for _ in range(2):
        src = OpenSSHSource(
            parse_spec(f"target:{store}#via=openssh"),
            SSHOptions(ssh_config=cfg),
            python=sys.executable,
        )
        try:
            src.poll(SeriesCache())
        finally:
            src.close()
    try:
        # One login for every ssh command since: they went through the master.
        assert sshd_env.target.log_text().count("Accepted publickey") == before + 1
    finally:
        subprocess.run(
            ["ssh", "-F", str(cfg), "-O", "exit", "target"],
            capture_output=True,
            check=False,
            timeout=30,
        )
        shutil.rmtree(control, ignore_errors=True)


def test_a_refused_login_reads_as_auth_failed(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    from tests.fixtures.sshd import generate_key

    generate_key(tmp_path / "stranger")
    cfg = sshd_env.make_ssh_config(
        tmp_path / "ssh", identity=tmp_path / "stranger", extra="Host *\n  BatchMode yes\n"
    )
    src = OpenSSHSource(parse_spec("target:/x.db#via=openssh"), SSHOptions(ssh_config=cfg))
    try:
        with pytest.raises(AuthFailed, match="Permission denied"):
            src.poll(SeriesCache())
    finally:
        src.close()
