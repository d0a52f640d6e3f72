"""Resolving `~/.ssh/config` for one host, the way `ssh` itself would.

paramiko.SSHConfig does the stanza matching (first obtained value wins, IdentityFile
accumulates, %h/%u/%r and ~ tokens); this module adds what it leaves out: `Include`, values given
on the "command line" (`user@host:port` in a source spec) that beat the file, ProxyJump chains
resolved hop by hop through the same config, and typed results.
"""

from __future__ import annotations

import getpass
import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

DEFAULT_PORT = 22
DEFAULT_IDENTITY_FILES = ("~/.ssh/id_ed25519", "~/.ssh/id_ecdsa", "~/.ssh/id_rsa")
DEFAULT_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
MAX_JUMP_DEPTH = 8
_INCLUDE_DEPTH = 16


class SSHError(Exception):
    """Base of every SSH failure resplot reports; the message is meant for a person."""


class SSHConfigError(SSHError):
    """The ssh config (or a host spec) cannot be understood."""


@dataclass(frozen=True)
class Hop:
    """One `[user@]host[:port]` element of a ProxyJump list, as written."""

    host: str
    user: str | None = None
    port: int | None = None

    def __str__(self) -> str:
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text


@dataclass(frozen=True)
class HostConfig:
    """Everything needed to reach one host (one hop of a chain)."""

    alias: str  # as the user wrote it (the `Host` pattern it matched)
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...] = ()  # from the config; empty = the default key files
    identities_only: bool = False
    known_hosts_files: tuple[str, ...] = DEFAULT_KNOWN_HOSTS
    host_key_alias: str | None = None
    hash_known_hosts: bool = False
    strict_host_key_checking: str = "ask"  # "yes" = never ask about an unknown key
    connect_timeout: float | None = None
    server_alive_interval: float | None = None
    server_alive_count_max: int | None = None
    jumps: tuple[Hop, ...] = ()
    config_path: str | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        """How to name this host in messages: `user@alias` plus the real address if different."""
        where = self.hostname if self.port == DEFAULT_PORT else f"{self.hostname}:{self.port}"
        return f"{self.user}@{self.alias}" + ("" if where == self.alias else f" ({where})")

    def key_file_candidates(self) -> list[Path]:
        """Key files to try, in order: the configured ones, else the usual defaults that exist."""
        if self.identity_files:
            return [Path(p).expanduser() for p in self.identity_files]
        return [Path(p).expanduser() for p in DEFAULT_IDENTITY_FILES]


def default_config_path() -> Path:
    return Path("~/.ssh/config").expanduser()


def parse_hop(text: str) -> Hop:
    """`[ssh://][user@]host[:port]`, IPv6 as `[addr]:port`."""
    raw = text.strip()
    if raw.startswith("ssh://"):
        raw = raw[len("ssh://") :].rstrip("/")
    user = None
    if "@" in raw:
        user, raw = raw.rsplit("@", 1)
    port = None
    m = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", raw)
    if m:
        host, port_text = m.group(1), m.group(2)
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    else:
        host, port_text = raw, None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise SSHConfigError(f"bad port in ProxyJump element '{text}'")
        port = int(port_text)
    if not host or not (user is None or user):
        raise SSHConfigError(f"cannot read ProxyJump element '{text}' (want [user@]host[:port])")
    return Hop(host, user, port)


def parse_jumps(value: str | None) -> tuple[Hop, ...]:
    if not value or value.strip().lower() == "none":
        return ()
    return tuple(parse_hop(part) for part in value.split(",") if part.strip())


def _read_with_includes(path: Path, depth: int = 0) -> str:
    """The file's text with `Include` lines replaced by the included files (globbed, in order)."""
    if depth > _INCLUDE_DEPTH:
        raise SSHConfigError(f"ssh config Include nesting too deep at {path}")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise SSHConfigError(f"cannot read ssh config {path}: {exc}") from exc
    out = []
    for line in text.splitlines():
        m = re.match(r"\s*include\s+(.+)$", line, re.IGNORECASE)
        if not m:
            out.append(line)
            continue
        for pattern in m.group(1).split():
            pattern = os.path.expanduser(pattern.strip('"'))
            if not os.path.isabs(pattern):  # relative Includes are relative to ~/.ssh
                pattern = os.path.join(os.path.expanduser("~/.ssh"), pattern)
            for included in sorted(glob.glob(pattern)):
                out.append(_read_with_includes(Path(included), depth + 1))
    return "\n".join(out)


def _as_float(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise SSHConfigError(f"ssh config: {name} must be a number, not '{value}'") from None


def resolve_host(
    host: str,
    *,
    user: str | None = None,
    port: int | None = None,
    config_path: str | Path | None = None,
    jumps: tuple[Hop, ...] | None = None,
) -> HostConfig:
    """Resolve `host` (an alias or a real name) through the ssh config.

    `user` and `port` act like `ssh -l user -p port`: they beat the config file. `jumps`, when
    given, replaces the host's own ProxyJump (used for the earlier hops of a chain).
    """
    path = Path(config_path).expanduser() if config_path else default_config_path()
    # Values from the command line come first, so "first obtained value wins" lets them beat
    # every stanza, and %r in IdentityFile sees the user that will really be used.
    forced = []
    if user:
        forced.append(f"User {user}")
    if port:
        forced.append(f"Port {port}")
    prefix = "Host *\n" + "\n".join(f"  {line}" for line in forced) + "\n" if forced else ""
    text = prefix + _read_with_includes(path)
    try:
        cfg = paramiko.SSHConfig.from_text(text).lookup(host)
    except (paramiko.ssh_exception.ConfigParseError, ValueError) as exc:
        raise SSHConfigError(f"cannot parse ssh config {path}: {exc}") from exc
    try:
        resolved_port = int(cfg.get("port", DEFAULT_PORT))
    except ValueError:
        raise SSHConfigError(f"ssh config {path}: bad Port for {host}: {cfg['port']}") from None
    known = cfg.get("userknownhostsfile")
    known_files = tuple(known.split()) if known else DEFAULT_KNOWN_HOSTS
    if known_files and known_files[0].lower() == "none":
        known_files = ()
    alive_count = cfg.get("serveralivecountmax")
    return HostConfig(
        alias=host,
        hostname=cfg.get("hostname", host),
        port=resolved_port,
        user=cfg.get("user") or getpass.getuser(),
        identity_files=tuple(cfg.get("identityfile", ())),
        identities_only=cfg.get("identitiesonly", "no").lower() == "yes",
        known_hosts_files=tuple(os.path.expanduser(f) for f in known_files),
        host_key_alias=cfg.get("hostkeyalias"),
        hash_known_hosts=cfg.get("hashknownhosts", "no").lower() == "yes",
        strict_host_key_checking=cfg.get("stricthostkeychecking", "ask").lower(),
        connect_timeout=_as_float(cfg.get("connecttimeout"), "ConnectTimeout"),
        server_alive_interval=_as_float(cfg.get("serveraliveinterval"), "ServerAliveInterval"),
        server_alive_count_max=int(alive_count) if alive_count else None,
        jumps=parse_jumps(cfg.get("proxyjump")) if jumps is None else jumps,
        config_path=str(path),
    )


def resolve_chain(target: HostConfig) -> list[HostConfig]:
    """The hops to connect through, first hop first, ending with `target`.

    Like OpenSSH: with `ProxyJump a,b`, b is reached through a, and a is resolved with its own
    config (including its own ProxyJump); each hop's User/Port/IdentityFile come from its stanza.
    """
    chain = [target]
    current = target
    while current.jumps:
        if len(chain) > MAX_JUMP_DEPTH:
            hops = " -> ".join(h.alias for h in reversed(chain))
            raise SSHConfigError(f"ProxyJump chain too long or looping: {hops}")
        *earlier, last = current.jumps
        current = resolve_host(
            last.host,
            user=last.user,
            port=last.port,
            config_path=target.config_path,
            jumps=tuple(earlier) if earlier else None,
        )
        chain.insert(0, current)
    return chain
