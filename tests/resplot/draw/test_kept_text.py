"""A chart's note drawn again where its last draw put it (resplot/draw/kept_text.py): the same
pixels as matplotlib's own draw, its layout skipped while its place is the same, laid out
again for any change, and matplotlib's draw on every other renderer.

Real matplotlib figures, axes and Agg renderers (the window's StampRenderer and plain Agg).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

from resplot.draw import text_stamps
from resplot.draw.kept_text import KeptText, add_kept_text
from resplot.draw.text_stamps import StampRenderer


@pytest.fixture(autouse=True)
def _no_stamps():
    text_stamps.forget()
    yield
    text_stamps.forget()


NOTE = {"ha": "right", "va": "bottom", "color": "#888888", "fontsize": 7, "zorder": 5}


def _chart(kept: bool, text: str = "min–max per 512 steps · smoothed 512-step means"):
    figure = Figure(figsize=(6, 3), dpi=100)
    ax = figure.add_subplot()
    ax.plot(np.arange(50), np.cos(np.arange(50) / 5))
    if kept:
        note = add_kept_text(ax, 0.995, 0.01, text, transform=ax.transAxes, **NOTE)
    else:
        note = ax.text(0.995, 0.01, text, transform=ax.transAxes, clip_on=False, **NOTE)
    return figure, ax, note


def _drawn(figure, note, renderer=None) -> np.ndarray:
    """The figure drawn on a StampRenderer, its note drawn over it once more (as a live poll
    draws it over the saved picture); RGBA."""
    w, h = (int(v) for v in figure.bbox.size)
    renderer = renderer or StampRenderer(w, h, figure.dpi)
    figure.draw(renderer)
    note.draw(renderer)
    return np.asarray(renderer.buffer_rgba()).copy()


def _counting(monkeypatch) -> list:
    """Calls of matplotlib's own Text.draw (where a text is laid out)."""
    calls: list = []
    plain = Text.draw

    def counted(self, renderer):
        calls.append(self)
        return plain(self, renderer)

    monkeypatch.setattr(Text, "draw", counted)
    return calls


def test_a_kept_note_is_drawn_as_matplotlib_draws_it_and_laid_out_once(monkeypatch):
    figure, _ax, note = _chart(True)
    plain_figure, _plain_ax, plain_note = _chart(False)
    w, h = (int(v) for v in figure.bbox.size)
    renderer = StampRenderer(w, h, figure.dpi)
    want = _drawn(plain_figure, plain_note)
    calls = _counting(monkeypatch)
    assert (_drawn(figure, note, renderer) == want).all()
    laid_out = [c for c in calls if c is note]
    assert len(laid_out) == 1 and note.kept_call is not None  # the figure's draw, then kept
    w, h = (int(v) for v in plain_figure.bbox.size)
    plain_renderer = StampRenderer(w, h, plain_figure.dpi)
    _drawn(plain_figure, plain_note, plain_renderer)
    for _ in range(3):  # live polls: the same call, the same pixels
        note.draw(renderer)
        plain_note.draw(plain_renderer)
    assert [c for c in calls if c is note] == laid_out
    assert (np.asarray(renderer.buffer_rgba()) == np.asarray(plain_renderer.buffer_rgba())).all()


@pytest.mark.parametrize(
    "change",
    [
        lambda note, ax: note.set_text("min–max per 1,024 steps"),
        lambda note, ax: note.set_color("#ff0000"),
        lambda note, ax: note.set_fontsize(9),
        lambda note, ax: note.set_horizontalalignment("left"),
        lambda note, ax: note.set_position((0.5, 0.5)),
        lambda note, ax: ax.set_position([0.2, 0.2, 0.5, 0.5]),  # its transform moves
    ],
    ids=["text", "colour", "size", "alignment", "position", "axes moved"],
)
def test_a_change_to_what_places_the_note_lays_it_out_again(monkeypatch, change):
    figure, ax, note = _chart(True)
    plain_figure, plain_ax, plain_note = _chart(False)
    w, h = (int(v) for v in figure.bbox.size)
    renderer = StampRenderer(w, h, figure.dpi)
    _drawn(figure, note, renderer)
    change(note, ax)
    change(plain_note, plain_ax)
    calls = _counting(monkeypatch)
    got = _drawn(figure, note, renderer)
    assert note in calls  # laid out again
    assert (got == _drawn(plain_figure, plain_note)).all()


def test_a_new_renderer_lays_the_note_out_again(monkeypatch):
    """A resize makes the canvas a renderer of its new size."""
    figure, _ax, note = _chart(True)
    _drawn(figure, note)
    calls = _counting(monkeypatch)
    figure.set_size_inches(8, 3)
    plain_figure, _plain_ax, plain_note = _chart(False)
    plain_figure.set_size_inches(8, 3)
    assert (_drawn(figure, note) == _drawn(plain_figure, plain_note)).all()
    assert note in calls


@pytest.mark.parametrize(
    "text",
    ["two\nlines", r"$\alpha$ smoothed", ""],
    ids=["two lines", "mathtext", "empty"],
)
def test_a_text_the_renderer_does_not_stamp_is_left_to_matplotlib(monkeypatch, text):
    figure, _ax, note = _chart(True, text)
    plain_figure, _plain_ax, plain_note = _chart(False, text)
    calls = _counting(monkeypatch)
    got = _drawn(figure, note)
    assert note.kept_call is None
    assert len([c for c in calls if c is note]) == 2  # the figure's draw and the poll's
    assert (got == _drawn(plain_figure, plain_note)).all()


def test_other_renderers_draw_the_note_as_matplotlib_does():
    """An SVG export keeps the note as text; a plain Agg canvas (a snapshot) draws its glyphs."""
    figure, _ax, note = _chart(True)
    out = io.StringIO()
    figure.savefig(out, format="svg")
    assert "min–max per 512 steps" in out.getvalue()  # (its glyphs' paths follow the text)
    assert note.kept_call is None  # nothing kept from a renderer other than the window's
    png = io.BytesIO()
    figure.savefig(png, format="png")
    assert note.kept_call is None and isinstance(note, KeptText)
