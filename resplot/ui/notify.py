"""Desktop notifications for what `reslog watch` would print: a run's alerts (NaN loss, stalled,
crashed, quiet, throttling...: schema.rules.alerts says what each kind means) and its end (finished,
failed, killed), each said once when it starts.

Shown through the system tray (QSystemTrayIcon). Where there is no tray (some Linux desktops, a
remote X session, offscreen), the window's status bar says so once and carries the messages.
Muting is per run and kind ("stalled", "quiet", "nan", "finished", or "*" for all of a
run's), kept in the view settings so it survives a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from PyQt5.QtWidgets import QApplication, QStyle, QSystemTrayIcon, QWidget

from reslog.text import safe
from resplot.data.alerts import Alert
from resplot.data.model import RunInfo, RunRef
from schema.rules.alerts import END_STATUSES, RENAMED

ALL_KINDS = "*"


@dataclass(frozen=True)
class Note:
    run: RunRef
    kind: str
    title: str
    message: str
    name: str = ""  # the run's (an alert's title is "name: kind")


class Notifier:
    """Turns the window's alerts and run statuses into notifications, each once per onset."""

    def __init__(
        self,
        parent: QWidget,
        muted: Iterable[tuple[str, str]] = (),
        say: Callable[[str], None] = lambda text: None,
    ) -> None:
        # (run uid, kind), kinds saved under an earlier name read as what they are now called
        self.muted: set[tuple[str, str]] = {(uid, RENAMED.get(k, k)) for uid, k in muted}
        self.say = say
        self.shown: list[Note] = []
        self._active: set[tuple[RunRef, str]] = set()
        self._status: dict[RunRef, str] = {}
        self._started = False
        self.tray: QSystemTrayIcon | None = None
        if QSystemTrayIcon.isSystemTrayAvailable():
            style = QApplication.style()
            icon = style.standardIcon(QStyle.SP_MessageBoxWarning) if style else None
            self.tray = QSystemTrayIcon(icon, parent) if icon else QSystemTrayIcon(parent)
            self.tray.show()
        self._said_no_tray = False

    def is_muted(self, ref: RunRef, kind: str) -> bool:
        return (ref.uid, kind) in self.muted or (ref.uid, ALL_KINDS) in self.muted

    def set_muted(self, ref: RunRef, kind: str, muted: bool) -> None:
        (self.muted.add if muted else self.muted.discard)((ref.uid, kind))

    def update(self, alerts: dict[RunRef, list[Alert]], runs: Iterable[RunInfo]) -> list[Note]:
        """What is new since the last call (the first call only learns the baseline)."""
        names = {}
        notes: list[Note] = []
        for run in runs:
            names[run.ref] = run.name
            before = self._status.get(run.ref)
            self._status[run.ref] = run.status
            if self._started and before not in (None, run.status) and run.status in END_STATUSES:
                notes.append(Note(run.ref, run.status, f"{run.name} {run.status}", ""))
        active = set()
        for ref, found in alerts.items():
            for alert in found:
                active.add((ref, alert.kind))
                if self._started and (ref, alert.kind) not in self._active:
                    name = names.get(ref, ref.uid[:8])
                    title = f"{name}: {_words(alert.kind)}"
                    notes.append(Note(ref, alert.kind, title, alert.message, name))
        self._active = active
        self._started = True
        notes = [n for n in notes if not self.is_muted(n.run, n.kind)]
        for note in notes:
            self._show(note)
        return notes

    def _show(self, note: Note) -> None:
        # A run's name and an alert's text come from the store: shown, never obeyed.
        note = Note(note.run, note.kind, safe(note.title), safe(note.message), safe(note.name))
        self.shown.append(note)
        if self.tray is not None:
            self.tray.showMessage(note.title, note.message or note.title)
            return
        if note.message and note.name and note.message.startswith(_words(note.kind)):
            # "alpha: stalled after step 7", not "alpha: stalled: stalled after step 7": the
            # status bar is narrow, and cuts the end off.
            text = f"{note.name}: {note.message}"
        elif note.message:
            text = f"{note.title}: {note.message}"
        else:
            text = note.title
        if not self._said_no_tray:
            self._said_no_tray = True
            text += " (no system tray on this desktop: notifications show in this status bar)"
        self.say(text)


def _words(kind: str) -> str:
    """An alert's kind as words (`nan_inf` -> `nan inf`)."""
    return kind.replace("_", " ")
