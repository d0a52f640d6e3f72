"""Every file reslog and resplot write for a user goes through here: exports, snapshots, the
viewer's settings and its local copies' index, mirrors' and backups' copies, artifacts.

Two rules, whoever else can write the folder (a shared /tmp, a team's scratch space):
- nothing is created or written through a link, and no file is created under a name another
  user could guess and plant first. A new file's content goes to a fresh file with a random
  name beside the target (`mkstemp`: O_CREAT|O_EXCL|O_NOFOLLOW), or, for writers that need a
  path (SQLite, pyarrow, matplotlib), into a new 0700 folder beside it (`mkdtemp`), where no one
  else can put anything; then `os.replace` moves it over the target. A link planted at the
  target is replaced, never followed: the file it points to is not touched.
- private files (settings, indexes, mirrors, logs, temporary files) are 0600 in 0700 folders,
  whatever the umask; other files get the mode a plain `open()` would give (0666 & ~umask).

Standard library only, Python 3.8 syntax: `schema/store/sqlite_file.py` uses it and the agent's
archive ships both (reslog/agent/bundle.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Union

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700

PathLike = Union[str, "os.PathLike[str]"]


def umask() -> int:
    """This process's umask, read without changing it where Linux shows it (/proc)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, hence last)
    os.umask(mask)
    return mask


def default_mode() -> int:
    """The mode a plain open(path, "w") would give a new file."""
    return 0o666 & ~umask()


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def _trusted(uid: int) -> bool:
    return not hasattr(os, "getuid") or uid in (os.getuid(), 0)


def check_not_planted(path: PathLike) -> None:
    """Refuse (PermissionError) a link at `path` that another user made: they chose what it
    points to (your store, your folder), and what is written through it lands there."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there, no link: the caller's own open says why it cannot be made
    if stat.S_ISLNK(info.st_mode) and not _trusted(info.st_uid):
        raise PermissionError(
            errno.EPERM,
            f"is a link made by {_owner_name(info.st_uid)}: remove it or choose another name",
            os.fspath(path),
        )


def make_private_folders(path: PathLike) -> Path:
    """Create `path` and its missing parents 0700, exactly (whatever the umask); folders that
    exist are left as they are, unless `path` is a link another user made or a folder another
    user owns (PermissionError: they could read or swap what is written there)."""
    path = Path(path)
    missing = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_FOLDER)
        except FileExistsError:  # made meanwhile (another thread or process)
            continue
        os.chmod(folder, PRIVATE_FOLDER)
    check_not_planted(path)
    owner = os.stat(path).st_uid
    if not _trusted(owner):
        raise PermissionError(
            errno.EPERM,
            f"belongs to {_owner_name(owner)}, who could read or replace what is kept there; "
            "use a folder of your own",
            str(path),
        )
    return path


def private_folder(path: PathLike) -> Path:
    """`path` as an app's own private folder (resplot's settings and data folders): created
    0700 when missing, made 0700 when it is this user's and wider (as an older version left
    it). A link, something else than a folder, or a folder another user owns is refused
    (PermissionError, FileExistsError): what is written there could be read or swapped. Only
    this user's own folder is tightened (root's too, when root runs it)."""
    path = make_private_folders(path)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise PermissionError(
            errno.EPERM, "is a link: a private folder is used only where it is itself", str(path)
        )
    if not stat.S_ISDIR(info.st_mode):
        raise FileExistsError(errno.EEXIST, "is not a folder", str(path))
    if stat.S_IMODE(info.st_mode) != PRIVATE_FOLDER:
        os.chmod(path, PRIVATE_FOLDER)
    return path


def _set_mode(fd: int, path: PathLike, mode: int) -> None:
    if hasattr(os, "fchmod"):
        os.fchmod(fd, mode)
    else:  # Windows (resplot's settings there): only the read-only bit means anything
        os.chmod(path, mode)


def _temp_prefix(target: Path) -> str:
    return f".{target.name[:100]}."


@contextlib.contextmanager
def replacing(
    target: PathLike,
    mode: str = "w",
    *,
    file_mode: int | None = None,
    encoding: str | None = None,
    newline: str | None = None,
) -> Iterator[IO[Any]]:
    """An open file (`mode` "w" or "wb") whose content becomes `target` when the block ends
    without an error: written to a fresh file with a random name beside it, synced, given
    `file_mode` (None: the umask's default; PRIVATE_FILE for private files), then moved over
    `target` with os.replace. On an error the temporary file is removed and `target` is left
    as it was."""
    if mode not in ("w", "wb"):
        raise ValueError(f"replacing() writes whole files: mode 'w' or 'wb', not {mode!r}")
    target = Path(target)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
    try:
        if mode == "w":
            fh: IO[Any] = os.fdopen(fd, "w", encoding=encoding or "utf-8", newline=newline)
        else:
            fh = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        with fh:
            yield fh
            fh.flush()
            _set_mode(fh.fileno(), tmp, default_mode() if file_mode is None else file_mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def replacing_path(target: PathLike, *, file_mode: int | None = None) -> Iterator[Path]:
    """A path for a writer that opens files by name (SQLite, pyarrow, matplotlib, tokenizers):
    inside a new 0700 folder beside `target`, so no one else can plant a link there or at the
    names the writer derives from it (SQLite's -journal). When the block ends without an error
    the file is given `file_mode` (None: the umask's default), synced and moved over `target`;
    the folder is removed either way."""
    target = Path(target)
    folder = Path(tempfile.mkdtemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent))
    try:
        path = folder / target.name
        yield path
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
        try:
            _set_mode(fd, path, default_mode() if file_mode is None else file_mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(path, target)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_file(target: PathLike, data: str | bytes, *, private: bool = False) -> None:
    """`data` as the whole of `target` (see replacing); 0600 when `private`."""
    file_mode = PRIVATE_FILE if private else None
    if isinstance(data, bytes):
        with replacing(target, "wb", file_mode=file_mode) as fh:
            fh.write(data)
    else:
        with replacing(target, "w", file_mode=file_mode) as fh:
            fh.write(data)


def copy_file(source: PathLike, target: PathLike, *, file_mode: int | None = None) -> None:
    """A copy of `source` (its content and modification time) as `target` (see replacing)."""
    with open(source, "rb") as src, replacing(target, "wb", file_mode=file_mode) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.flush()
        st = os.fstat(src.fileno())
        os.utime(dst.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
