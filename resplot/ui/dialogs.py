"""Dialogs: adding a source, and the unknown-host-key question (asked on the GUI thread)."""

from __future__ import annotations

import threading

from PyQt5.QtCore import QObject, Qt, pyqtSignal, pyqtSlot
from PyQt5.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QMessageBox,
    QVBoxLayout,
    QWidget,
)

SOURCE_HELP = """<p>A store to watch, one of:</p>
<ul>
<li><code>runs/reslog.db</code> or a glob <code>~/exp/*/runs/reslog.db</code> (this machine)</li>
<li><code>gpu-box:runs/reslog.db</code> (a host from <code>~/.ssh/config</code>; globs allowed)</li>
<li><code>ssh://user@gpu-box:2222/home/me/runs/reslog.db</code></li>
<li><code>postgresql+psycopg://user@db-host/reslog</code></li>
</ul>"""


class AddSourceDialog(QDialog):
    def __init__(self, parent: QWidget | None = None, initial: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Add source")
        self.edit = QLineEdit(initial, self)
        self.edit.setPlaceholderText("host:path/to/reslog.db")
        self.edit.setMinimumWidth(460)
        help_label = QLabel(SOURCE_HELP, self)
        help_label.setTextFormat(Qt.RichText)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(help_label)
        layout.addWidget(self.edit)
        layout.addWidget(buttons)

    def spec(self) -> str:
        return self.edit.text().strip()

    @classmethod
    def ask(cls, parent: QWidget | None = None) -> str | None:
        dialog = cls(parent)
        return dialog.spec() or None if dialog.exec_() == QDialog.Accepted else None


def host_key_message(host: str, key_type: str, fingerprint: str) -> str:
    return (
        f"The authenticity of host '{host}' can't be established.\n\n"
        f"{key_type} key fingerprint is {fingerprint}.\n\n"
        "Accept it and pin it in ~/.ssh/known_hosts? Compare the fingerprint with the one the "
        "host's administrator gives you (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub)."
    )


def ask_host_key_now(host: str, key_type: str, fingerprint: str, parent=None) -> bool:
    """The question itself; must run on the GUI thread."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Warning)
    box.setWindowTitle(f"Unknown host key: {host}")
    box.setText(host_key_message(host, key_type, fingerprint))
    box.setStandardButtons(QMessageBox.Yes | QMessageBox.No)
    box.setDefaultButton(QMessageBox.No)
    return box.exec_() == QMessageBox.Yes


class HostKeyAsker(QObject):
    """`ask_host_key(host, key_type, fingerprint) -> bool` callable from any thread.

    The poller's worker calls it while connecting; a dialog may only be shown on the GUI thread,
    so a call from another thread is handed over with a blocking queued signal and waits for the
    answer. `answer` replaces the dialog (tests, or a policy).
    """

    _request = pyqtSignal(str, str, str)

    def __init__(self, parent: QWidget | None = None, answer=None) -> None:
        super().__init__()
        app = QApplication.instance()
        if app is not None:  # the Qt GUI thread is the main thread
            self.moveToThread(app.thread())
        self._parent = parent
        self._answer_fn = answer or (lambda h, t, f: ask_host_key_now(h, t, f, self._parent))
        self._result = False
        self._lock = threading.Lock()  # one question at a time
        self._request.connect(self._ask, Qt.BlockingQueuedConnection)
        self.asked: list[tuple[str, str, str]] = []

    @pyqtSlot(str, str, str)
    def _ask(self, host: str, key_type: str, fingerprint: str) -> None:
        self.asked.append((host, key_type, fingerprint))
        self._result = bool(self._answer_fn(host, key_type, fingerprint))

    def __call__(self, host: str, key_type: str, fingerprint: str) -> bool:
        with self._lock:
            if threading.current_thread() is threading.main_thread():
                self._ask(host, key_type, fingerprint)
            else:
                self._request.emit(host, key_type, fingerprint)
            return self._result


def ask_host_key(host: str, key_type: str, fingerprint: str) -> bool:
    """Module-level form of the prompt for callers without a window (GUI thread only)."""
    return ask_host_key_now(host, key_type, fingerprint)
