"""A SQLite store file reached through the sqlite3 module itself: read-only, or copied whole.

Standard library only, Python 3.8 syntax: the agent's archive ships it (reslog/agent/bundle.py).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote


def readonly_uri(path: str | os.PathLike[str], immutable: bool = False) -> str:
    """SQLite URI filename opening `path` read-only (mode=ro: the reader can never create,
    modify or lock out the file), for `sqlite3.connect(..., uri=True)`. The path is
    percent-encoded (RFC 3986), so "?", "#" and "%" in it name that file and no other.
    `immutable`: the file is not changing meanwhile (no locks, no WAL read: a quick probe)."""
    # absolute(), not abspath(): "link/.." is left for the OS to resolve, as open() would.
    uri = "file:" + quote(str(Path(path).absolute()), safe="/") + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def backup_into(source: sqlite3.Connection, target: str | os.PathLike[str]) -> None:
    """Copy the database open as `source` into the file `target` through SQLite's backup API:
    a consistent snapshot, WAL included, safe beside concurrent readers and writers."""
    dst = sqlite3.connect(os.fspath(target))
    try:
        source.backup(dst)
    finally:
        dst.close()
