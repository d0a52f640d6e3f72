"""SSH certificates against a real sshd that trusts a test CA (TrustedUserCAKeys) and has no
authorized_keys entry for the client: only a certificate signed by the CA (ssh-keygen -s) logs
in. Certificates come from CertificateFile, from `<key>-cert.pub` beside the key, or from a real
ssh-agent holding key and certificate."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from resplot.ssh.connection import AuthFailed, SSHConnection
from resplot.ssh.options import SSHOptions
from tests.fixtures.postgres import missing_system_dependency
from tests.fixtures.sshd import SSHServer, generate_key, sshd_available, start_sshd

pytestmark = pytest.mark.integration


@dataclass
class CertServer:
    server: SSHServer
    root: Path
    key: Path  # signed by the CA; not in any authorized_keys
    cert: Path  # key's certificate, kept apart from the key (not `<key>-cert.pub`)

    def config(self, directory: Path, body: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        known = directory / "known_hosts"
        known.write_text(self.server.known_hosts_line())
        import getpass

        path = directory / "ssh_config"
        path.write_text(
            f"Host ca\n  HostName 127.0.0.1\n  Port {self.server.port}\n"
            f"  User {getpass.getuser()}\n"
            f"  UserKnownHostsFile {known}\n{body}"
        )
        return path


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing_system_dependency(f"{name} (OpenSSH client tools)")
    return str(path)


@pytest.fixture(scope="module")
def cert_server(tmp_path_factory) -> Iterator[CertServer]:
    missing = sshd_available()
    if missing:
        missing_system_dependency(missing)
    keygen = _tool("ssh-keygen")
    root = tmp_path_factory.mktemp("certs")
    ca = root / "ca"
    subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(ca)], check=True)
    key = root / "signed" / "id_ed25519"
    key.parent.mkdir()
    generate_key(key)
    import getpass

    subprocess.run(
        [
            keygen,
            "-q",
            "-s",
            str(ca),
            "-I",
            "resplot-test",
            "-n",
            getpass.getuser(),
            "-V",
            "-5m:+1h",
            str(key) + ".pub",
        ],
        check=True,
    )
    cert = root / "issued-cert.pub"
    Path(f"{key}-cert.pub").rename(cert)
    empty = root / "authorized_keys"
    empty.write_text("")
    server = start_sshd(root / "sshd", empty, "certs", settings={"TrustedUserCAKeys": f"{ca}.pub"})
    try:
        yield CertServer(server, root, key, cert)
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def test_the_key_alone_is_refused_so_the_certificate_is_what_logs_in(cert_server, tmp_path):
    cfg = cert_server.config(tmp_path, f"  IdentityFile {cert_server.key}\n")
    with pytest.raises(AuthFailed, match="refused every key"):
        SSHConnection("ca", SSHOptions(ssh_config=cfg)).open()


def test_certificate_file_logs_in_with_its_key(cert_server, tmp_path):
    body = f"  IdentityFile {cert_server.key}\n  CertificateFile {cert_server.cert}\n"
    cfg = cert_server.config(tmp_path, body)
    with SSHConnection("ca", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.exec("echo certified")[1] == b"certified\n"
    assert "resplot-test" in cert_server.server.log_text()  # sshd logs the certificate's ID


def test_a_cert_pub_beside_the_key_is_used_without_configuration(cert_server, tmp_path):
    key = tmp_path / "keys" / "id_ed25519"
    key.parent.mkdir()
    shutil.copy(cert_server.key, key)
    shutil.copy(f"{cert_server.key}.pub", f"{key}.pub")
    shutil.copy(cert_server.cert, f"{key}-cert.pub")
    cfg = cert_server.config(tmp_path, f"  IdentityFile {key}\n")
    with SSHConnection("ca", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.exec("echo beside")[1] == b"beside\n"


@pytest.fixture
def agent_with_cert(cert_server, tmp_path, monkeypatch) -> Iterator[Path]:
    """A real ssh-agent holding the key and its certificate (ssh-add loads `<key>-cert.pub`)."""
    agent, add = _tool("ssh-agent"), _tool("ssh-add")
    sock = tmp_path / "agent.sock"
    proc = subprocess.Popen([agent, "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        staged = tmp_path / "stage" / "id_ed25519"
        staged.parent.mkdir()
        shutil.copy(cert_server.key, staged)
        os.chmod(staged, 0o600)
        shutil.copy(cert_server.cert, f"{staged}-cert.pub")
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run([add, str(staged)], env=env, check=True, capture_output=True)
        listed = subprocess.run([add, "-L"], env=env, check=True, capture_output=True, text=True)
        assert "cert-v01@openssh.com" in listed.stdout
        shutil.rmtree(staged.parent)  # from now on only the agent holds the key and cert
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        yield sock
    finally:
        proc.terminate()
        proc.wait(5)


def test_an_agent_held_certificate_logs_in_with_identities_only(
    cert_server, agent_with_cert, tmp_path
):
    # IdentitiesOnly yes: the agent's certificate counts because CertificateFile names it,
    # even though the private key file is not on this machine.
    body = f"  IdentitiesOnly yes\n  CertificateFile {cert_server.cert}\n"
    cfg = cert_server.config(tmp_path, body)
    with SSHConnection("ca", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.exec("echo agent")[1] == b"agent\n"


def test_an_agent_certificate_without_identities_only_is_offered_as_it_is(
    cert_server, agent_with_cert, tmp_path
):
    cfg = cert_server.config(tmp_path, "  IdentityFile /nonexistent/key\n")
    with SSHConnection("ca", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.exec("echo plain-agent")[1] == b"plain-agent\n"


def test_identity_agent_names_the_agent_and_none_turns_it_off(
    cert_server, agent_with_cert, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK")  # only IdentityAgent says where the agent is
    cfg = cert_server.config(tmp_path / "a", f"  IdentityAgent {agent_with_cert}\n")
    with SSHConnection("ca", SSHOptions(ssh_config=cfg)) as conn:
        assert conn.exec("echo named")[1] == b"named\n"
    monkeypatch.setenv("SSH_AUTH_SOCK", str(agent_with_cert))
    off = cert_server.config(tmp_path / "b", "  IdentityAgent none\n  IdentityFile /nonexistent\n")
    with pytest.raises(AuthFailed, match="no SSH key"):
        SSHConnection("ca", SSHOptions(ssh_config=off)).open()
