"""The store's schema, shared by reslog (writes) and resplot (reads).

The names below are loaded on first use (PEP 562): `import schema.store.columns` (or any other
stdlib-only module here) must not pull SQLAlchemy in, so that the agent's modules and the
CLI's read-only fast path (reslog/tools/quick_read.py) start in milliseconds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schema.store.connect import open_store, resolve_store, sqlite_path
    from schema.store.errors import (
        NotAStore,
        SchemaTooNew,
        SchemaTooOld,
        StoreError,
        StoreNotFound,
        UnknownRun,
    )
    from schema.store.revision import HEAD_REVISION
    from schema.store.status import RUN_STATUSES
    from schema.store.tables import EVENT_LEVELS, events, keys, metadata, points, runs

__all__ = [
    "EVENT_LEVELS",
    "HEAD_REVISION",
    "RUN_STATUSES",
    "NotAStore",
    "SchemaTooNew",
    "SchemaTooOld",
    "StoreError",
    "StoreNotFound",
    "UnknownRun",
    "events",
    "keys",
    "metadata",
    "open_store",
    "points",
    "resolve_store",
    "runs",
    "sqlite_path",
]
_ERRORS = ("NotAStore", "SchemaTooNew", "SchemaTooOld", "StoreError", "StoreNotFound", "UnknownRun")
_STORE = ("open_store", "resolve_store", "sqlite_path")
_FROM = {
    name: "schema.store.errors"
    if name in _ERRORS
    else "schema.store.connect"
    if name in _STORE
    else "schema.store.revision"
    if name == "HEAD_REVISION"
    else "schema.store.status"
    if name == "RUN_STATUSES"
    else "schema.store.tables"
    for name in __all__
}


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module 'schema' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM})
