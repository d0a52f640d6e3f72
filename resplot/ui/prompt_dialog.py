"""The window's login dialog: a password, keyboard-interactive answers, a key passphrase.

Asked from the poller's worker threads (that is where connections are made), shown on the GUI
thread: `PromptAsker` hands each prompt over with a blocking queued signal, as
resplot.ui.dialogs.HostKeyAsker does for host keys.
"""

from __future__ import annotations

import threading

from PyQt5.QtCore import QObject, Qt, pyqtSignal, pyqtSlot
from PyQt5.QtWidgets import (
    QApplication,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from resplot.ssh.prompts import Answer, Prompt


class LoginDialog(QDialog):
    """One field per question, as the server words it; a secret field hides what is typed."""

    def __init__(self, prompt: Prompt, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(prompt.title)
        layout = QVBoxLayout(self)
        intro = {
            "password": f"{prompt.host} asks for a password.",
            "keyboard-interactive": f"{prompt.host} asks:",
            "passphrase": f"The key {prompt.key_path} is encrypted (to log in to {prompt.host}).",
        }[prompt.kind]
        for text in (intro, prompt.name, prompt.instructions):
            if text:
                label = QLabel(text, self)
                label.setWordWrap(True)
                label.setTextFormat(Qt.PlainText)  # server text is shown as sent, never as HTML
                layout.addWidget(label)
        form = QFormLayout()
        self.fields: list[QLineEdit] = []
        for q in prompt.questions:
            edit = QLineEdit(self)
            edit.setEchoMode(QLineEdit.Normal if q.echo else QLineEdit.Password)
            edit.setMinimumWidth(280)
            form.addRow(QLabel(q.text.strip(), self), edit)
            self.fields.append(edit)
        layout.addLayout(form)
        self.remember = QCheckBox("Remember in the system keyring", self)
        self.remember.setVisible(prompt.may_remember)
        layout.addWidget(self.remember)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.prompt = prompt

    def answer(self) -> Answer:
        remember = self.prompt.may_remember and self.remember.isChecked()
        return Answer([f.text() for f in self.fields], remember=remember)


class PromptAsker(QObject):
    """An `Asker` callable from any thread; the dialog runs on the GUI thread.

    `answer(dialog) -> bool` replaces `dialog.exec_()` (tests fill the fields and accept).
    """

    _request = pyqtSignal(object)

    def __init__(self, parent: QWidget | None = None, answer=None) -> None:
        super().__init__()
        app = QApplication.instance()
        if app is not None:
            self.moveToThread(app.thread())
        self._parent = parent
        self._run = answer or (lambda dialog: dialog.exec_() == QDialog.Accepted)
        self._result: Answer | None = None
        self._lock = threading.Lock()
        self._request.connect(self._ask, Qt.BlockingQueuedConnection)
        self.shown: list[LoginDialog] = []

    @pyqtSlot(object)
    def _ask(self, prompt: Prompt) -> None:
        dialog = LoginDialog(prompt, self._parent)
        self.shown.append(dialog)
        self._result = dialog.answer() if self._run(dialog) else None

    def __call__(self, prompt: Prompt) -> Answer | None:
        with self._lock:
            if threading.current_thread() is threading.main_thread():
                self._ask(prompt)
            else:
                self._request.emit(prompt)
            return self._result
