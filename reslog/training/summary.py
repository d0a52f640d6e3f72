"""`run.summary`: a dict that knows when it changed, and its stored form (JSON that never fails)."""

from __future__ import annotations

import json
from typing import Any

from reslog.training.values import as_json


class Summary(dict):
    """`run.summary`: a dict that counts its changes so the writer persists it when it changed."""

    version = 0

    def _touch(self) -> None:
        self.version += 1

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._touch()

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._touch()

    def update(self, *args, **kw) -> None:
        super().update(*args, **kw)
        self._touch()

    def setdefault(self, key, default=None):
        out = super().setdefault(key, default)
        self._touch()
        return out

    def pop(self, key, *default):
        out = super().pop(key, *default)
        self._touch()
        return out

    def clear(self) -> None:
        super().clear()
        self._touch()


def summary_json(summary: dict) -> str:
    """The summary as JSON; a key or value JSON cannot hold (a tuple key, a cycle) is stored as
    its str() rather than failing every flush from then on."""
    try:
        return json.dumps(dict(summary), default=as_json)
    except (TypeError, ValueError):
        pass
    out: dict[str, Any] = {}
    for key, value in list(summary.items()):
        try:
            json.dumps(value, default=as_json)
        except (TypeError, ValueError):
            value = str(value)
        out[key if isinstance(key, str) else str(key)] = value
    return json.dumps(out, default=as_json)
