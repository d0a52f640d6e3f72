"""The agent's request loop: one reply frame per request frame, errors as error frames.

A bad request or an unreadable store is an error frame, never a dead agent; only a stream that
cannot be re-synchronised (a broken frame prefix) ends it.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import select
import sqlite3
import sys
import threading
import zlib

from reslog.agent.store import Store, is_sqlite, req_int
from reslog.agent.wire import (
    COMPRESS_MIN,
    MAX_REQUEST,
    PROTOCOL,
    AgentError,
    ProtocolError,
    read_frame,
    write_frame,
)
from schema.store import chunk_read
from schema.store.revision import HEAD_REVISION

AGENT_VERSION = "2.0"  # 2.0: rollups (series rows, tiles, raw pages); no overview sampling


# How this host folds fine tiles (`hello`'s "fold"): "numpy" where the interpreter running the
# agent has it, else "builtins" (~10x slower a point; resplot keeps a page's fine views to a
# tenth as many points then). RESLOG_AGENT_NUMPY=0 on the host keeps the agent off numpy.
NO_NUMPY_ENV = "RESLOG_AGENT_NUMPY"


def host_fold() -> str:
    """ "numpy" or "builtins": what the agent folds fine tiles with on this host.

    The agent runs under `python -I -S` (no `site`: a quicker boot, nothing from the user's
    environment), so the interpreter's site-packages, where numpy lives, are not on sys.path:
    they are appended here (after the standard library; the archive's own modules come first
    whatever they hold) without running their .pth files. numpy itself is imported later, on
    a thread (Agent.after_reply), so that neither this reply nor the first poll waits for it."""
    if os.environ.get(NO_NUMPY_ENV, "").strip() == "0":
        return "builtins"
    if "numpy" not in sys.modules:
        import importlib.util

        if importlib.util.find_spec("numpy") is None:
            for folder in _site_folders():
                if folder not in sys.path and os.path.isdir(folder):
                    sys.path.append(folder)
            importlib.invalidate_caches()
            if importlib.util.find_spec("numpy") is None:
                return "builtins"
    return "numpy"


def import_numpy_meanwhile() -> None:
    """numpy (and the fold and codec modules on it) imported on a thread: the first tiles that
    need it wait only for what is left of it (chunk_read.numpy_modules takes the import lock)."""
    threading.Thread(target=chunk_read.numpy_fold, daemon=True, name="reslog-agent-numpy").start()


def _site_folders() -> list:
    """The site-packages folders `site` would add for this interpreter: its virtual
    environment's (a pyvenv.cfg beside or above it), then its installation's."""
    import site

    prefixes = []
    exe = os.path.dirname(os.path.abspath(sys.executable))
    for folder in (exe, os.path.dirname(exe)):
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            prefixes.append(folder)
    prefixes += [sys.prefix, sys.exec_prefix]
    try:
        return site.getsitepackages(list(dict.fromkeys(prefixes)))
    except Exception:  # an unusual installation: builtins, as without numpy
        return []


def _node() -> str:
    """This host's name (platform.node() without importing platform at every boot)."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return uname().nodename
    import platform

    return platform.node()


MAX_GLOB_FOLDERS = 20_000  # folders one discover may list: `/**/*.db` walked the whole disk


def discover(patterns) -> dict:
    """Store paths for paths, directories (their *.db) and globs; `~` expands on this host.
    Only regular files are stores (a FIFO named *.db hung the agent for good)."""
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise AgentError("BadRequest", "patterns must be a list of strings")
    found, missing = [], []
    for pattern in patterns:
        expanded = os.path.abspath(os.path.expanduser(pattern))
        # A path that exists is taken as written, even with glob characters in its name
        # ("runs/[ablation]/reslog.db"); only a path that does not exist is a pattern.
        if os.path.isdir(expanded):
            inside = os.path.join(glob.escape(expanded), "*.db")
            hits = [p for p in glob.glob(inside) if is_sqlite(p)]
        elif os.path.exists(expanded):
            hits = [expanded]  # named explicitly: opening it reports what is wrong with it
        elif glob.has_magic(expanded):
            hits = [
                p
                for p in bounded_glob(expanded, pattern)
                if is_sqlite(p) and not p.endswith(("-wal", "-shm"))
            ]
        else:
            hits = []
        if not hits:
            missing.append(pattern)
        for hit in hits:
            if hit not in found:
                found.append(hit)
    return {"stores": sorted(found), "missing": missing}


def bounded_glob(pattern: str, shown: str, limit: int = MAX_GLOB_FOLDERS) -> list:
    """glob.glob(pattern, recursive=True) for an absolute `pattern`, listing at most `limit`
    folders (AgentError naming `shown` past that) and never following a link into a folder
    under `**` (a loop). Names starting with "." match only a part that starts with "."."""
    parts = [part for part in pattern.split(os.sep) if part]
    out: list = []
    left = [limit]

    def listing(folder: str) -> list:
        left[0] -= 1
        if left[0] < 0:
            raise AgentError(
                "BadRequest",
                f"{shown}: the search listed {limit} folders without finishing; narrow the "
                "pattern (a folder instead of **, or fewer levels)",
            )
        try:
            with os.scandir(folder) as entries:
                return [(e.name, e.is_dir(), e.is_dir(follow_symlinks=False)) for e in entries]
        except OSError:
            return []

    def expand(base: str, i: int) -> None:
        if i == len(parts):
            out.append(base)
            return
        part = parts[i]
        if part == "**":
            expand(base, i + 1)  # no folder at all
            for name, _is_dir, real_dir in listing(base):
                if name.startswith("."):
                    continue
                if real_dir:
                    expand(os.path.join(base, name), i)
                elif i == len(parts) - 1:  # a last ** matches files too
                    out.append(os.path.join(base, name))
            return
        if not glob.has_magic(part):
            path = os.path.join(base, part)
            if (i == len(parts) - 1 or os.path.isdir(path)) and os.path.lexists(path):
                expand(path, i + 1)
            return
        for name, is_dir, _real in listing(base):
            if name.startswith(".") and not part.startswith("."):
                continue
            if fnmatch.fnmatchcase(name, part) and (i == len(parts) - 1 or is_dir):
                expand(os.path.join(base, name), i + 1)

    expand(os.sep, 0)
    return sorted(set(out))


class Agent:
    def __init__(self) -> None:
        self.stores: dict = {}
        self.fold: str | None = None  # host_fold(), found at the first hello
        self.numpy_due = False  # numpy is to be imported after the next store reply

    def after_reply(self, op) -> None:
        """Once the first reply read from a store is written, start numpy's import. Begun at
        hello, it held the GIL through the first poll on a loaded host (the 6.8M store's
        series rows: 113 ms against 20 at load 7); from here it overlaps the client's layout
        of the page, which comes before the first tiles are asked for."""
        if self.numpy_due and op in ("poll", "points", "raw", "tiles", "chunks"):
            self.numpy_due = False
            import_numpy_meanwhile()

    def store(self, req: dict) -> Store:
        path = req.get("store")
        if not isinstance(path, str) or not path:
            raise AgentError("BadRequest", "request needs a 'store' path")
        path = os.path.abspath(os.path.expanduser(path))
        store = self.stores.get(path)
        if store is not None:
            try:
                st = os.stat(path)
                same = (st.st_dev, st.st_ino) == store.ident
            except OSError:
                same = False
            if same:
                return store
            # Replaced or deleted since it was opened: read the file now at that path.
            store.close()
            del self.stores[path]
        store = self.stores[path] = Store(path)
        return store

    def handle(self, req: dict) -> tuple:
        """(reply header, payload bytes) of one request."""
        op = req.get("op")
        if op == "hello":
            if self.fold is None:
                self.fold = host_fold()
                self.numpy_due = self.fold == "numpy" and "numpy" not in sys.modules
            return {
                "agent": AGENT_VERSION,
                "protocol": PROTOCOL,
                "schema": HEAD_REVISION,
                "python": sys.version.split()[0],
                "sqlite": sqlite3.sqlite_version,
                "pid": os.getpid(),
                "host": _node(),
                "fold": self.fold,
            }, b""
        if op == "discover":
            return discover(req.get("patterns")), b""
        if op in ("poll", "points", "raw", "tiles"):
            header, sections = self.store(req).read(op, req)
            if req.get("compress") and sections.size >= COMPRESS_MIN:
                sections.shuffle()  # then compressed by serve()
            return header, sections.payload()
        if op == "chunks":  # resplot sync: stored chunks as they are
            header, sections = self.store(req).read(op, req)
            req.pop("compress", None)  # deflated blobs: zlib again would cost CPU for nothing
            return header, sections.payload()
        raise AgentError("BadRequest", f"unknown op {op!r}")

    def close(self) -> None:
        for store in self.stores.values():
            store.close()
        self.stores.clear()


def _error(rid, kind: str, message: str) -> dict:
    return {"id": rid, "ok": False, "error": {"type": kind, "message": message}}


def serve(rfile, wfile) -> int:
    """Answer frames until EOF or a `bye`; returns the process exit status."""
    agent = Agent()
    try:
        while True:
            try:
                frame = read_frame(rfile, MAX_REQUEST)
            except AgentError as exc:  # a whole frame with a bad header: the stream is in sync
                write_frame(wfile, _error(None, exc.kind, str(exc)))
                continue
            except ProtocolError as exc:
                write_frame(wfile, _error(None, "ProtocolError", str(exc)))
                return 2
            if frame is None:
                return 0
            req, _payload = frame
            rid = req.get("id")
            if req.get("op") == "bye":
                write_frame(wfile, {"id": rid, "ok": True})
                return 0
            try:
                reply, payload = agent.handle(req)
            except AgentError as exc:
                reply, payload = _error(rid, exc.kind, str(exc)), b""
            except sqlite3.Error as exc:
                reply, payload = _error(rid, "StoreError", f"cannot read store: {exc}"), b""
            except Exception as exc:  # a bug here must not kill the agent mid-session
                import traceback  # here: ~25 ms of every boot otherwise

                tb = traceback.format_exc(limit=3).strip().splitlines()[-3:]
                msg = f"agent failed on {req.get('op')!r}: {exc} ({' | '.join(tb)})"
                reply, payload = _error(rid, "AgentBug", msg), b""
            else:
                reply["id"] = rid
                reply["ok"] = True
                if req.get("compress") and len(payload) >= COMPRESS_MIN:
                    payload = zlib.compress(payload, 1)
                    reply["z"] = True
            try:
                write_frame(wfile, reply, payload)
            except AgentError as exc:  # raised before a byte was written: still in step
                write_frame(wfile, _error(rid, exc.kind, str(exc)))
            agent.after_reply(req.get("op"))
    finally:
        agent.close()


def watch_client(out_fd: int, parent: int, every: float = 1.0) -> None:
    """End this process when its client is gone, even while a request holds the main thread
    (a store on a stalled disk, a long read): the reader of its replies closed them (POLLERR or
    POLLHUP on stdout), or its parent (sshd's session, resplot) died. Each cut connection's
    agent otherwise stayed on the host for good."""
    if not hasattr(select, "poll"):
        return
    poller = select.poll()
    poller.register(out_fd, 0)  # errors and hang-ups are always reported
    while True:
        if poller.poll(every * 1000) or os.getppid() != parent:
            os._exit(0)


def main() -> int:
    rfile, wfile = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must never corrupt the frame stream
    threading.Thread(
        target=watch_client,
        args=(wfile.fileno(), os.getppid()),
        daemon=True,
        name="reslog-agent-watch",
    ).start()
    try:
        return serve(rfile, wfile)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


__all__ = ["Agent", "discover", "main", "req_int", "serve"]
