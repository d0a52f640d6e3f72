"""`reslog import tensorboard|wandb|csv|parquet`: bring history written by other tools into a
store.

Each importer reads its input completely (a bad or truncated file is an ImportError_ naming the
file, before anything is written), then writes each run in one transaction (runs.write_run):
nothing is ever half-imported. A run's uid is derived from what it came from,
so importing the same input again finds it and skips it.

Every input file is opened through `open_regular`: anything but a regular file (a FIFO named
like an event file would block the import forever, a device never ends) is refused in one line.
Paths are shown through `shown`: a name that is not UTF-8 is printed and stored with its bytes
escaped (`\\xff`), never raised as a UnicodeEncodeError.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class ImportError_(Exception):  # not the builtin ImportError
    """Bad input: the message is one line that names the file."""


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def shown(path: str | os.PathLike[str]) -> str:
    """`path` as text that prints and stores anywhere: bytes that are not UTF-8 (a folder named
    in Latin-1) as `\\xNN` escapes instead of lone surrogates."""
    try:
        raw = os.fsencode(path)
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        raw = os.fspath(path).encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


def open_regular(path: str | os.PathLike[str]) -> int:
    """A file descriptor of `path` open for reading, after checking (on the open file, so
    nothing can be swapped in between) that it is a regular file. O_NONBLOCK: opening a FIFO
    returns at once instead of waiting for a writer that never comes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ImportError_(f"{shown(path)}: cannot open it ({exc.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise ImportError_(
            f"{shown(path)}: {kind}, not a regular file: not read (give a file, or a folder "
            "of files)"
        )
    os.set_blocking(fd, True)
    return fd


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """The whole content of the regular file `path` (ImportError_ for anything else)."""
    fd = open_regular(path)
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ImportError_(f"{shown(path)}: cannot read it ({exc.strerror or exc})") from None


def exists_as_file(path: Path) -> bool:
    """True for a path that exists and is not a folder (a file, or a FIFO or device that
    open_regular will refuse by name rather than call missing)."""
    return path.exists() and not path.is_dir()
