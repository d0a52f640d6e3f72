"""The window's status bar: the most severe alert, how many runs are shown, tiles loading, each
source's state; fields kept apart (a gap and a rule between them) and a long alert cut to its
room with "…" (its tooltip has all of it). At 1280 px the alert ran into the run count."""

from __future__ import annotations

from PyQt5.QtCore import Qt
from PyQt5.QtGui import QPainter
from PyQt5.QtWidgets import QFrame, QLabel, QSizePolicy, QStatusBar, QWidget

FIELD_GAP_PX = 8


class ElidedLabel(QLabel):
    """A one-line label that cuts its text at its width instead of overflowing it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.setMinimumWidth(40)

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text)

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        room = self.contentsRect()
        text = self.fontMetrics().elidedText(self.text(), Qt.ElideRight, room.width())
        painter.drawText(room, int(self.alignment()) | Qt.AlignVCenter, text)

    def shown_text(self) -> str:
        """What fits (what is painted)."""
        return self.fontMetrics().elidedText(
            self.text(), Qt.ElideRight, self.contentsRect().width()
        )


def _rule(parent: QWidget) -> QFrame:
    line = QFrame(parent)
    line.setFrameShape(QFrame.VLine)
    line.setFrameShadow(QFrame.Sunken)
    return line


def build(win, bar: QStatusBar) -> None:
    """alert_label (stretches, cut to fit), then shown_label, loading_label, sources_label."""
    win.alert_label = ElidedLabel(win)
    win.shown_label = QLabel(win)  # "showing 20 of 57 runs": the selection is never silent
    win.loading_label = QLabel(win)  # "loading N tiles…" while charts wait for detail
    win.sources_label = QLabel(win)
    bar.addWidget(win.alert_label, 1)
    for label in (win.shown_label, win.loading_label, win.sources_label):
        label.setContentsMargins(FIELD_GAP_PX, 0, FIELD_GAP_PX, 0)
        rule = _rule(win)
        bar.addPermanentWidget(rule)
        bar.addPermanentWidget(label)
        # A field with nothing to say takes no room, its rule neither.
        label.rule = rule  # type: ignore[attr-defined]


def tidy(win) -> None:
    """Hide the empty fields and their rules."""
    for label in (win.shown_label, win.loading_label, win.sources_label):
        shown = bool(label.text())
        label.setVisible(shown)
        label.rule.setVisible(shown)  # type: ignore[attr-defined]
