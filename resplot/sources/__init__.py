"""Sources of runs: local stores (and globs), remote stores over SSH, PostgreSQL URLs.

A spec's text is parsed once where it comes in (`parse_spec`, resplot.sources.spec); then
`open_source(spec)` returns a Source without doing any I/O, and the poller
(resplot/ui/poller.py) polls it from a worker thread.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from resplot.sources.base import AuthFailed, PollResult, Source, SourceState, StoreCursor
from resplot.sources.spec import LocalSpec, PostgresSpec, Spec, SpecError, SSHSpec, parse_spec
from resplot.ssh.options import SSHOptions

__all__ = [
    "AuthFailed",
    "LocalSpec",
    "PollResult",
    "PostgresSpec",
    "SSHSpec",
    "Source",
    "SourceState",
    "Spec",
    "SpecError",
    "StoreCursor",
    "open_source",
    "parse_spec",
    "unique_label",
]


def open_source(spec: Spec, ssh: SSHOptions | None = None, **opts: Any) -> Source:
    """A Source for a spec; no connection is made until its first poll. `ssh` is for SSH
    sources only (the others take none); `opts` go to the source itself (e.g. `python`)."""
    if isinstance(spec, LocalSpec):
        from resplot.sources.local import LocalSource

        return LocalSource(spec, **opts)
    if isinstance(spec, PostgresSpec):
        from resplot.sources.postgres import PostgresSource

        return PostgresSource(spec, **opts)
    if spec.via == "openssh":
        from resplot.sources.openssh import OpenSSHSource

        return OpenSSHSource(spec, ssh, **opts)
    try:
        from resplot.sources.ssh import SSHSource
    except ImportError as exc:
        raise SpecError(
            f"{spec.text!r} is a remote (SSH) source, but SSH support is unavailable: {exc}"
        ) from exc
    return SSHSource(spec, ssh, **opts)


def unique_label(label: str, taken: Container[str]) -> str:
    """`label`, or `label (2)`, `label (3)`... the first not in `taken`: two sources with the
    same name (two local stores of a job's hosts copied here) are two sources, each read."""
    base, n = label, 2
    while label in taken:
        label, n = f"{base} ({n})", n + 1
    return label
