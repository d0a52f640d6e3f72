"""Opening a store for a `reslog` command (reslog/tools/cli.py): SQLAlchemy or, for `ls` on a
local SQLite store, the standard library alone (reslog/tools/quick_read.py); warnings printed
one line each; the exit status of an error."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

from reslog.tools.quick_read import Snapshot, open_snapshot

if TYPE_CHECKING:
    from sqlalchemy import Engine

EXIT_ERROR = 2


@contextlib.contextmanager
def printed_warnings() -> Iterator[None]:
    """Warnings raised inside, printed one line each after it instead of Python's format. A
    ResourceWarning stays ignored, as Python's default filters have it: some other object
    the collector frees meanwhile (a test's leaked connection) is not this command's news."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ResourceWarning)
        yield
    for w in caught:
        print(f"reslog: warning: {w.message}", file=sys.stderr)


def open_store(
    store: str | None, *, readonly: bool = True, quick: bool = False
) -> Engine | Snapshot:
    """schema.store.connect.open_store; with `quick`, a local SQLite store at this code's revision
    is opened as a stdlib Snapshot instead (reslog/tools/quick_read.py), without SQLAlchemy."""
    if quick:
        snap = open_snapshot(store)
        if snap is not None:
            return snap
    from schema.store.connect import open_store as open_engine

    return open_engine(store, readonly=readonly)


@contextlib.contextmanager
def opened(store: str | None, *, readonly: bool = True) -> Iterator[Engine]:
    """open_store with its warnings printed as one line each."""
    with printed_warnings():
        engine = open_store(store, readonly=readonly)
    try:
        yield engine
    finally:
        engine.dispose()


def read_kw(store: str | None) -> dict[str, str]:
    from schema.store.connect import store_label

    return {"source": "local", "store": store_label(store)}
