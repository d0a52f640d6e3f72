"""How resplot's SSH connections behave, as one value handed from the window or the command line
through the poller and the source to each host's connection: who decides about unknown host
keys, who answers logins, which ssh config file, and how long to wait. No SSH library here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resplot.ssh.hostkeys import AskHostKey
    from resplot.ssh.prompts import Secrets


@dataclass(frozen=True)
class Timeouts:
    connect: float = 10.0  # TCP connect (and each direct-tcpip channel open through a jump)
    banner: float = 15.0  # server banner + key exchange
    auth: float = 15.0  # the whole authentication
    request: float = 30.0  # one agent request / one exec
    keepalive_interval: float = 5.0
    keepalive_max: int = 3  # unanswered keepalives before the connection counts as lost


@dataclass(frozen=True)
class SSHOptions:
    """`ask_host_key(host, key_type, "SHA256:...")` decides about unknown host keys (None =
    refuse). `secrets` answers what a login asks (password, keyboard-interactive, key
    passphrase) and keeps the answers for the session (resplot.ssh.prompts); without it nothing
    is asked. `ssh_config` replaces ~/.ssh/config and /etc/ssh/ssh_config, like `ssh -F`."""

    ask_host_key: AskHostKey | None = None
    secrets: Secrets | None = None
    ssh_config: str | Path | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)


__all__ = ["SSHOptions", "Timeouts"]
