"""The window's "keep a local copy": sources mirrored into local stores as they are watched.

Each kept source is synced (resplot.sources.sync) into its own mirror under the data directory, on a
worker thread, every `interval` seconds. When a kept source stops answering (the rented box was
released, its disk is gone) its mirror is shown in its place, marked "(local copy)"; when it
answers again, the mirror is hidden again (the runs would otherwise show twice). The list of kept
sources is `index.json` in that directory; mirrors are never deleted by resplot. The index and
the mirrors name hosts, users and store paths: they are 0600 in 0700 folders (resplot's data
folder and its `mirrors` made private when they are the default ones).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import threading
from pathlib import Path

from PyQt5.QtCore import QObject, pyqtSignal

from resplot.sources.base import AuthFailed
from resplot.sources.client import AgentConnectionError
from resplot.sources.spec import parse_spec
from resplot.sources.sync import Mirror
from resplot.ssh.options import SSHOptions
from schema.store.errors import StoreError
from schema.store.user_files import make_private_folders, private_folder, write_file

log = logging.getLogger(__name__)


def data_dir(platform: str | None = None, environ: dict[str, str] | None = None) -> Path:
    """Where resplot keeps data on this kind of machine: `%LOCALAPPDATA%\\resplot` on Windows,
    `~/Library/Application Support/resplot` on macOS, `$XDG_DATA_HOME/resplot` (default
    `~/.local/share/resplot`) elsewhere."""
    platform = platform or sys.platform
    env = os.environ if environ is None else environ
    if platform == "win32":
        import ntpath

        base = env.get("LOCALAPPDATA") or ntpath.join(str(Path.home()), "AppData", "Local")
        return Path(ntpath.join(base, "resplot"))
    if platform == "darwin":
        return Path("~/Library/Application Support/resplot").expanduser()
    return Path(env.get("XDG_DATA_HOME") or "~/.local/share").expanduser() / "resplot"


def mirror_name(spec: str) -> str:
    """A file name for a spec's mirror: readable, and unique by a hash of the whole spec."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[:60] or "source"
    return f"{readable}-{hashlib.sha1(spec.encode()).hexdigest()[:8]}.db"


class LocalCopies(QObject):
    synced = pyqtSignal(str, str)  # spec, what the sync copied
    hostGone = pyqtSignal(str, str, str)  # spec, mirror path, why: show the copy
    hostBack = pyqtSignal(str)  # spec answers again: hide the copy

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        ssh: SSHOptions | None = None,
        interval: float = 60.0,
    ) -> None:
        super().__init__()
        self.own_folders = not directory  # resplot's own: made private, links refused
        self.directory = Path(directory) if directory else data_dir() / "mirrors"
        self.index_path = self.directory / "index.json"
        self.ssh = ssh
        self.interval = interval
        self.kept: dict[str, str] = self._load()  # spec -> mirror file name
        self.gone: set[str] = set()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- which sources ------------------------------------------------------------------------
    def is_kept(self, spec: str) -> bool:
        return spec in self.kept

    def mirror_path(self, spec: str) -> Path:
        return self.directory / self.kept.get(spec, mirror_name(spec))

    def keep(self, spec: str) -> Path:
        self.kept[spec] = mirror_name(spec)
        self._save()
        self._wake.set()
        return self.mirror_path(spec)

    def drop(self, spec: str) -> None:
        """Stop syncing it; its mirror file stays where it is."""
        self.kept.pop(spec, None)
        self.gone.discard(spec)
        self._save()

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.index_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("cannot read %s (%s): starting with no local copies", self.index_path, exc)
            return {}
        return {str(k): str(v) for k, v in data.get("kept", {}).items()}

    def _save(self) -> None:
        self.make_directory()
        write_file(self.index_path, json.dumps({"kept": self.kept}, indent=1), private=True)

    def make_directory(self) -> None:
        """The mirrors' folder, private: 0700 (resplot's data folder too, when the default)."""
        if self.own_folders:
            private_folder(self.directory.parent)
            private_folder(self.directory)
        else:
            make_private_folders(self.directory)

    # -- the worker ---------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True, name="local-copies")
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def sync_now(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            for spec in list(self.kept):
                if self._stop.is_set():
                    return
                self.sync_one(spec)
            self._wake.wait(self.interval)

    def sync_one(self, spec: str) -> None:
        path = self.mirror_path(spec)
        try:
            self.make_directory()
            with Mirror(path) as mirror:
                report = mirror.sync(parse_spec(spec), ssh=self.ssh)
        except (AgentConnectionError, AuthFailed, StoreError, TimeoutError, OSError) as exc:
            log.info("local copy of %s: %s", spec, exc)
            if spec not in self.gone and path.exists():
                self.gone.add(spec)
                self.hostGone.emit(spec, str(path), str(exc))
            return
        if spec in self.gone:
            self.gone.discard(spec)
            self.hostBack.emit(spec)
        self.synced.emit(spec, report.line())


class ShownCopies(QObject):
    """The window's side of LocalCopies: a File menu entry to keep the selected source, and the
    copy of a source that does not answer shown as `<source> (local copy)` until it does."""

    def __init__(self, window, copies: LocalCopies) -> None:
        super().__init__(window)
        self.window, self.copies = window, copies
        self.labels: dict[str, str] = {}  # source spec -> its copy's poller label
        from PyQt5.QtWidgets import QAction

        action = QAction("Keep a local copy of the selected source", window)
        action.triggered.connect(lambda: self.keep(self.selected_spec()))
        menu = window.file_menu
        menu.insertAction(menu.actions()[2], action)  # after add/remove, before Quit
        copies.synced.connect(lambda spec, line: window.on_error(f"local copy of {spec}: {line}"))
        copies.hostGone.connect(self.show)
        copies.hostBack.connect(self.hide)

    def keep(self, spec: str | None) -> None:
        if spec is None:
            return
        try:
            path = self.copies.keep(spec)
        except OSError as exc:  # the data folder is a link or another user's: said, not kept
            self.window.on_error(f"cannot keep a local copy of {spec}: {exc}")
            return
        self.window.on_error(f"keeping a local copy of {spec} in {path}")

    def selected_spec(self) -> str | None:
        item = self.window.tree.currentItem()
        while item is not None and item.parent() is not None:
            item = item.parent()
        if item is None:
            return None
        label = item.data(0, 0x0100)  # Qt.UserRole: the source's label
        return next((s for s, lab in self.window.source_labels.items() if lab == label), None)

    def show(self, spec: str, path: str, why: str) -> None:
        poller = self.window.poller
        if poller is None or spec in self.labels:
            return
        name = self.window.source_labels.get(spec, spec)
        label = poller.add_source(parse_spec(path), label=f"{name} (local copy)")
        self.labels[spec] = label
        self.window.tree.add_source_label(label)
        self.window.on_error(f"{name} does not answer ({why}); showing its local copy")

    def hide(self, spec: str) -> None:
        label = self.labels.pop(spec, None)
        if label is not None and self.window.poller is not None:
            self.window.poller.remove_source(label)
            self.window.cache.drop_source(label)
            self.window.schedule_redraw()
