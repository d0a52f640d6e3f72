"""known_hosts checking: known key → go on, unknown key → ask a person, changed key → refuse.

Never adds a key on its own (no AutoAddPolicy): an unknown key is accepted only when the
`ask_host_key(host, key_type, sha256_fingerprint) -> bool` callback says yes, and is then pinned
into the user's known_hosts file so the next connection checks against it. Reads plain and
hashed (`|1|salt|hash`) entries, `[host]:port` names, wildcards and `!` negations, and the
`@revoked` marker, like OpenSSH.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import paramiko

from resplot.ssh.config import DEFAULT_PORT, HostConfig, SSHError

log = logging.getLogger(__name__)

AskHostKey = Callable[[str, str, str], bool]


class HostKeyError(SSHError):
    """Base of the host key failures: the connection was not trusted."""


class HostKeyUnknown(HostKeyError):
    """The host's key is in no known_hosts file and nobody could be asked."""


class HostKeyRejected(HostKeyError):
    """The person refused the unknown key (or the key is marked @revoked)."""


class HostKeyChanged(HostKeyError):
    """The host presented a different key than the one pinned in known_hosts."""


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's `SHA256:...` fingerprint (base64, no padding)."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def host_key_name(hostname: str, port: int) -> str:
    """The name known_hosts uses: `host` on port 22, `[host]:port` otherwise."""
    return hostname if port == DEFAULT_PORT else f"[{hostname}]:{port}"


@dataclass(frozen=True)
class KnownEntry:
    path: Path
    lineno: int
    marker: str | None  # "@revoked", "@cert-authority" or None
    key_type: str
    key_base64: str


def _hash_host(name: str, salt: bytes) -> bytes:
    return hmac.new(salt, name.encode(), hashlib.sha1).digest()


def _hosts_match(field: str, name: str) -> bool:
    """Does a known_hosts host field (hashed, or comma patterns with negation) match `name`?"""
    if field.startswith("|1|"):
        try:
            _, _, salt_b64, hash_b64 = field.split("|")
            salt, wanted = base64.b64decode(salt_b64), base64.b64decode(hash_b64)
        except ValueError:
            return False
        return hmac.compare_digest(_hash_host(name, salt), wanted)
    matched = False
    for pattern in field.split(","):
        negate = pattern.startswith("!")
        pattern = pattern[1:] if negate else pattern
        if _wildcard_match(pattern, name):
            if negate:
                return False
            matched = True
    return matched


def _wildcard_match(pattern: str, name: str) -> bool:
    """OpenSSH pattern: only `*` and `?` are special (so `[host]:port` is literal)."""
    regex = "".join(
        ".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern.lower()
    )
    return re.fullmatch(regex, name.lower()) is not None


def read_entries(path: Path, name: str) -> list[KnownEntry]:
    """Entries of one known_hosts file whose host field matches `name`."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise HostKeyError(f"cannot read known_hosts file {path}: {exc}") from exc
    found = []
    for lineno, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if len(fields) < 3 or not _hosts_match(fields[0], name):
            continue
        found.append(KnownEntry(path, lineno, marker, fields[1], fields[2]))
    return found


class KnownHosts:
    """The known_hosts files of one host's config: the user's (UserKnownHostsFile; the first
    receives pinned keys), then the system-wide ones (GlobalKnownHostsFile), only read."""

    def __init__(self, config: HostConfig) -> None:
        self.config = config
        self.files = [Path(f).expanduser() for f in config.known_hosts_files]
        self.global_files = [Path(f) for f in config.global_known_hosts_files]
        self.name = host_key_name(config.host_key_alias or config.hostname, config.port)

    def entries(self) -> list[KnownEntry]:
        found = [e for path in self.files for e in read_entries(path, self.name)]
        for path in self.global_files:
            if path in self.files:
                continue
            try:
                found += read_entries(path, self.name)
            except HostKeyError as exc:  # ssh, too, goes on without an unreadable system file
                log.warning("%s", exc)
        return found

    def known_key_types(self) -> list[str]:
        """Key types pinned for this host, so the handshake can ask the server for one of them."""
        seen: list[str] = []
        for e in self.entries():
            if e.marker is None and e.key_type not in seen:
                seen.append(e.key_type)
        return seen

    def verify(self, key: paramiko.PKey, ask: AskHostKey | None) -> None:
        """Return if the key is trusted (known, or accepted and pinned); raise otherwise."""
        key_type, blob = key.get_name(), key.get_base64()
        entries = self.entries()
        for e in entries:
            if e.marker == "@revoked" and e.key_base64 == blob:
                raise HostKeyRejected(
                    f"the host key of {self.config.label} ({fingerprint(key)}) is marked "
                    f"@revoked in {e.path} line {e.lineno}; refusing to connect"
                )
        same_type = [e for e in entries if e.marker is None and e.key_type == key_type]
        if any(e.key_base64 == blob for e in same_type):
            return
        if same_type:
            e = same_type[0]
            raise HostKeyChanged(
                f"HOST KEY CHANGED for {self.config.label}: it now presents {key_type} key "
                f"{fingerprint(key)}, but {e.path} line {e.lineno} pins a different one. "
                "Someone may be intercepting the connection, or the host was reinstalled. "
                f"If you know the change is legitimate, remove the old key with "
                f"`ssh-keygen -R '{self.name}' -f {e.path}` and connect again."
            )
        self._ask_and_pin(key, ask)

    def _ask_and_pin(self, key: paramiko.PKey, ask: AskHostKey | None) -> None:
        fp = fingerprint(key)
        where = ", ".join(str(f) for f in self.files) or "no known_hosts file"
        if ask is None or self.config.strict_host_key_checking == "yes":
            raise HostKeyUnknown(
                f"the host key of {self.config.label} is not known ({key.get_name()} {fp}; "
                f"looked in {where}). Connect once with `ssh {self.config.alias}` to check and "
                "accept it, or accept it when resplot asks."
            )
        if not ask(self.config.label, key.get_name(), fp):
            raise HostKeyRejected(
                f"you refused the host key of {self.config.label} ({key.get_name()} {fp})"
            )
        self.pin(key)

    def pin(self, key: paramiko.PKey) -> Path:
        """Append the key to the first known_hosts file (hashed if HashKnownHosts yes)."""
        if not self.files:
            raise HostKeyError(
                f"cannot pin the host key of {self.config.label}: UserKnownHostsFile is none"
            )
        path = self.files[0]
        if self.config.hash_known_hosts:
            salt = os.urandom(20)
            digest = _hash_host(self.name, salt)
            host_field = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
        else:
            host_field = self.name
        line = f"{host_field} {key.get_name()} {key.get_base64()}\n"
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            needs_newline = (
                path.exists() and path.stat().st_size > 0 and not _ends_with_newline(path)
            )
            with open(path, "a", encoding="utf-8") as f:
                f.write(("\n" if needs_newline else "") + line)
        except OSError as exc:
            raise HostKeyError(f"cannot write the accepted host key to {path}: {exc}") from exc
        return path


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
