"""A chart's note drawn from a bitmap of itself while it says the same
(resplot/draw/text_bitmap.py): the same pixels as matplotlib's own draw of the text, drawn
afresh when the text changes, and drawn directly on other renderers.

Real matplotlib Agg canvases; the font is the one the charts use.
"""

from __future__ import annotations

import io

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from resplot.draw.axes_setup import NOTE_PT
from resplot.draw.text_bitmap import BitmapText

NOTE = "min–max per 512 steps · smoothed 512-step means"


def _figure(cls):
    fig = Figure(figsize=(6.4, 4), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(np.arange(100), np.sin(np.arange(100) / 7.0))
    note = cls(
        0.995,
        0.01,
        NOTE,
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        color="#888888",
        fontsize=NOTE_PT,
        zorder=5,
        clip_on=False,
    )
    ax.add_artist(note)
    return canvas, note


def _pixels(canvas) -> np.ndarray:
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


def test_a_note_drawn_from_its_bitmap_is_the_pixels_of_a_direct_draw():
    from matplotlib.text import Text

    plain, _ = _figure(Text)
    canvas, note = _figure(BitmapText)
    want = _pixels(plain)
    first = _pixels(canvas)  # the bitmap made and drawn
    second = _pixels(canvas)  # from the bitmap
    third = _pixels(canvas)
    assert note.renders == 1
    for got in (first, second, third):
        differ = np.argwhere((got != want).any(axis=2))
        assert len(differ) == 0, f"{len(differ)} pixels differ, first at {differ[:5].tolist()}"


def test_a_new_text_is_drawn_afresh_not_from_the_old_bitmap():
    canvas, note = _figure(BitmapText)
    _pixels(canvas)
    before = _pixels(canvas)
    note.set_text("loading finer detail…")
    after = _pixels(canvas)
    assert (after != before).any()
    assert note.renders == 2  # the new text drawn into a bitmap of its own
    again = _pixels(canvas)
    assert note.renders == 2 and (again == after).all()


def test_other_renderers_get_the_text_itself():
    canvas, _note = _figure(BitmapText)
    _pixels(canvas)
    _pixels(canvas)
    out = io.StringIO()
    with rc_context({"svg.fonttype": "none"}):  # text as text, not glyph paths
        canvas.figure.savefig(out, format="svg")
    assert "min–max per 512 steps" in out.getvalue()  # not an embedded bitmap
