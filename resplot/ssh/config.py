"""Resolving one host through the ssh config, the way `ssh` itself would, into typed values.

resplot.ssh.openssh_config reads the files by OpenSSH's rules (what `ssh -G` prints); this module
turns those values into a HostConfig (tokens expanded, defaults filled in), treats values from a
source spec (`user@host:port`) like `ssh -l/-p`, and resolves ProxyJump chains hop by hop
through the same config (each hop like the `ssh -W` that OpenSSH runs for it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from resplot.ssh.errors import SSHError
from resplot.ssh.openssh_config import (
    DEFAULT_GLOBAL_KNOWN_HOSTS,
    DEFAULT_USER_KNOWN_HOSTS,
    SYSTEM_CONFIG,
    ConfigError,
    expand_tokens,
    local_user,
    percent_expand,
    read_options,
    resolved_hostname,
    server_alive_interval,
)
from resplot.ssh.openssh_config import DEFAULT_IDENTITY_FILES as _SSH_DEFAULT_IDENTITY_FILES

DEFAULT_PORT = 22
DEFAULT_IDENTITY_FILES = _SSH_DEFAULT_IDENTITY_FILES
DEFAULT_KNOWN_HOSTS = DEFAULT_USER_KNOWN_HOSTS
MAX_JUMP_DEPTH = 8


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
    proxy_command: str | None = None  # tokens already expanded; run through the shell
    certificate_files: tuple[str, ...] = ()
    global_known_hosts_files: tuple[str, ...] = DEFAULT_GLOBAL_KNOWN_HOSTS
    batch_mode: bool = False  # never ask anything (passwords, passphrases, host keys)
    password_authentication: bool = True
    kbd_interactive_authentication: bool = True
    number_of_password_prompts: int = 3
    preferred_authentications: tuple[str, ...] = ()
    identity_agent: str | None = None  # None: $SSH_AUTH_SOCK; "none": no agent
    system_config: str | None = field(default=SYSTEM_CONFIG, compare=False)

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


def proxy_command_argv(command: str) -> list[str]:
    """How ssh runs a ProxyCommand (resplot.ssh.openssh_config.shell_argv)."""
    from resplot.ssh.openssh_config import shell_argv

    return shell_argv(command)


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


def resolve_host(
    host: str,
    *,
    user: str | None = None,
    port: int | None = None,
    config_path: str | Path | None = None,
    jumps: tuple[Hop, ...] | None = None,
    system_config: str | Path | None = SYSTEM_CONFIG,
) -> HostConfig:
    """Resolve `host` (an alias or a real name) through the ssh config.

    `user` and `port` act like `ssh -l user -p port`: they beat the config file. `jumps`, when
    given, is like `ssh -J`: it replaces the host's own ProxyJump and ProxyCommand (used for the
    earlier hops of a chain). `config_path` is like `ssh -F`: only that file is read; without
    it, ~/.ssh/config and then /etc/ssh/ssh_config (`system_config`).
    """
    forced: dict[str, object] = {"user": user, "port": port}
    if jumps:
        forced["proxyjump"] = ",".join(str(h) for h in jumps)
    elif jumps is not None:
        forced["proxyjump_none"] = True
        forced["proxycommand"] = "none"
    path = Path(config_path).expanduser() if config_path else None
    where = str(path) if path else "~/.ssh/config"
    try:
        opts = read_options(host, config=path, system_config=system_config, forced=forced)
        hostname = resolved_hostname(opts)
        config = _host_config(host, hostname, opts, str(path) if path else None)
    except ConfigError as exc:
        raise SSHConfigError(f"ssh config ({where}): {exc}") from None
    return replace(config, system_config=str(system_config) if system_config else None)


def _host_config(host: str, hostname: str, opts, config_path: str | None) -> HostConfig:
    resolved_port = int(opts.get("port") or DEFAULT_PORT)
    remote_user = str(opts.get("user") or local_user())
    alias = opts.get("hostkeyalias")
    jump = opts.get("proxyjump")

    def expand(value: str, what: str) -> str:
        return expand_tokens(
            value,
            host=hostname,
            host_arg=host,
            port=str(resolved_port),
            remote_user=remote_user,
            host_key_alias=alias,
            jump=str(jump or ""),
            what=what,
        )

    def files(values, what: str) -> tuple[str, ...]:
        if values and values[0].lower() == "none":
            return ()
        return tuple(expand(v, what) for v in values)

    command = opts.get("proxycommand")
    if command is not None and str(command).lower() == "none":
        command = None
    if command is not None:
        tokens = {
            "h": hostname,
            "k": alias or hostname,
            "n": host,
            "p": str(resolved_port),
            "r": remote_user,
        }
        command = percent_expand(str(command), tokens, "ProxyCommand")
    alive_count = opts.get("serveralivecountmax")
    agent = opts.get("identityagent")
    preferred = opts.get("preferredauthentications")
    return HostConfig(
        alias=host,
        hostname=hostname,
        port=resolved_port,
        user=remote_user,
        identity_files=files(opts.identity_files, "IdentityFile"),
        identities_only=bool(opts.get("identitiesonly", False)),
        known_hosts_files=files(
            opts.get("userknownhostsfile", DEFAULT_USER_KNOWN_HOSTS), "UserKnownHostsFile"
        ),
        host_key_alias=alias,
        hash_known_hosts=bool(opts.get("hashknownhosts", False)),
        strict_host_key_checking={"true": "yes", "false": "no"}.get(
            str(opts.get("stricthostkeychecking", "ask")),
            str(opts.get("stricthostkeychecking", "ask")),
        ),
        connect_timeout=_positive(opts.get("connecttimeout")),
        server_alive_interval=_positive(server_alive_interval(opts)),
        server_alive_count_max=int(alive_count) if alive_count else None,
        jumps=parse_jumps(str(jump) if jump else None),
        config_path=config_path,
        proxy_command=command,
        certificate_files=files(opts.certificate_files, "CertificateFile"),
        global_known_hosts_files=files(
            opts.get("globalknownhostsfile", DEFAULT_GLOBAL_KNOWN_HOSTS), "GlobalKnownHostsFile"
        ),
        batch_mode=bool(opts.get("batchmode", False)),
        password_authentication=bool(opts.get("passwordauthentication", True)),
        kbd_interactive_authentication=bool(opts.get("kbdinteractiveauthentication", True)),
        number_of_password_prompts=int(opts.get("numberofpasswordprompts", 3)),
        preferred_authentications=tuple(str(preferred).split(",")) if preferred else (),
        identity_agent=expand(str(agent), "IdentityAgent") if agent else None,
    )


def _positive(value) -> float | None:
    return float(value) if value else None


def resolve_chain(target: HostConfig) -> list[HostConfig]:
    """The hops to connect through, first hop first, ending with `target`.

    Like OpenSSH: with `ProxyJump a,b`, b is reached through a, and a is resolved with its own
    config (including its own ProxyJump); each hop's User/Port/IdentityFile come from its stanza.
    """
    chain = [target]
    current = target
    while current.jumps:  # a hop reached by ProxyCommand ends the walk: it is the first
        if len(chain) > MAX_JUMP_DEPTH:
            hops = " -> ".join(h.alias for h in reversed(chain))
            raise SSHConfigError(f"ProxyJump chain too long or looping: {hops}")
        *earlier, last = current.jumps
        current = resolve_host(
            last.host,
            user=last.user,
            port=last.port,
            config_path=target.config_path,
            system_config=target.system_config,
            jumps=tuple(earlier) if earlier else None,
        )
        chain.insert(0, current)
    return chain
