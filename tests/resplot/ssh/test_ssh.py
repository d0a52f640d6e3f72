"""SSH transport: ssh config resolution, known_hosts checking, and connections to a real sshd.

Config precedence tests are named as sentences (fabric's style). Connection tests run against
real OpenSSH servers on 127.0.0.1 (tests/fixtures/sshd.py); only the ssh config and known_hosts
are per test.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import time
from pathlib import Path

import paramiko
import pytest

from resplot.ssh.config import Hop, SSHConfigError, parse_hop, resolve_chain, resolve_host
from resplot.ssh.connection import (
    AuthFailed,
    ConnectFailed,
    HostKeyChanged,
    HostKeyRejected,
    HostKeyUnknown,
    SSHConnection,
)
from resplot.ssh.hostkeys import KnownHosts
from resplot.ssh.options import SSHOptions, Timeouts
from resplot.ssh.prompts import Answer, Prompt, Secrets
from tests.fixtures import sshd as sshd_fixtures
from tests.fixtures.sshd import SSHEnv, generate_key
from tests.fixtures.tcpproxy import TCPProxy

sshd_env = sshd_fixtures.sshd_env
ssh_config = sshd_fixtures.ssh_config

# -- ssh config precedence --------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_alias_gets_hostname_port_and_user_from_its_stanza(tmp_path):
    cfg = write(tmp_path / "c", "Host gpu\n  HostName 10.0.0.7\n  Port 2222\n  User alice\n")
    h = resolve_host("gpu", config_path=cfg)
    assert (h.alias, h.hostname, h.port, h.user) == ("gpu", "10.0.0.7", 2222, "alice")


def test_first_obtained_value_wins_so_specific_stanzas_go_first(tmp_path):
    cfg = write(
        tmp_path / "c",
        "Host gpu*\n  User first\n  Port 2200\nHost gpu1\n  User second\n  HostName h1\n"
        "Host *\n  User fallback\n  Port 22\n",
    )
    h = resolve_host("gpu1", config_path=cfg)
    assert (h.user, h.port, h.hostname) == ("first", 2200, "h1")
    assert resolve_host("other", config_path=cfg).user == "fallback"


def test_user_and_port_in_the_spec_beat_the_config_file(tmp_path):
    cfg = write(tmp_path / "c", "Host gpu\n  User alice\n  Port 2222\n  IdentityFile ~/k_%r\n")
    h = resolve_host("gpu", user="bob", port=2022, config_path=cfg)
    assert (h.user, h.port) == ("bob", 2022)
    assert h.identity_files == (str(Path("~/k_bob").expanduser()),)  # %r is the real user


def test_identity_files_accumulate_across_stanzas_in_order_with_tokens_expanded(tmp_path):
    cfg = write(
        tmp_path / "c",
        "Host gpu\n  HostName gpu.example\n  User alice\n  IdentityFile ~/.ssh/%h_%r\n"
        "Host *\n  IdentityFile /keys/%u_default\n",
    )
    h = resolve_host("gpu", config_path=cfg)
    import getpass

    assert h.identity_files == (
        str(Path("~/.ssh/gpu.example_alice").expanduser()),
        f"/keys/{getpass.getuser()}_default",
    )


def test_without_identity_file_the_default_keys_are_tried(tmp_path):
    h = resolve_host("gpu", config_path=write(tmp_path / "c", ""))
    assert [p.name for p in h.key_file_candidates()] == [  # OpenSSH's order (ssh -G prints it)
        "id_rsa",
        "id_ecdsa",
        "id_ecdsa_sk",
        "id_ed25519",
        "id_ed25519_sk",
        "id_xmss",
        "id_dsa",
    ]


def test_negated_patterns_exclude_a_host_from_a_wildcard_stanza(tmp_path):
    cfg = write(tmp_path / "c", "Host *.lab !bastion.lab\n  ProxyJump bastion.lab\n")
    assert resolve_host("gpu.lab", config_path=cfg).jumps == (Hop("bastion.lab"),)
    assert resolve_host("bastion.lab", config_path=cfg).jumps == ()


def test_a_missing_config_file_means_plain_defaults(tmp_path):
    h = resolve_host("somehost", config_path=tmp_path / "absent")
    assert (h.hostname, h.port, h.jumps, h.identities_only) == ("somehost", 22, (), False)


def test_known_hosts_file_identities_only_and_host_key_alias_are_read(tmp_path):
    cfg = write(
        tmp_path / "c",
        "Host gpu\n  UserKnownHostsFile ~/kh1 /etc/kh2\n  IdentitiesOnly yes\n"
        "  HostKeyAlias gpu-key\n  HashKnownHosts yes\n",
    )
    h = resolve_host("gpu", config_path=cfg)
    assert h.known_hosts_files == (str(Path("~/kh1").expanduser()), "/etc/kh2")
    assert (h.identities_only, h.host_key_alias, h.hash_known_hosts) == (True, "gpu-key", True)


def test_server_alive_and_connect_timeout_options_set_the_connection_timeouts(tmp_path):
    cfg = write(
        tmp_path / "c",
        "Host gpu\n  ServerAliveInterval 7\n  ServerAliveCountMax 2\n  ConnectTimeout 4\n",
    )
    t = SSHConnection("gpu", SSHOptions(ssh_config=cfg)).timeouts
    assert (t.keepalive_interval, t.keepalive_max, t.connect) == (7.0, 2, 4.0)


def test_include_pulls_in_stanzas_from_other_files(tmp_path):
    write(tmp_path / "inc.conf", "Host gpu\n  HostName included.example\n")
    cfg = write(tmp_path / "c", f"Include {tmp_path}/*.conf\nHost *\n  User u\n")
    h = resolve_host("gpu", config_path=cfg)
    assert (h.hostname, h.user) == ("included.example", "u")


def test_proxyjump_hops_are_parsed_with_user_and_port():
    assert parse_hop("alice@bastion:2222") == Hop("bastion", "alice", 2222)
    assert parse_hop("ssh://bob@[::1]:22") == Hop("::1", "bob", 22)
    with pytest.raises(SSHConfigError, match="bad port"):
        parse_hop("host:notaport")


def test_proxyjump_chain_resolves_each_hop_through_the_config_first_hop_first(tmp_path):
    cfg = write(
        tmp_path / "c",
        "Host gpu\n  HostName 10.1.1.1\n  ProxyJump alice@outer:2200,inner\n"
        "Host inner\n  HostName 10.0.0.2\n  User carol\n  ProxyJump ignored-when-listed\n"
        "Host outer\n  HostName outer.example\n  User nobody\n",
    )
    chain = resolve_chain(resolve_host("gpu", config_path=cfg))
    assert [(h.hostname, h.user, h.port) for h in chain] == [
        ("outer.example", "alice", 2200),  # user@host:port in ProxyJump beats the stanza
        ("10.0.0.2", "carol", 22),
        ("10.1.1.1", chain[-1].user, 22),
    ]


def test_a_jump_host_with_its_own_proxyjump_is_reached_through_it(tmp_path):
    cfg = write(
        tmp_path / "c", "Host gpu\n  ProxyJump mid\nHost mid\n  ProxyJump edge\nHost edge\n"
    )
    assert [h.alias for h in resolve_chain(resolve_host("gpu", config_path=cfg))] == [
        "edge",
        "mid",
        "gpu",
    ]


def test_proxyjump_none_turns_off_a_jump_set_by_a_later_wildcard(tmp_path):
    cfg = write(tmp_path / "c", "Host bastion\n  ProxyJump none\nHost *\n  ProxyJump bastion\n")
    assert resolve_host("bastion", config_path=cfg).jumps == ()
    assert resolve_host("gpu", config_path=cfg).jumps == (Hop("bastion"),)


def test_a_looping_proxyjump_chain_is_reported_not_followed_forever(tmp_path):
    cfg = write(tmp_path / "c", "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n")
    with pytest.raises(SSHConfigError, match="too long or looping"):
        resolve_chain(resolve_host("a", config_path=cfg))


# -- known_hosts (no server needed) -----------------------------------------------------------


def make_key(tmp_path: Path, name: str) -> paramiko.PKey:
    generate_key(tmp_path / name)
    return paramiko.PKey.from_path(tmp_path / name)


def known_for(tmp_path: Path, text: str, port: int = 22, **extra) -> KnownHosts:
    kh = write(tmp_path / "known_hosts", text)
    cfg = f"Host h\n  HostName h.example\n  Port {port}\n  UserKnownHostsFile {kh}\n"
    cfg += "".join(f"  {k} {v}\n" for k, v in extra.items())
    return KnownHosts(resolve_host("h", config_path=write(tmp_path / "c", cfg)))


def test_a_hashed_known_hosts_entry_matches_the_host(tmp_path):
    key = make_key(tmp_path, "k")
    salt = b"0123456789abcdefghij"
    import hmac

    digest = hmac.new(salt, b"[h.example]:2222", hashlib.sha1).digest()
    field = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    known = known_for(tmp_path, f"{field} {key.get_name()} {key.get_base64()}\n", port=2222)
    known.verify(key, ask=None)  # known: no question, no exception


def test_a_pinned_key_is_hashed_when_hash_known_hosts_is_set(tmp_path):
    key = make_key(tmp_path, "k")
    known = known_for(tmp_path, "", port=2222, HashKnownHosts="yes")
    known.verify(key, ask=lambda *a: True)
    line = (tmp_path / "known_hosts").read_text()
    assert line.startswith("|1|") and "h.example" not in line
    known.verify(key, ask=None)  # found again through the hash


def test_a_revoked_key_is_refused_even_when_also_listed_as_known(tmp_path):
    key = make_key(tmp_path, "k")
    entry = f"{key.get_name()} {key.get_base64()}"
    known = known_for(tmp_path, f"@revoked * {entry}\nh.example {entry}\n")
    with pytest.raises(HostKeyRejected, match="revoked"):
        known.verify(key, ask=lambda *a: True)


def test_strict_host_key_checking_yes_never_asks(tmp_path):
    key = make_key(tmp_path, "k")
    known = known_for(tmp_path, "", StrictHostKeyChecking="yes")
    with pytest.raises(HostKeyUnknown):
        known.verify(key, ask=lambda *a: pytest.fail("must not ask"))


# -- a real sshd ------------------------------------------------------------------------------


def sha256_of_pub(pub_path: Path) -> str:
    """The fingerprint computed straight from the .pub file (not through paramiko)."""
    blob = base64.b64decode(pub_path.read_text().split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def test_exec_runs_a_command_over_a_socket_with_tcp_nodelay(ssh_config):
    with SSHConnection("target", SSHOptions(ssh_config=ssh_config)) as conn:
        status, out, _ = conn.exec("echo hello; exit 3")
        assert (status, out) == (3, b"hello\n")
        assert conn.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_sftp_put_writes_the_file_on_the_host(ssh_config, tmp_path):
    local = write(tmp_path / "payload.txt", "agent bytes\n")
    remote = tmp_path / "remote" / "copy.txt"
    remote.parent.mkdir()
    with SSHConnection("target", SSHOptions(ssh_config=ssh_config)) as conn:
        sftp = conn.sftp()
        sftp.put(str(local), str(remote))
        sftp.close()
        assert conn.exec(f"cat {remote}")[1] == b"agent bytes\n"


def test_close_is_idempotent_and_open_reconnects(ssh_config):
    conn = SSHConnection("target", SSHOptions(ssh_config=ssh_config))
    assert not conn.is_open  # lazy
    assert conn.exec("echo 1")[1] == b"1\n"
    conn.close()
    conn.close()
    assert not conn.is_open
    assert conn.exec("echo 2")[1] == b"2\n"
    conn.close()


def test_unknown_host_key_asks_with_its_sha256_fingerprint_and_accepting_pins_it(
    sshd_env: SSHEnv, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = sshd_env.make_ssh_config(tmp_path, known=False)
    asked = []

    def ask(host, key_type, fp):
        asked.append((host, key_type, fp))
        return True

    with SSHConnection("target", SSHOptions(ssh_config=cfg, ask_host_key=ask)) as conn:
        assert conn.exec("echo ok")[1] == b"ok\n"
    expected = sha256_of_pub(Path(str(sshd_env.target.host_key) + ".pub"))
    assert len(asked) == 1
    assert asked[0][1:] == ("ssh-ed25519", expected)
    assert "target" in asked[0][0]
    pinned = (tmp_path / "known_hosts").read_text()
    assert pinned == sshd_env.target.known_hosts_line()  # `[127.0.0.1]:port type key`
    # Pinned: the next connection does not ask again.
    with SSHConnection(
        "target", SSHOptions(ssh_config=cfg, ask_host_key=lambda *a: pytest.fail("asked"))
    ):
        pass


def test_refusing_an_unknown_host_key_raises_and_pins_nothing(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = sshd_env.make_ssh_config(tmp_path, known=False)
    with pytest.raises(HostKeyRejected, match="refused the host key"):
        SSHConnection("target", SSHOptions(ssh_config=cfg, ask_host_key=lambda *a: False)).open()
    assert (tmp_path / "known_hosts").read_text() == ""


def test_without_a_prompt_an_unknown_host_key_is_rejected(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = sshd_env.make_ssh_config(tmp_path, known=False)
    with pytest.raises(HostKeyUnknown, match="not known"):
        SSHConnection("target", SSHOptions(ssh_config=cfg)).open()


def test_a_changed_host_key_is_refused_naming_the_file_and_line(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = sshd_env.make_ssh_config(tmp_path, known=False)
    other = make_key(tmp_path, "impostor")
    kh = tmp_path / "known_hosts"
    kh.write_text(
        f"# comment\nexample.org {other.get_name()} {other.get_base64()}\n"
        f"[127.0.0.1]:{sshd_env.target.port} {other.get_name()} {other.get_base64()}\n"
    )
    with pytest.raises(HostKeyChanged) as info:
        SSHConnection("target", SSHOptions(ssh_config=cfg, ask_host_key=lambda *a: True)).open()
    assert f"{kh} line 3" in str(info.value)
    assert "ssh-keygen -R" in str(info.value)
    assert "[127.0.0.1]" in kh.read_text()  # nothing was overwritten
    assert sshd_env.target.host_key_line.split()[1] not in kh.read_text()


def test_a_key_the_server_does_not_know_fails_with_auth_failed(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    stranger = tmp_path / "stranger_key"
    generate_key(stranger)
    cfg = sshd_env.make_ssh_config(tmp_path, identity=stranger)
    with pytest.raises(AuthFailed, match="refused every key") as info:
        SSHConnection("target", SSHOptions(ssh_config=cfg)).open()
    assert str(stranger) in str(info.value)


def test_an_encrypted_key_is_unlocked_through_the_passphrase_callback(
    sshd_env, tmp_path, monkeypatch
):
    from cryptography.hazmat.primitives import serialization

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    plain = serialization.load_ssh_private_key(sshd_env.client_key.read_bytes(), None)
    locked = tmp_path / "locked_key"
    locked.write_bytes(
        plain.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
    )
    cfg = sshd_env.make_ssh_config(tmp_path, identity=locked)
    with pytest.raises(AuthFailed, match="no SSH key"):  # no callback: the key is skipped
        SSHConnection("target", SSHOptions(ssh_config=cfg)).open()
    asked = []

    def passphrase(prompt: Prompt) -> Answer | None:
        if prompt.kind != "passphrase":
            return None
        asked.append(prompt.key_path)
        return Answer(["s3cret"])

    conn = SSHConnection("target", SSHOptions(ssh_config=cfg, secrets=Secrets(passphrase)))
    with conn:
        assert conn.exec("echo in")[1] == b"in\n"
    assert asked == [str(locked)]


def test_a_closed_port_raises_connect_failed(tmp_path):
    from tests.fixtures.postgres import free_port

    cfg = write(tmp_path / "c", f"Host dead\n  HostName 127.0.0.1\n  Port {free_port()}\n")
    with pytest.raises(ConnectFailed, match="cannot connect to"):
        SSHConnection("dead", SSHOptions(ssh_config=cfg)).open()


def test_proxyjump_reaches_the_target_through_the_second_sshd(ssh_config, sshd_env):
    with SSHConnection("behind", SSHOptions(ssh_config=ssh_config)) as conn:
        assert conn.hops == 2
        assert conn.exec("echo behind")[1] == b"behind\n"
        assert conn.socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        assert conn.socket.getpeername()[1] == sshd_env.jump.port
    # The jump sshd's own log shows it opened the forward to the target.
    assert f"connected to 127.0.0.1 port {sshd_env.target.port}" in sshd_env.jump.log_text()


def test_a_proxyjump_comma_list_chains_every_hop(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    jump_spec = f"{sshd_env.user}@127.0.0.1:{sshd_env.jump.port}"
    extra = f"Host twice\n  HostName 127.0.0.1\n  Port {sshd_env.target.port}\n"
    extra += f"  ProxyJump {jump_spec},jump\n"
    cfg = sshd_env.make_ssh_config(tmp_path, extra=extra)
    with SSHConnection("twice", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.hops == 3
        assert conn.exec("echo deep")[1] == b"deep\n"


def test_unanswered_keepalives_mark_the_connection_lost(ssh_config, sshd_env, tmp_path):
    proxy = TCPProxy(sshd_env.target.port)
    try:
        cfg = sshd_env.make_ssh_config(tmp_path / "viaproxy", target_port=proxy.port)
        fast = Timeouts(keepalive_interval=0.2, keepalive_max=2)
        conn = SSHConnection("target", SSHOptions(ssh_config=cfg, timeouts=fast)).open()
        assert conn.exec("echo up")[1] == b"up\n"
        proxy.pause()  # a black hole: nothing is closed, nothing answers
        deadline = time.monotonic() + 30
        while conn.is_open and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not conn.is_open
        assert "keepalives unanswered" in (conn.lost_reason or "")
        proxy.resume()
        assert conn.exec("echo again")[1] == b"again\n"  # open() reconnects
        conn.close()
    finally:
        proxy.close()


def test_too_many_refused_keys_explain_max_auth_tries(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    keys = []
    for i in range(8):
        generate_key(tmp_path / f"k{i}")
        keys.append(f"  IdentityFile {tmp_path / f'k{i}'}\n")
    extra = f"Host target\n{''.join(keys)}"  # first: these come before the fixture's key
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", identity=tmp_path / "k0", extra=extra)
    with pytest.raises(AuthFailed, match="closed the connection after 7 refused keys"):
        SSHConnection("target", SSHOptions(ssh_config=cfg)).open()
