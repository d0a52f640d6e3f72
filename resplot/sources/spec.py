"""SSH source specs (`host:path`, `ssh://...`, `#python=`, `#via=openssh`), parsed without
importing any SSH library."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SSHSpec:
    host: str
    user: str | None
    port: int | None
    path: str
    python: str | None = None
    via: str | None = None  # "openssh": through the system ssh binary (sources/openssh.py)

    @property
    def label(self) -> str:
        """The source label runs are filed under: `[user@]host[:port]` as written."""
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text


def parse_ssh_spec(spec: str) -> SSHSpec:
    """`ssh://[user@]host[:port]/path` or `[user@]host:path`, then optional `#name=value`
    options joined by `&`: `python=PATH`, `via=openssh`.

    Paths may hold globs (the agent expands them on the host); `~` and relative paths are the
    remote home. `#python=` names the interpreter for the agent on that host (e.g. a conda env);
    `#via=openssh` carries the agent over the system `ssh` binary instead of resplot's own SSH
    client (GSSAPI/Kerberos, FIDO keys, an open ControlMaster).
    """
    from resplot.sources import SpecError, parse_spec

    text, options = spec.strip(), {}
    head, _, fragment = text.rpartition("#")
    if head and fragment.startswith(("python=", "via=")):  # else a `#` of the path itself
        text = head
        for part in fragment.split("&"):
            name, eq, value = part.partition("=")
            if not eq or name not in ("python", "via"):
                raise SpecError(f"{spec!r}: unknown option {part!r} (want python=PATH or "
                                "via=openssh)")  # fmt: skip
            options[name] = value.strip() or None
    if options.get("via") not in (None, "openssh"):
        raise SpecError(f"{spec!r}: via={options['via']} is not known (want via=openssh)")
    parsed = parse_spec(text)
    if parsed.get("kind") != "ssh":
        raise SpecError(f"{spec!r} is not an SSH source (want host:path or ssh://host/path)")
    return SSHSpec(parsed["host"], parsed["user"], parsed["port"], parsed["path"],
                   options.get("python"), options.get("via"))  # fmt: skip
