"""The SQLite file a writer writes into, and its rescue when the file is deleted or replaced.

A process keeps writing happily into a store file that was unlinked under it (`rm runs/*.db`, a
cleanup script, a colleague's `mv`): SQLite's open descriptor still works, and the whole run
would vanish when the process exits. The writer compares the path's (device, inode) with the
one it opened before each flush; on a change it copies the still-open database through SQLite's
backup API (a consistent snapshot, WAL included) and puts the copy back:

- at the same path when nothing is there any more (created atomically with link(), so two
  writers of one file never overwrite each other's rescue);
- when another file now sits at the path: into that file if it is a store holding this run (the
  other writers of a shared file got there first), otherwise beside it as
  `<name>.restored-<run uid prefix><suffix>`, never overwriting what the user put there.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from schema.store.sqlite_file import backup_into, readonly_uri

SIDECARS = ("-wal", "-shm")


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def holds_run(path: Path, uid: str) -> bool:
    """Whether the SQLite file at `path` is a store with run `uid` (read-only, creates nothing)."""
    try:
        conn = sqlite3.connect(readonly_uri(path), uri=True, timeout=5)
    except sqlite3.Error:
        return False
    try:
        return conn.execute("SELECT 1 FROM runs WHERE uid = ?", (uid,)).fetchone() is not None
    except sqlite3.Error:
        return False
    finally:
        conn.close()


class StoreFile:
    """Where the writer's store lives on disk, as it was when the writer opened it."""

    def __init__(self, path: Path) -> None:
        self.anchor: sqlite3.Connection | None = None
        self._open(path)

    def _open(self, path: Path) -> None:
        self.path = path
        self.opened = identity(path)
        # A read-only connection held for the whole run: the deleted file (and its WAL) stays
        # reachable even while the writer has no connection of its own (after an error).
        with contextlib.suppress(sqlite3.Error):
            anchor = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)
            anchor.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL too
            self.anchor = anchor
        self.sidecars = {s: identity(_sidecar(path, s)) for s in SIDECARS}

    def close(self) -> None:
        anchor, self.anchor = self.anchor, None
        if anchor is not None:
            anchor.close()

    def changed(self) -> str | None:
        """ "deleted", "replaced" or None (the file is the one the writer opened)."""
        now = identity(self.path)
        if now == self.opened:
            return None
        return "deleted" if now is None else "replaced"

    def _remove_stale_sidecars(self) -> None:
        """The lost database's -wal and -shm outlive it at the path (SQLite removes them on the
        last close only while the file is still there). Left there, they would be read as the
        WAL of whatever file sits at the path next, ours or the user's: remove the ones that
        are still the lost file's (same inode as when the writer opened the store)."""
        for suffix, opened in self.sidecars.items():
            path = _sidecar(self.path, suffix)
            if opened is not None and identity(path) == opened:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def snapshot(self, source: sqlite3.Connection | None) -> Path:
        """Copy the open database (`source`, else the anchor) into a temporary file beside the
        store's path."""
        source = source or self.anchor
        if source is None:
            raise OSError(f"{self.path} is gone and no connection holds it open; its rows are lost")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.rescue-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        backup_into(source, tmp)
        # The -wal and -shm files at the path are the lost database's until its last connection
        # closes (which removes them): a file put there meanwhile would be read through them.
        self.close()
        return tmp

    def place(self, tmp: Path, uid: str) -> tuple[Path, bool]:
        """Put the snapshot where the writer goes on: (path, whether it is the rescued copy).
        False means another writer's rescue of the same file was found and is used instead.
        Every connection to the lost file must be closed first (see snapshot)."""
        self._remove_stale_sidecars()
        try:
            _create_from(tmp, self.path)
            where, ours = self.path, True
        except FileExistsError:
            if holds_run(self.path, uid):
                tmp.unlink()
                where, ours = self.path, False
            else:
                where = self.path.with_name(
                    f"{self.path.stem}.restored-{uid[:8]}{self.path.suffix}"
                )
                os.replace(tmp, where)
                ours = True
        self.close()
        self._open(where)
        return where, ours


def _create_from(tmp: Path, path: Path) -> None:
    """Move `tmp` to `path`, failing with FileExistsError rather than replacing a file there."""
    try:
        os.link(tmp, path)  # atomic and never clobbers
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links: check, then rename (a small race)
        if path.exists():
            raise FileExistsError(path) from None
        os.replace(tmp, path)
        return
    tmp.unlink()
