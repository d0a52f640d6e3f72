"""Errors a store can raise; the CLI prints their message without a traceback."""

from __future__ import annotations


class StoreError(Exception):
    """A store cannot be used; the message says why and, where there is one, what to do."""


class StoreNotFound(StoreError):
    """No store at that path (read commands never create one)."""


class NotAStore(StoreError):
    """The file or database exists but holds no reslog store."""


class SchemaTooOld(StoreError):
    """Written by an older reslog; `reslog upgrade` migrates it."""


class SchemaTooNew(StoreError):
    """Written by a newer reslog; reading it could misread columns, so it is refused."""


class UnknownRun(StoreError):
    """No run matches the given uid, uid prefix or name."""


class AmbiguousRun(UnknownRun):
    """Several runs match a name or uid prefix (a script run twice under one name): none is
    picked. `matches` holds them (RunInfo), oldest first."""

    def __init__(self, message: str, matches: list) -> None:
        super().__init__(message)
        self.matches = matches


class UnknownKey(StoreError):
    """A run has no series of that key name."""


class RunInUse(StoreError):
    """A run is being logged by a live process: a second writer would break its rollups."""
