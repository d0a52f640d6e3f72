"""A SQLite store file reached through the sqlite3 module itself: read-only, or copied whole;
and the modes a new store file and its folders get.

A store holds a live run's command line, config and tracebacks: it is created 0600 in folders
created 0700 (SQLite gives its -wal and -shm the database file's mode), unless RESLOG_STORE_MODE
says otherwise (e.g. 0640 or 0660 for a group that shares the stores; folders then get x where
the file mode has r). An existing file or folder is never changed.

Standard library only, Python 3.8 syntax: the agent's archive ships it (reslog/agent/bundle.py).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from schema.store.user_files import replacing_path

DEFAULT_STORE = "runs/reslog.db"  # the store when neither an argument nor $RESLOG_STORE names one
MODE_ENV = "RESLOG_STORE_MODE"
DEFAULT_FILE_MODE = 0o600


def file_mode() -> int:
    """The mode of a new store file (or copy of one): RESLOG_STORE_MODE (octal), else 0600."""
    value = os.environ.get(MODE_ENV, "").strip()
    if not value:
        return DEFAULT_FILE_MODE
    try:
        mode = int(value, 8)
    except ValueError:
        raise ValueError(f"{MODE_ENV}={value!r} is not an octal file mode such as 0640") from None
    if not 0 <= mode <= 0o777 or not mode & 0o600 == 0o600:
        raise ValueError(f"{MODE_ENV}={value!r}: the owner must keep read and write (0600-0777)")
    return mode


def folder_mode(mode: int) -> int:
    """A folder's mode for files of `mode`: x wherever r is (0600 → 0700, 0640 → 0750)."""
    return mode | (mode & 0o444) >> 2


def make_folders(folder: str | os.PathLike[str]) -> None:
    """Create `folder` and its missing parents with folder_mode(file_mode()), exactly (umask
    aside); folders that exist are left as they are."""
    folder = Path(folder)
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    if not folder.is_dir():  # the nearest existing one is a file: say so, as mkdir -p would
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(folder))
    mode = folder_mode(file_mode())
    for path in reversed(missing):
        try:
            path.mkdir(mode)
        except FileExistsError:  # made meanwhile (another rank): keep it as it is
            if not path.is_dir():
                raise
            continue
        os.chmod(path, mode)


def create_file(path: str | os.PathLike[str]) -> bool:
    """Create `path` empty with file_mode(), exactly; False when a file is there already. A link
    to nothing there (planted, where others can write the folder) is refused, as SQLite would
    otherwise create the file it points to."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(os.fspath(path), flags, DEFAULT_FILE_MODE)
    except FileExistsError:
        if os.path.islink(path) and not os.path.exists(path):
            raise FileExistsError(
                errno.EEXIST,
                "a link to nothing is there: remove it or choose another name",
                os.fspath(path),
            ) from None
        return False
    try:
        os.fchmod(fd, file_mode())
    finally:
        os.close(fd)
    return True


NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "lustre", "gpfs", "afs"}


def filesystem_type(path: Path) -> str | None:
    """fstype of the mount holding `path` (Linux /proc/mounts), None when it cannot be told."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    target = str(path.resolve())
    best, best_type = "", None
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        mount_point = parts[1].replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, parts[2]
    return best_type


def readonly_uri(path: str | os.PathLike[str], immutable: bool = False) -> str:
    """SQLite URI filename opening `path` read-only (mode=ro: the reader can never create,
    modify or lock out the file), for `sqlite3.connect(..., uri=True)`. The path is
    percent-encoded (RFC 3986), so "?", "#" and "%" in it name that file and no other.
    `immutable`: the file is not changing meanwhile (no locks, no WAL read: a quick probe)."""
    # absolute(), not abspath(): "link/.." is left for the OS to resolve, as open() would.
    uri = "file:" + quote(str(Path(path).absolute()), safe="/") + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


# What SQLite says when it cannot set up reading a WAL database read-only (no -shm it may create).
_CANNOT_READ_WAL = ("readonly database", "unable to open database file")


def connect_readonly(path: str | os.PathLike[str], **kw) -> sqlite3.Connection:
    """A read-only connection to the SQLite file at `path` (mode=ro), checked with one read.

    A WAL database in a folder this user cannot write (a shared archive, a read-only mount),
    with no -shm file to use, cannot be read so: "attempt to write a readonly database". When
    no writer is live there (its -wal file missing or empty: nothing waits in it), the file is
    opened immutable instead, and read as it is. Otherwise sqlite3.OperationalError says what
    is wrong and what to do."""
    conn = sqlite3.connect(readonly_uri(path), uri=True, **kw)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if not any(text in str(exc) for text in _CANNOT_READ_WAL):
            raise
        wal = f"{os.fspath(path)}-wal"
        if os.path.exists(wal) and os.path.getsize(wal) > 0:
            raise sqlite3.OperationalError(
                f"its folder is not writable by this user and its write-ahead log ({wal}) holds "
                "data that can only be read with a -shm file SQLite must create there: make the "
                "folder writable, or copy the store together with its -wal file"
            ) from None
    return sqlite3.connect(readonly_uri(path, immutable=True), uri=True, **kw)


def backup_into(source: sqlite3.Connection, target: str | os.PathLike[str]) -> None:
    """Copy the database open as `source` into the file `target` through SQLite's backup API:
    a consistent snapshot, WAL included, safe beside concurrent readers and writers. The copy
    is made in a private folder beside `target` and moved over it whole (schema.store.user_files:
    never through a link planted at `target` or at its -journal), with file_mode() (a copy
    holds what the store holds)."""
    with replacing_path(target, file_mode=file_mode()) as tmp:
        dst = sqlite3.connect(os.fspath(tmp))
        try:
            source.backup(dst)
        finally:
            dst.close()
