"""The store's schema, shared by reslog (writes) and resplot (reads)."""

from schema.errors import (
    NotAStore,
    SchemaTooNew,
    SchemaTooOld,
    StoreError,
    StoreNotFound,
    UnknownRun,
)
from schema.store import HEAD_REVISION, open_store, resolve_store, sqlite_path
from schema.tables import EVENT_LEVELS, RUN_STATUSES, events, keys, metadata, points, runs

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
