"""ProxyCommand against the real sshd fixture: a relay command (like `nc %h %p`), the real
`ssh -W` through the jump sshd, OpenSSH's first-obtained-wins between ProxyCommand and
ProxyJump, and a proxy that fails saying why."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from resplot.ssh.config import resolve_chain, resolve_host
from resplot.ssh.connection import ConnectFailed, SSHConnection
from resplot.ssh.options import SSHOptions
from tests.fixtures import sshd as sshd_fixtures
from tests.fixtures.postgres import missing_system_dependency

sshd_env = sshd_fixtures.sshd_env
ssh_config = sshd_fixtures.ssh_config
RELAY = Path(__file__).resolve().parents[2] / "fixtures" / "relay.py"


def relay_command() -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(RELAY))} %h %p"


def test_a_proxycommand_carries_the_session_with_hostname_and_port_expanded(
    sshd_env, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    log = tmp_path / "relay.log"
    # Through the shell, as ssh runs it: the redirection and the trailing comment are the
    # shell's; %h and %p become the target's HostName and Port.
    extra = (
        f"Host viacmd\n  HostName 127.0.0.1\n  Port {sshd_env.target.port}\n"
        f"  ProxyCommand {relay_command()} 2>{log} # via the relay\n"
    )
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    with SSHConnection("viacmd", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.socket is not None and not hasattr(conn.socket, "getpeername")
        assert conn.exec("echo relayed")[1] == b"relayed\n"
    assert log.read_text() == f"relay: connected to 127.0.0.1:{sshd_env.target.port}\n"


def test_ssh_dash_w_through_the_jump_sshd_works_as_a_proxycommand(sshd_env, tmp_path, monkeypatch):
    ssh = shutil.which("ssh")
    if ssh is None:
        missing_system_dependency("OpenSSH client (ssh)")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    base = sshd_env.make_ssh_config(tmp_path / "base")
    extra = (
        f"Host bastioned\n  HostName 127.0.0.1\n  Port {sshd_env.target.port}\n"
        f"  ProxyCommand {ssh} -F {base} -o BatchMode=yes -W %h:%p jump\n"
    )
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    with SSHConnection("bastioned", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.hops == 1  # one SSH session of ours; the jump is the proxy's
        assert conn.exec("echo via-w")[1] == b"via-w\n"
    assert f"connected to 127.0.0.1 port {sshd_env.target.port}" in sshd_env.jump.log_text()


def test_a_proxycommand_in_a_specific_stanza_beats_a_later_wildcard_proxyjump(
    sshd_env, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    extra = (
        f"Host viacmd\n  HostName 127.0.0.1\n  Port {sshd_env.target.port}\n"
        f"  ProxyCommand {relay_command()}\n"
        "Host *\n  ProxyJump nowhere.invalid\n"  # what ssh never uses for viacmd
    )
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    host = resolve_host("viacmd", config_path=cfg)
    assert host.jumps == () and host.proxy_command is not None
    assert host.proxy_command.endswith(f"127.0.0.1 {sshd_env.target.port}")
    with SSHConnection(host) as conn:
        assert conn.exec("echo first-wins")[1] == b"first-wins\n"


def test_a_proxyjump_first_turns_off_a_later_proxycommand_and_none_turns_off_both(tmp_path):
    cfg = tmp_path / "c"
    cfg.write_text(
        "Host a\n  ProxyJump j1\nHost b\n  ProxyCommand none\n"
        "Host *\n  ProxyCommand nc %h %p\n  ProxyJump j2\n"
    )
    a = resolve_host("a", config_path=cfg)
    assert a.proxy_command is None and [h.host for h in a.jumps] == ["j1"]
    b = resolve_host("b", config_path=cfg)
    assert b.proxy_command is None and b.jumps == ()
    c = resolve_host("c", config_path=cfg)
    assert c.proxy_command == "nc c 22" and c.jumps == ()


def test_a_jump_host_reached_by_its_own_proxycommand_starts_the_chain(
    sshd_env, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    extra = (
        f"Host jump\n  ProxyCommand {relay_command()}\n"
        f"Host deep\n  HostName 127.0.0.1\n  Port {sshd_env.target.port}\n  ProxyJump jump\n"
    )
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    chain = resolve_chain(resolve_host("deep", config_path=cfg))
    assert [h.alias for h in chain] == ["jump", "deep"] and chain[0].proxy_command
    with SSHConnection("deep", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.hops == 2 and conn.exec("echo deep")[1] == b"deep\n"


def test_a_failing_proxycommand_is_reported_with_its_exit_status_and_stderr(
    sshd_env, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    # ssh runs `exec COMMAND`, so the status is the command's own: here a shell's.
    says = "echo 'session manager plugin not found' >&2; exit 3"
    extra = f'Host broken\n  ProxyCommand sh -c "{says}"\n'
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    with pytest.raises(ConnectFailed) as info:
        SSHConnection("broken", SSHOptions(ssh_config=cfg)).open()
    text = str(info.value)
    assert "exited with 3" in text and "session manager plugin not found" in text


def test_the_connection_notices_when_the_proxycommand_dies(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    extra = (
        f"Host viacmd\n  HostName 127.0.0.1\n  Port {sshd_env.target.port}\n"
        f"  ProxyCommand {relay_command()}\n"
    )
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", extra=extra)
    conn = SSHConnection("viacmd", SSHOptions(ssh_config=cfg)).open()
    try:
        conn.socket.process.kill()  # the SSM session ended, the laptop slept, ...
        conn.transport.join(timeout=30)  # paramiko's reader thread sees EOF and stops
        assert not conn.is_open
        assert conn.exec("echo back")[1] == b"back\n"  # open() starts a new proxy
    finally:
        conn.close()
