"""Sources of runs: local stores (and globs), remote stores over SSH, PostgreSQL URLs.

`open_source(spec)` parses a spec and returns a Source without doing any I/O; the poller
(resplot/ui/poller.py) then polls it from a worker thread.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from resplot.sources.base import AuthFailed, PollResult, Source, SourceState, StoreCursor

__all__ = [
    "AuthFailed",
    "PollResult",
    "Source",
    "SourceState",
    "SpecError",
    "StoreCursor",
    "open_source",
    "parse_spec",
]

# host:path as scp writes it: a host made of name characters, then ':' and a non-empty path.
_SCP = re.compile(
    r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<path>.+)$"
)
_SSH_URL = re.compile(
    r"^ssh://(?:(?P<user>[^@/\s]+)@)?(?P<host>\[[^\]]+\]|[^:/\s]+)(?::(?P<port>\d+))?(?P<path>/.*)$"
)


class SpecError(ValueError):
    """A source spec that cannot be understood; the message shows the accepted forms."""


def parse_spec(spec: str) -> dict[str, Any]:
    """Classify a spec: {"kind": "local"|"ssh"|"postgres", ...fields}."""
    spec = spec.strip()
    if not spec:
        raise SpecError("empty source; give a store path, host:path, ssh://... or postgresql://...")
    if spec.startswith(("postgresql://", "postgresql+", "postgres://")):
        return {"kind": "postgres", "url": spec}
    if spec.startswith("ssh://"):
        m = _SSH_URL.match(spec)
        if not m:
            raise SpecError(f"cannot parse {spec!r}; expected ssh://[user@]host[:port]/path")
        path = m["path"]
        # ssh://host/~/runs.db names a home-relative path, as in scp.
        if path.startswith("/~"):
            path = path[1:]
        return {
            "kind": "ssh",
            "user": m["user"],
            "host": m["host"].strip("[]"),
            "port": int(m["port"]) if m["port"] else None,
            "path": path,
        }
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
        return {
            "kind": "ssh",
            "user": m["user"],
            "host": m["host"].strip("[]"),
            "port": None,
            "path": m["path"],
        }
    return {"kind": "local", "path": spec}


def open_source(spec: str, **opts: Any) -> Source:
    """A Source for a spec; no connection is made until its first poll.

    Local: a store path, a directory, a glob (`runs/*.db`) or several joined by ','.
    SSH: `ssh://[user@]host[:port]/path` or `host:path` (globs allowed; ~ is the remote home).
    PostgreSQL: `postgresql://...` or `postgresql+psycopg://...`.
    """
    parsed = parse_spec(spec)
    kind = parsed.pop("kind")
    if kind == "local":
        from resplot.sources.local import LocalSource

        return LocalSource(parsed["path"], **opts)
    if kind == "postgres":
        from resplot.sources.postgres import PostgresSource

        return PostgresSource(parsed["url"], **opts)
    from resplot.sources.spec import parse_ssh_spec

    if parse_ssh_spec(spec).via == "openssh":
        from resplot.sources.openssh import OpenSSHSource

        return OpenSSHSource(spec, **opts)
    try:
        from resplot.sources.ssh import SSHSource
    except ImportError as exc:
        raise SpecError(
            f"{spec!r} is a remote (SSH) source, but SSH support is unavailable: {exc}"
        ) from exc
    # SSHSource parses the spec itself with parse_spec() (user, host, port, path).
    return SSHSource(spec, **opts)
