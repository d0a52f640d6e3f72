"""OpenSSH's expansions and platform conventions: `%` tokens, `${VAR}`, `~`, where the
system-wide files are, and which shell runs a command (ProxyCommand, Match exec)."""

from __future__ import annotations

import hashlib
import os
import re
import socket


class ConfigError(ValueError):
    """The config cannot be read the way ssh would read it (ssh itself would stop here)."""


def system_ssh_dir(platform: str | None = None, environ: dict[str, str] | None = None) -> str:
    """Where OpenSSH keeps its system-wide files: /etc/ssh, or on Windows (Win32-OpenSSH, the
    ssh that ships with Windows) %PROGRAMDATA%\\ssh."""
    import sys

    if (platform or sys.platform) == "win32":
        env = os.environ if environ is None else environ
        import ntpath  # Windows path rules, also when this runs elsewhere (tests)

        return ntpath.join(env.get("PROGRAMDATA") or r"C:\ProgramData", "ssh")
    return "/etc/ssh"


def shell_argv(command: str, platform: str | None = None, environ: dict | None = None) -> list:
    """How ssh runs a command it is given (ProxyCommand, Match exec): `exec COMMAND` through
    $SHELL (or /bin/sh); on Windows through %ComSpec% (cmd.exe) /c."""
    import sys

    env = os.environ if environ is None else environ
    if (platform or sys.platform) == "win32":
        return [env.get("ComSpec") or "cmd.exe", "/c", command]
    return [env.get("SHELL") or "/bin/sh", "-c", f"exec {command}"]


def expand_hostname(value: str, host_arg: str) -> str:
    """HostName takes only %h and %% (ssh refuses any other token there)."""
    return percent_expand(value, {"h": host_arg}, "HostName")


def percent_expand(value: str, tokens: dict[str, str], what: str) -> str:
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(value):
            raise ConfigError(f"{what} '{value}': invalid format (a lone % at the end)")
        t = value[i + 1]
        if t == "%":
            out.append("%")
        elif t in tokens:
            out.append(tokens[t])
        else:
            raise ConfigError(f"{what} '{value}': unknown token %{t}")
        i += 2
    return "".join(out)


def _dollar(value: str, what: str) -> str:
    def env(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise ConfigError(f"{what} '{value}': environment variable {m.group(1)} is not set")
        return os.environ[m.group(1)]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", env, value)


def local_user() -> str:
    import getpass

    return getpass.getuser()


def expand_tokens(
    value: str,
    *,
    host: str,
    host_arg: str,
    port: str,
    remote_user: str,
    host_key_alias: str | None = None,
    jump: str = "",
    what: str = "value",
) -> str:
    """ssh's tokens for IdentityFile, CertificateFile, UserKnownHostsFile, Match exec:
    %% %C %d %h %i %j %k %L %l %n %p %r %u, then `${VAR}`, then a leading `~`."""
    hostname_full = socket.gethostname()
    local = hostname_full.split(".")[0]
    conn_hash = hashlib.sha1(f"{hostname_full}{host}{port}{remote_user}".encode()).hexdigest()
    tokens = {
        "C": conn_hash,
        "d": os.path.expanduser("~"),
        "h": host,
        "i": str(os.getuid()) if hasattr(os, "getuid") else "0",
        "j": jump,
        "k": host_key_alias or host,
        "L": local,
        "l": hostname_full,
        "n": host_arg,
        "p": port,
        "r": remote_user,
        "u": local_user(),
    }
    return os.path.expanduser(_dollar(percent_expand(value, tokens, what), what))
