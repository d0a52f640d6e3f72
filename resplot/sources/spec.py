"""Source specs, parsed once where the text comes in (command line, add-source dialog, settings)
into a typed value that travels from there: `parse_spec(text) -> LocalSpec | SSHSpec |
PostgresSpec`. No SSH or database library is imported here.

Each spec keeps its text as written: settings store it, the poller tells sources apart by it,
and a local copy's file name is a hash of it.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from typing import ClassVar

# host:path as scp writes it: a host made of name characters, then ':' and a non-empty path.
_SCP = re.compile(
    r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<path>.+)$"
)
_SSH_URL = re.compile(
    r"^ssh://(?:(?P<user>[^@/\s]+)@)?(?P<host>\[[^\]]+\]|[^:/\s]+)(?::(?P<port>\d+))?(?P<path>/.*)$"
)
_OPTIONS = ("python", "via")


class SpecError(ValueError):
    """A source spec that cannot be understood; the message shows the accepted forms."""


@dataclass(frozen=True)
class _Written:
    """What every spec holds first: its text as written, which is also how it prints."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class LocalSpec(_Written):
    """Store paths, directories or globs on this machine, several joined by ','."""

    path: str

    kind: ClassVar[str] = "local"
    label: ClassVar[str] = "local"  # the runs of every local store are filed under one label

    @property
    def parts(self) -> list[str]:
        """Each path or glob of the spec, as written."""
        return [p for p in self.path.split(",") if p]


@dataclass(frozen=True)
class SSHSpec(_Written):
    """`ssh://[user@]host[:port]/path` or `[user@]host:path`, with optional `#python=PATH` and
    `#via=openssh` (the system ssh binary, sources/openssh.py)."""

    host: str
    user: str | None
    port: int | None
    path: str
    python: str | None = None
    via: str | None = None  # "openssh": through the system ssh binary (sources/openssh.py)

    kind: ClassVar[str] = "ssh"

    @property
    def label(self) -> str:
        """The source label runs are filed under: `[user@]host[:port]` as written."""
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text

    def interpreter(self, python: str | None = None) -> str | None:
        """The agent's interpreter on the host: `python` when given, else `#python=`; None: the
        agent's launcher tries the usual places (reslog.agent.bundle.CANDIDATES)."""
        return python or self.python


@dataclass(frozen=True)
class PostgresSpec(_Written):
    """`postgresql://...`, `postgresql+driver://...` or `postgres://...`."""

    url: str

    kind: ClassVar[str] = "postgres"

    @property
    def label(self) -> str:
        """The URL without its password: how runs from this server are labelled (the store's
        one label, schema.store.connect.url_label; imported here, not at the top, so that parsing a
        spec needs no database library)."""
        from schema.store.connect import url_label

        return url_label(self.url)


Spec = LocalSpec | SSHSpec | PostgresSpec


def parse_spec(text: str) -> Spec:
    """The typed spec of a source as written.

    Local: a store path, a directory, a glob (`runs/*.db`) or several joined by ','.
    SSH: `ssh://[user@]host[:port]/path` or `[user@]host:path`, then optional `#name=value`
    options joined by `&`: `python=PATH`, `via=openssh`. Paths may hold globs (the agent
    expands them on the host); `~` and relative paths are the remote home. `#python=` names the
    interpreter for the agent on that host (e.g. a conda env); `#via=openssh` carries the agent
    over the system `ssh` binary instead of resplot's own SSH client (GSSAPI/Kerberos, FIDO
    keys, an open ControlMaster).
    PostgreSQL: `postgresql://...` or `postgresql+psycopg://...`.
    """
    spec = text.strip()
    if not spec:
        raise SpecError("empty source; give a store path, host:path, ssh://... or postgresql://...")
    if spec.startswith(("postgresql://", "postgresql+", "postgres://")):
        return PostgresSpec(text, spec)
    if spec.startswith("ssh://"):
        m = _SSH_URL.match(spec)
        if not m:
            raise SpecError(f"cannot parse {spec!r}; expected ssh://[user@]host[:port]/path")
        path = m["path"]
        # ssh://host/~/runs.db names a home-relative path, as in scp.
        if path.startswith("/~"):
            path = path[1:]
        return _ssh(text, m["user"], m["host"], int(m["port"]) if m["port"] else None, path)
    if "://" in spec:
        scheme = spec.split("://", 1)[0]
        raise SpecError(f"unsupported source scheme {scheme!r} in {spec!r}")
    m = _SCP.match(spec)
    # A local file or glob that exists wins over host:path (a file named "a:b", or C:\...);
    # one-letter "hosts" are drive letters.
    local_hit = os.path.exists(os.path.expanduser(spec)) or (
        glob.has_magic(spec) and glob.glob(os.path.expanduser(spec))
    )
    if m and not local_hit and len(m["host"]) > 1 and "/" not in m["host"]:
        return _ssh(text, m["user"], m["host"], None, m["path"])
    return LocalSpec(text, spec)


def _ssh(text: str, user: str | None, host: str, port: int | None, path: str) -> SSHSpec:
    """An SSHSpec, its `#python=...&via=...` options taken off the end of the path (a `#` that
    starts no option belongs to the path itself)."""
    options: dict[str, str | None] = {}
    head, _, fragment = path.rpartition("#")
    if fragment.startswith(tuple(f"{name}=" for name in _OPTIONS)):
        if not head:
            raise SpecError(
                f"{text.strip()!r} is not an SSH source (want host:path or ssh://host/path)"
            )
        path = head
        for part in fragment.split("&"):
            name, eq, value = part.partition("=")
            if not eq or name not in _OPTIONS:
                raise SpecError(
                    f"{text.strip()!r}: unknown option {part!r} (want python=PATH or via=openssh)"
                )
            options[name] = value.strip() or None
    if options.get("via") not in (None, "openssh"):
        raise SpecError(f"{text.strip()!r}: via={options['via']} is not known (want via=openssh)")
    return SSHSpec(
        text, host.strip("[]"), user, port, path, options.get("python"), options.get("via")
    )


__all__ = ["LocalSpec", "PostgresSpec", "SSHSpec", "Spec", "SpecError", "parse_spec"]
