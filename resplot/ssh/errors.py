"""What SSH failures resplot tells apart, without paramiko or Qt (sources and the poller use it)."""

from __future__ import annotations


class SSHError(Exception):
    """Base of every SSH failure resplot reports; the message is meant for a person."""


class AuthFailed(SSHError):
    """The host refused every way we could log in: retrying at once will not help (sources
    show auth_failed and retry slowly)."""
