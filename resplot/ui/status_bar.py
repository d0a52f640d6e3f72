"""The window's status bar: the most severe alert, how many runs are shown, tiles loading, each
source's state; fields kept apart (a gap and a rule between them) and a long alert cut to its
room with "…" (its tooltip has all of it). At 1280 px the alert ran into the run count.
A passing message (a crash notification, an error) is cut with "…" too: QStatusBar clipped
it mid-word (`...: quiet: no new step fo`)."""

from __future__ import annotations

from PyQt5.QtCore import QRect, Qt
from PyQt5.QtGui import QPainter
from PyQt5.QtWidgets import (
    QFrame,
    QLabel,
    QSizePolicy,
    QStatusBar,
    QStyle,
    QStyleOption,
    QWidget,
)

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


MESSAGE_MARGIN_PX = 6  # QStatusBar's own margin around a passing message


class StatusBar(QStatusBar):
    """A status bar whose passing message is cut at its room with "…" (its tooltip has the
    whole of it); currentMessage() stays the whole text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._permanent: list[QWidget] = []
        self.messageChanged.connect(self.setToolTip)

    def addPermanentWidget(self, widget: QWidget, stretch: int = 0) -> None:
        super().addPermanentWidget(widget, stretch)
        self._permanent.append(widget)

    def message_rect(self) -> QRect:
        """Where the message goes: from the left margin to the first permanent field shown
        (QStatusBarPrivate::messageRect, left to right)."""
        right = self.width() - 2 * MESSAGE_MARGIN_PX
        shown = [w.geometry().left() for w in self._permanent if w.isVisible()]
        if shown:
            right = min(right, min(shown) - MESSAGE_MARGIN_PX)
        return QRect(MESSAGE_MARGIN_PX, 0, max(0, right - MESSAGE_MARGIN_PX), self.height())

    def shown_message(self) -> str:
        """The passing message as painted: whole when it fits, else cut with "…"."""
        room = self.message_rect().width()
        return self.fontMetrics().elidedText(self.currentMessage(), Qt.ElideRight, room)

    def paintEvent(self, event) -> None:
        if not self.currentMessage():
            super().paintEvent(event)
            return
        # What QStatusBar paints while a message shows (the permanent fields' frames, then the
        # message), the message cut to fit.
        painter = QPainter(self)
        for widget in self._permanent:
            if widget.isVisible():
                option = QStyleOption()
                option.rect = widget.geometry().adjusted(-2, -1, 2, 1)
                option.palette = self.palette()
                option.state = QStyle.State_None
                self.style().drawPrimitive(QStyle.PE_FrameStatusBarItem, option, painter, widget)
        painter.setPen(self.palette().color(self.foregroundRole()))
        flags = int(Qt.AlignLeading | Qt.AlignVCenter | Qt.TextSingleLine)
        painter.drawText(self.message_rect(), flags, self.shown_message())


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


def show_alert(win, text: str) -> None:
    """The most severe alert's text in its field, red while there is one."""
    win.alert_label.setText(text)
    style = "color: #b00000;" if text else ""
    if win.alert_label.styleSheet() != style:  # set at every poll, it repainted the bar
        win.alert_label.setStyleSheet(style)
