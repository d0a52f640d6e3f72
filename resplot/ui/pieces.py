"""A page's full draw spread over event-loop turns.

A full draw of a page (a zoom, a follow step past the headroom, a resize, a page switch) is a
few hundred small costs (each chart's axes, ticks and labels, the settled series, the live
series' cuts): 100-600 ms of the GUI thread in one turn of the event loop, during which the
hover line, the run table, the poll and the keyboard wait. Drawn here a piece at a time (the
figure's artists in matplotlib's order, each chart's axes one piece; then each chart's settled
series; then the live tier, whole), the event loop runs between pieces, at most every TURN_S.

The frame is the one `Figure.draw` makes: the same renderer cleared, the figure's patch, its
children not `animated` by zorder (Agg draws figure-level images one by one, as here), then
the `draw_event` its handlers know (resplot/ui/layers.py draws the settled series of each chart
as a piece of its own, then the rest of its work). The canvas shows the last whole frame (the
rows in view, kept when the draw began) until the new one is done.

Between pieces the page may change. The draw goes on only while what it drew holds: the figure
not stale (a limit, a size, a title, a series added: anything not `animated`; the figure is
marked fresh after each piece as `Figure.draw` does at its end), the same renderer at the same
size, the same charts in view, and (at the end) the same settled series, unchanged since
drawn. Otherwise it starts again. The live tier is drawn at the end from the page as it is then:
a poll between pieces is in the frame.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from contextlib import suppress

import numpy as np
from matplotlib.backend_bases import DrawEvent
from PyQt5.QtCore import QPoint, QTimer
from PyQt5.QtGui import QImage, QPainter

TURN_S = 0.04  # the draw yields to the event loop once a turn has drawn this long
MAX_RESTARTS = 4  # a draw started again this often in a row finishes in one turn


class Frozen:
    """The rows of the canvas in view as the last whole frame drew them, painted while a
    draw is under way."""

    def __init__(self, rgba: np.ndarray, top: int, ratio: float) -> None:
        self._rgba = rgba  # held: the image reads it
        height, width = rgba.shape[:2]
        self.image = QImage(rgba.data, width, height, width * 4, QImage.Format_RGBA8888)
        self.image.setDevicePixelRatio(ratio)
        self.top = top  # logical rows from the canvas's top

    @classmethod
    def of(cls, canvas, rows: tuple[float, float] | None) -> Frozen | None:
        renderer = getattr(canvas, "renderer", None)
        if renderer is None or not canvas.isVisible():
            return None
        buf = np.asarray(renderer.buffer_rgba())
        height = buf.shape[0]
        ratio = canvas.device_pixel_ratio or 1.0
        r0, r1 = (0, height) if rows is None else (int(rows[0] * ratio), int(rows[1] * ratio))
        r0, r1 = max(0, r0), min(height, r1)
        if r1 <= r0:
            return None
        return cls(buf[r0:r1].copy(), int(r0 / ratio), ratio)  # (a slice is a view)

    def paint(self, canvas, event) -> None:
        painter = QPainter(canvas)
        try:
            painter.setClipRegion(event.region())
            painter.eraseRect(event.rect())
            painter.drawImage(QPoint(0, self.top), self.image)
        finally:
            painter.end()


class PiecewiseDraw:
    """One full draw of a PageCanvas in pieces: `run` draws until a turn's time is spent."""

    def __init__(self, canvas) -> None:
        self.canvas = canvas
        self.layers = canvas.layers
        self.hidden = self.layers.begin_full_draw() if self.layers is not None else []
        self.renderer = canvas.get_renderer()
        self.holds_now = True  # False: the settled series changed under the draw
        self._steps = self._pieces()

    def _pieces(self) -> Iterator[None]:
        canvas, figure, renderer = self.canvas, self.canvas.figure, self.renderer
        renderer.clear()
        if not figure.get_visible():
            return
        engine = figure.get_layout_engine()
        if figure.axes and engine is not None:
            with suppress(ValueError):  # as Figure.draw: a layout can fail while resizing
                engine.execute(figure)
        figure.patch.draw(renderer)
        children = [a for a in figure.get_children() if a is not figure.patch]
        for artist in sorted(
            (a for a in children if not a.get_animated()), key=lambda a: a.get_zorder()
        ):
            artist.draw(renderer)
            yield
        if self.layers is not None:
            yield from self.layers.settled_pieces()
            if not self.layers.end_pieces():
                self.holds_now = False
                return
        figure.stale = False
        canvas.callbacks.process("draw_event", DrawEvent("draw_event", canvas, renderer))

    def holds(self) -> bool:
        """Whether what was drawn so far is still the page's (else: start again)."""
        canvas, figure, renderer = self.canvas, self.canvas.figure, self.renderer
        width, height = figure.bbox.get_points()[1]
        return (
            self.holds_now
            and not figure.stale
            and getattr(canvas, "renderer", None) is renderer
            and (renderer.width, renderer.height) == (int(width), int(height))
            and renderer.dpi == figure.dpi
            and (self.layers is None or self.layers.charts_due() == self.layers.drawn)
        )

    def run(self, budget_s: float | None) -> bool:
        """Draw pieces until `budget_s` is spent (None: to the end); True when the draw is
        done, False when it yields (or no longer holds: `holds`)."""
        start = time.perf_counter()
        figure = self.canvas.figure
        for _ in self._steps:
            figure.stale = False  # as Figure.draw leaves it (what the pieces set drawing)
            if not self.holds_now:
                return False
            if budget_s is not None and time.perf_counter() - start >= budget_s:
                return False
        return self.holds_now

    def end(self) -> None:
        """Done or given up: the charts left out of the draw come back."""
        self._steps.close()
        if self.layers is not None:
            self.layers.end_full_draw(self.hidden)


class QueuedDraw:
    """A PageCanvas's queued full draw (its `draw_idle`), run a piece a turn of the event loop
    by a zero-interval timer: started on the first turn, started again where it no longer
    holds, finished in one turn after MAX_RESTARTS in a row."""

    def __init__(self, canvas) -> None:
        self.canvas = canvas
        self.turn_s: float | None = TURN_S  # a turn's drawing (None: the draw in one turn)
        self.pieces: PiecewiseDraw | None = None  # under way
        self.frozen: Frozen | None = None  # ... and the frame shown meanwhile
        self._tries = 0  # ... started again in a row
        self.restarts = 0  # draws started again (tests and benchmarks read them)
        self.held = False  # a turn found the canvas holding its draws (hold_pieces)
        self.done = 0  # draws done in pieces
        self.timer = QTimer(canvas)
        self.timer.setSingleShot(True)
        self.timer.setInterval(0)
        self.timer.timeout.connect(self.turn)

    def queue(self) -> None:
        """Draw (the next piece) in the next turn of the event loop. Until the draw is done
        the canvas paints the frame its buffer holds now: kept here, before a paint (a
        resize's comes before the first piece) can make a renderer of the new size, blank."""
        if self.frozen is None:
            layers = self.canvas.layers
            self.frozen = Frozen.of(self.canvas, layers.view_rows() if layers else None)
        if not self.timer.isActive():
            self.timer.start()

    def turn(self) -> None:
        canvas = self.canvas
        if not canvas.draw_due or canvas.height() <= 0 or canvas.width() <= 0:
            return
        if canvas.hold_pieces():
            self.held = True  # queued again once the page is refreshed (resume_held)
            return
        try:
            pieces = self.pieces
            if pieces is not None and not pieces.holds():
                pieces.end()
                pieces = None
                self.restarts += 1
                self._tries += 1
            if pieces is None:
                pieces = self.pieces = PiecewiseDraw(canvas)
            if pieces.run(None if self._tries >= MAX_RESTARTS else self.turn_s):
                self.cancel()
                self.done += 1
                canvas.draw_due = False
                canvas.update()
                if canvas.layers is not None:
                    canvas.layers.after_pieces()
            else:
                self.queue()
        except Exception:
            # As matplotlib's idle draw: an exception out of a Qt slot would end PyQt5's app.
            traceback.print_exc()
            self.cancel()
            canvas.draw_due = False
            if canvas.layers is not None:
                canvas.layers.release()  # what it saved is not a frame: the next draw is whole

    def resume_held(self) -> None:
        """Queue again the draw a turn held, if it is still due."""
        if self.held:
            self.held = False
            if self.canvas.draw_due:
                self.queue()

    def cancel(self) -> None:
        """No draw under way (done, or a whole draw follows, or the page is given back)."""
        pieces, self.pieces, self.frozen, self._tries = self.pieces, None, None, 0
        self.held = False
        if pieces is not None:
            pieces.end()
