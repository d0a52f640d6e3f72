"""Which ssh config files are read, and in which order: ~/.ssh/config, then the system-wide
file (/etc/ssh/ssh_config, here a temp stand-in passed as `system_config`), `--ssh-config`
like `ssh -F`, relative Includes, and the system-wide known_hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from resplot.ssh.config import SSHConfigError, resolve_host
from resplot.ssh.hostkeys import KnownHosts


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))  # ~ is this folder for the resolver
    return home


def test_the_user_file_comes_before_the_system_wide_one(home, tmp_path):
    (home / ".ssh" / "config").write_text("Host gpu\n  User mine\n")
    system = tmp_path / "ssh_config"
    system.write_text("Host *\n  User theirs\n  Port 2222\n  HashKnownHosts yes\n")
    h = resolve_host("gpu", system_config=system)
    assert (h.user, h.port, h.hash_known_hosts) == ("mine", 2222, True)


def test_a_named_config_file_replaces_both_like_ssh_dash_f(home, tmp_path):
    (home / ".ssh" / "config").write_text("Host gpu\n  User mine\n")
    system = tmp_path / "ssh_config"
    system.write_text("Host *\n  Port 2222\n")
    named = tmp_path / "named"
    named.write_text("Host gpu\n  HostName 10.0.0.9\n")
    h = resolve_host("gpu", config_path=named, system_config=system)
    assert (h.hostname, h.port) == ("10.0.0.9", 22) and h.user != "mine"


def test_relative_includes_are_relative_to_dot_ssh_or_etc_ssh(home, tmp_path):
    (home / ".ssh" / "conf.d").mkdir()
    (home / ".ssh" / "conf.d" / "lab.conf").write_text("Host gpu\n  Port 2201\n")
    (home / ".ssh" / "config").write_text("Include conf.d/*.conf\n")
    assert resolve_host("gpu", system_config=None).port == 2201


def test_a_config_error_names_the_file_and_line(tmp_path):
    cfg = tmp_path / "c"
    cfg.write_text("Host a\n  Port 22 33\n")
    with pytest.raises(SSHConfigError, match=r"c line 2: keyword port extra arguments"):
        resolve_host("a", config_path=cfg)


def test_hostname_refuses_tokens_that_ssh_refuses(tmp_path):
    cfg = tmp_path / "c"
    cfg.write_text("Host a\n  HostName %r.example\n")
    with pytest.raises(SSHConfigError, match="unknown token %r"):
        resolve_host("a", config_path=cfg)


def test_the_system_wide_known_hosts_is_read_but_never_written(tmp_path):
    import paramiko

    key = paramiko.Ed25519Key.from_private_key_file(_key(tmp_path))
    global_file = tmp_path / "ssh_known_hosts"
    global_file.write_text(f"[gpu.example]:2222 {key.get_name()} {key.get_base64()}\n")
    cfg = tmp_path / "c"
    cfg.write_text(
        f"Host gpu\n  HostName gpu.example\n  Port 2222\n"
        f"  UserKnownHostsFile {tmp_path / 'mine'}\n  GlobalKnownHostsFile {global_file}\n"
    )
    known = KnownHosts(resolve_host("gpu", config_path=cfg))
    known.verify(key, ask=None)  # known from the global file: no question, nothing written
    assert not (tmp_path / "mine").exists()


def _key(tmp_path: Path) -> str:
    from tests.fixtures.sshd import generate_key

    path = tmp_path / "hostkey"
    generate_key(path)
    return str(path)


def test_cli_ssh_config_option_must_name_a_file(tmp_path, capsys):
    from resplot.cli import main

    argv = [
        "export",
        "gpu:runs.db",
        "--ssh-config",
        str(tmp_path / "nope"),
        "--format",
        "csv",
        "-o",
        "-",
    ]
    assert main(argv) == 1
    assert "--ssh-config" in capsys.readouterr().err
