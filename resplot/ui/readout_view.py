"""The hover readout, painted: a small table (resplot/data/readout.py lays it out) drawn with
QPainter and measured with QFontMetrics, so that fitting it to its chart and drawing it cost
well under a millisecond. (A QLabel laid the same table out as rich text in ~12 ms a move.)

Its text is painted once per readout into an image, which every paint then copies (Qt may
paint it again within a move). Each piece of text is a QStaticText kept per text and font:
the runs' names, the column heads and many values are the same from one move to the next, and
laying them out again was most of a paint (12 rows ~2 ms, 39 rows ~5-6 ms; kept, about half).
"""

from __future__ import annotations

from PyQt5.QtCore import QPointF, QRect, QSize, Qt
from PyQt5.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QImage,
    QPainter,
    QPen,
    QStaticText,
    QTransform,
)
from PyQt5.QtWidgets import QWidget

from resplot.data.readout import ENDED, Readout, Span, Text, fitted_names, render

FONT_PX = 11
# Texts laid out and kept, the least recently painted out first: a move at 100 runs paints
# ~300 pieces, its names again at the next move; a value changes with almost every move. Each
# kept text is a Python wrapper Python's collector traverses at every full pass (the soak's
# six pages held 6,000-7,000 with 2,048 a view, emptied when full).
STATICS_KEPT = 1024
PAD, GAP = 4, 8  # inside the border; between columns
NAME_CHARS = 48  # a run's name at most; cut shorter (down to 8) before details are dropped
NAME_CHARS_TRIED = (40, 32, 26, 22, 18, 15, 12, 10, 8)
# Opaque: Qt then paints no page under the readout where it moves to (a translucent one made
# the canvas copy its whole area again on every move, ~40 rows' at 100 runs).
BACK = QColor(255, 255, 255)
HOVERED_BACK = QColor("#e8eefb")
DETAIL = QColor("#888888")
NOTE = QColor("#666666")


class ReadoutView(QWidget):
    """Paints a readout: header, column heads, a line per run with a colour swatch, notes."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setAttribute(Qt.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WA_OpaquePaintEvent)  # every paint covers all of it
        self.font_ = QFont(self.font())
        self.font_.setPixelSize(FONT_PX)
        self.bold = QFont(self.font_)
        self.bold.setBold(True)
        self.italic = QFont(self.font_)
        self.italic.setItalic(True)
        self.fm, self.fm_bold = QFontMetrics(self.font_), QFontMetrics(self.bold)
        self.fm_italic = QFontMetrics(self.italic)
        self._ascents = {
            id(f): m.ascent()
            for f, m in (
                (self.font_, self.fm),
                (self.bold, self.fm_bold),
                (self.italic, self.fm_italic),
            )
        }
        self._statics: dict[tuple[str, int], QStaticText] = {}
        self._colors: dict[str, QColor] = {}
        self.text_: Text | None = None
        self._widths: list[int] = []
        self._widths_of: dict[tuple[str, bool], int] = {}
        self._image: QImage | None = None  # the text painted, until the next readout
        self.renders = 0  # text paints (tests: a paint of the same readout copies the image)
        self.hide()

    # -- measuring ----------------------------------------------------------------------------
    def row_px(self) -> int:
        return self.fm_bold.height() + 2

    def _span_w(self, span: Span) -> int:
        return self._w(span.text, span.bold)

    def _w(self, text: str, bold: bool = False) -> int:
        """Text width, remembered: fitting measures the same names and values many times."""
        key = (text, bold)
        w = self._widths_of.get(key)
        if w is None:
            if len(self._widths_of) > 4096:
                self._widths_of.clear()
            w = self._widths_of[key] = (self.fm_bold if bold else self.fm).horizontalAdvance(text)
        return w

    def _spans_w(self, spans: list[Span]) -> int:
        space = self._w(" ")
        return sum(self._span_w(s) for s in spans) + space * max(0, len(spans) - 1)

    def _measure(self, text: Text) -> tuple[QSize, list[int]]:
        swatch = self.fm.height()
        name_w = max((self._name_w(line) for line in text.lines), default=0) + swatch + 4
        widths = [name_w]
        for c, head in enumerate(text.columns):
            cells = [self._spans_w(line.cells[c]) for line in text.lines if c < len(line.cells)]
            widths.append(max([self._w(head, True), *cells]))
        table = sum(widths) + GAP * (len(widths) - 1)
        head = self._spans_w(text.head)
        notes = max((self.fm_italic.horizontalAdvance(n) for n in text.notes), default=0)
        rows = len(text.lines) + 1 + (1 if any(text.columns) else 0) + len(text.notes)
        size = QSize(max(table, head, notes) + 2 * PAD, rows * self.row_px() + 2 * PAD)
        return size, widths

    def _name_w(self, line) -> int:
        return self._w(line.name, line.row.hovered)

    def fit(self, readout: Readout, max_width: int) -> Text:
        """The readout's text at most `max_width` pixels wide: names cut first (their shared
        words, then their middle), then the raw value, the far steps, the later columns."""
        return self._fit(readout, max_width)[0]

    def _fit(self, readout: Readout, max_width: int) -> tuple[Text, QSize, list[int]]:
        """`fit`, with the text's size and column widths (measured once)."""
        tries = [
            {"raw": True, "steps": True},
            {"raw": False, "steps": True},
            {"raw": False, "steps": False},
        ]
        tries += [
            {"raw": False, "steps": False, "max_columns": n}
            for n in range(len(readout.columns) - 1, 0, -1)
        ]
        names = tuple(r.name for r in readout.rows)
        text = None
        for options in tries:
            text = render(readout, NAME_CHARS, **options)
            size, widths = self._measure(text)
            if size.width() <= max_width:
                return text, size, widths
            # The room the names have beside the value columns, and the longest cut that fits.
            room = max_width - (size.width() - widths[0]) - self.fm.height() - 4
            for chars in NAME_CHARS_TRIED:
                fitted = fitted_names(names, chars).values()
                hovered = max((self._w(n, True) for n in fitted), default=0)
                if hovered <= room:
                    text = render(readout, chars, **options)
                    size, widths = self._measure(text)
                    if size.width() <= max_width:
                        return text, size, widths
                    break
        assert text is not None
        return text, size, widths

    def show_readout(self, readout: Readout, max_width: int) -> None:
        self.text_, size, self._widths = self._fit(readout, max_width)
        self.resize(min(size.width(), max_width), size.height())
        self._image = None
        self.update()
        self.show()

    def plain(self) -> str:
        return "" if self.text_ is None else self.text_.plain()

    # -- painting ----------------------------------------------------------------------------
    def _static(self, text: str, font: QFont) -> QStaticText:
        """A text laid out once and kept per text and font: a run's name and most values are
        the same from one move to the next, and laying a text out was most of a paint (~0.1 ms
        a piece, 40 rows' three a move)."""
        key = (text, id(font))
        static = self._statics.pop(key, None)
        if static is None:
            if len(self._statics) >= STATICS_KEPT:
                # The least recently painted: run names stay, a value seen once goes.
                del self._statics[next(iter(self._statics))]
            static = QStaticText(text)
            static.setTextFormat(Qt.PlainText)
            static.prepare(QTransform(), font)
        self._statics[key] = static  # (the newest last)
        return static

    def release(self) -> None:
        """Hidden, and holding nothing laid out: the page is given back
        (resplot/ui/page_release.py); a readout shown again lays its texts out anew."""
        self.hide()
        self._statics.clear()
        self._widths_of.clear()
        self._image = None
        self.text_ = None

    def _draw(self, p: QPainter, x: int, y: int, text: str, font: QFont) -> None:
        """drawText at baseline y, through the kept QStaticText (the same pixels)."""
        p.setFont(font)
        p.drawStaticText(QPointF(x, y - self._ascents[id(font)]), self._static(text, font))

    def paintEvent(self, _event) -> None:
        if self.text_ is None:
            return
        ratio = self.devicePixelRatioF()
        w, h = round(self.width() * ratio), round(self.height() * ratio)
        image = self._image
        if image is None or (image.width(), image.height()) != (w, h):
            image = QImage(w, h, QImage.Format_ARGB32_Premultiplied)
            image.setDevicePixelRatio(ratio)
            image.fill(Qt.transparent)
            p = QPainter(image)
            self._paint_text(p, self.text_)
            p.end()
            self._image = image
            self.renders += 1
        p = QPainter(self)
        p.drawImage(0, 0, image)
        p.end()

    def _paint_text(self, p: QPainter, text: Text) -> None:
        """The readout's text, each piece by drawStaticText at its baseline; the painter's pen
        and font are set only when they change (setting them for every piece, with the widths
        measured again, was most of a paint's ~2.5 ms at 21 rows: the drawing is the same)."""
        p.fillRect(self.rect(), BACK)
        p.setPen(QPen(QColor("#bbbbbb")))
        p.drawRect(self.rect().adjusted(0, 0, -1, -1))
        row = self.row_px()
        ascent = self.fm_bold.ascent() + 1
        space = self._w(" ")
        pen: list = [None, None]  # the painter's pen colour and font as last set here

        def draw(x: int, y: int, piece: str, font: QFont, color: QColor) -> None:
            """As _draw, at baseline y + ascent (y: the row's top)."""
            if pen[0] is not color:
                p.setPen(color)
                pen[0] = color
            if pen[1] is not font:
                p.setFont(font)
                pen[1] = font
            top = y + ascent - self._ascents[id(font)]
            p.drawStaticText(QPointF(x, top), self._static(piece, font))

        def spans_at(x: int, y: int, spans: list[Span], color: QColor) -> None:
            for span in spans:
                font = self.bold if span.bold else self.font_
                draw(x, y, span.text, font, DETAIL if span.grey else color)
                x += self._w(span.text, span.bold) + space

        y = PAD
        black = QColor("#000000")
        ended = QColor(ENDED)
        spans_at(PAD, y, text.head, black)
        y += row
        xs = [PAD]
        for w in self._widths[:-1]:
            xs.append(xs[-1] + w + GAP)
        rights = [xs[c + 1] + self._widths[c + 1] for c in range(len(self._widths) - 1)]
        if any(text.columns):
            for c, head in enumerate(text.columns):
                draw(rights[c] - self._w(head, True), y, head, self.bold, black)
            y += row
        swatch = self.fm.height() - 4
        for line in text.lines:
            color = ended if line.row.ended else black
            if line.row.hovered:
                p.fillRect(QRect(1, y, self.width() - 2, row), HOVERED_BACK)
            p.fillRect(
                QRect(PAD, y + (row - swatch) // 2, swatch, swatch), self._color(line.row.color)
            )
            font = self.bold if line.row.hovered else self.font_
            draw(PAD + swatch + 4, y, line.name, font, color)
            for c, spans in enumerate(line.cells):
                grey = [Span(s.text, s.bold, True) for s in spans] if line.row.ended else spans
                spans_at(rights[c] - self._spans_w(spans), y, grey, color)
            y += row
        for note in text.notes:
            draw(PAD, y, note, self.italic, NOTE)
            y += row

    def _color(self, name: str) -> QColor:
        """A run colour's QColor, made once per colour."""
        got = self._colors.get(name)
        if got is None:
            got = self._colors[name] = QColor(name)
        return got
