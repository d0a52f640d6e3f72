"""The window's text drawn from stamps (resplot/draw/text_stamps.py): matplotlib's own glyphs at
the whole pixel nearest to where it puts them, a stamp made once per string and look, clipped as
the text is, bounded in bytes; the window's canvas draws with it.

Real matplotlib Agg renderers and canvases; the font is the one the charts use.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.transforms import Bbox

from resplot.draw import text_stamps
from resplot.draw.text_stamps import StampRenderer


@pytest.fixture(autouse=True)
def _no_stamps():
    text_stamps.forget()
    yield
    text_stamps.forget()


def _drawn(
    cls, texts, size=(240, 120), clip: Bbox | None = None, dpi: float = 100, **font
) -> np.ndarray:
    """RGBA of `texts` ((x, y from the top, string, angle, colour, points)) drawn on white."""
    renderer = cls(*size, dpi)
    background = renderer.new_gc()
    background.set_foreground("white")
    renderer.draw_image(background, 0, 0, np.full((size[1], size[0], 4), 255, np.uint8))
    background.restore()
    for x, y, s, angle, colour, points in texts:
        gc = renderer.new_gc()
        gc.set_foreground(colour)
        if clip is not None:
            gc.set_clip_rectangle(clip)
        renderer.draw_text(gc, x, y, s, FontProperties(size=points, **font), angle)
        gc.restore()
    return np.asarray(renderer.buffer_rgba()).astype(int)


TEXTS = [
    (10, 30, "1.5M", 0, "black", 7),
    (60, 30, "Learning rate", 0, "#333333", 9),
    (200, 100, "tokens/s", 90, "black", 8),
    (20, 90, "−0.25 · 3e-4", 0, (0.2, 0.4, 0.8, 0.7), 7),
]


def test_stamped_text_is_matplotlibs_own_at_whole_pixels():
    """At whole-pixel origins a stamp lands where matplotlib's own draw does, its glyphs the
    same to a few colour levels (one blend of the stamp against matplotlib's glyph by glyph)."""
    direct = _drawn(RendererAgg, TEXTS)
    stamped = _drawn(StampRenderer, TEXTS)
    ink = (direct[..., :3] < 250).any(axis=2)
    assert ink.sum() > 300  # every string drew something
    assert np.abs(direct - stamped).max() <= 3
    assert text_stamps.made[0] >= len(TEXTS)


def test_a_string_between_pixels_lands_at_most_half_a_pixel_from_matplotlibs():
    """Between pixels matplotlib positions glyphs to 1/64 px; a stamp goes to the nearest
    whole pixel: the same ink, its centre moved by ≤ 0.5 px."""

    def centre(rgba) -> np.ndarray:
        dark = 255 - rgba[..., :3].mean(axis=2)
        ys, xs = np.indices(dark.shape)
        return np.array([(xs * dark).sum(), (ys * dark).sum()]) / dark.sum()

    for x, y in [(10.3, 30.2), (10.5, 30.5), (10.7, 29.6)]:
        texts = [(x, y, "12.5k", 0, "black", 7)]
        direct, stamped = _drawn(RendererAgg, texts), _drawn(StampRenderer, texts)
        moved = centre(stamped) - centre(direct)
        assert np.all(np.abs(moved) <= 0.55), (x, y, moved)
        ink_direct = (255 - direct[..., :3]).sum()
        assert abs((255 - stamped[..., :3]).sum() - ink_direct) <= 0.03 * ink_direct


@pytest.mark.parametrize("dpi", [100, 200])
@pytest.mark.parametrize("style", ["normal", "italic"])
def test_a_stamp_holds_every_glyph_whole(dpi, style):
    """Glyphs reach past their advance box (italic overhang, ‖, j's tail): the stamp's margin
    keeps all of their ink, at a HiDPI screen's dpi too."""
    texts = [(20, 50, "jf‖W_g", 0, "black", 11), (200, 110, "fjy‖", 90, "black", 11)]
    size = (480, 240)
    direct = _drawn(RendererAgg, texts, size, dpi=dpi, style=style)
    stamped = _drawn(StampRenderer, texts, size, dpi=dpi, style=style)
    assert np.abs(direct - stamped).max() <= 3


def test_a_stamp_is_made_once_per_string_and_look():
    _drawn(StampRenderer, TEXTS)
    made = text_stamps.made[0]
    again = _drawn(StampRenderer, TEXTS)  # the same strings, another renderer
    assert text_stamps.made[0] == made
    assert np.array_equal(again, _drawn(StampRenderer, TEXTS))
    for changed in [
        (10, 30, "1.5M", 0, "red", 7),  # colour
        (10, 30, "1.5M", 0, "black", 8),  # size
        (10, 30, "1.5M", 45, "black", 7),  # angle
        (10, 30, "1.6M", 0, "black", 7),  # string
    ]:
        before = text_stamps.made[0]
        _drawn(StampRenderer, [changed])
        assert text_stamps.made[0] == before + 1, changed


def test_a_stamp_is_clipped_as_the_text():
    clip = Bbox([[0, 0], [40, 120]])  # display coords: the left 40 px
    texts = [(10, 30, "Learning rate", 0, "black", 9)]
    direct = _drawn(RendererAgg, texts, clip=clip)
    stamped = _drawn(StampRenderer, texts, clip=clip)
    assert (stamped[:, 42:, :3] == 255).all()  # nothing past the clip (its edge: ±1 px)
    assert (stamped[:, :39, :3] < 250).any()
    assert np.abs(direct[:, :39] - stamped[:, :39]).max() <= 3


def test_stamps_are_bounded_in_bytes(monkeypatch):
    monkeypatch.setattr(text_stamps, "STAMP_BYTES", 20_000)
    _drawn(StampRenderer, [(10, 30, f"{k}k", 0, "black", 7) for k in range(200)])
    count, held = text_stamps.held()
    assert 1 < count < 200
    assert held <= 20_000


def test_mathtext_is_left_to_matplotlib():
    made = text_stamps.made[0]
    renderer = StampRenderer(120, 80, 100)
    gc = renderer.new_gc()
    renderer.draw_text(gc, 10, 60, r"\sigma^2", FontProperties(size=12), 0, ismath=True)
    gc.restore()
    assert text_stamps.made[0] == made
    assert (np.asarray(renderer.buffer_rgba())[..., 3] > 0).any()


MEASURED = [
    ("Learning rate", {"size": 9}),
    ("1.5M", {"size": 7}),
    ("tokens/s · smoothed", {"size": 8, "weight": "bold"}),
    ("Validation perplexity", {"size": 10, "style": "italic"}),
]


def test_a_measure_is_matplotlibs_own_kept_across_renderers():
    """A renderer of another size (a resize, another page's canvas) measures a string it has
    measured without shaping it again, and gets what matplotlib's own renderer gives."""
    before = text_stamps.measured[0]
    first = StampRenderer(240, 120, 100)
    got = [first.get_text_width_height_descent(s, FontProperties(**f), False) for s, f in MEASURED]
    assert text_stamps.measured[0] == before + len(MEASURED)
    direct = RendererAgg(240, 120, 100)
    assert got == [
        tuple(direct.get_text_width_height_descent(s, FontProperties(**f), False))
        for s, f in MEASURED
    ]
    other = StampRenderer(1920, 1080, 100)
    again = [
        other.get_text_width_height_descent(s, FontProperties(**f), False) for s, f in MEASURED
    ]
    assert again == got and text_stamps.measured[0] == before + len(MEASURED)


@pytest.mark.parametrize(
    "changed",
    [
        ("Learning rate", {"size": 10}, 100),  # size
        ("Learning rate", {"size": 9, "weight": "bold"}, 100),  # weight
        ("Learning rate", {"size": 9}, 144),  # dpi
        ("Learning rates", {"size": 9}, 100),  # string
    ],
)
def test_a_measure_is_kept_by_string_font_and_dpi(changed):
    before = text_stamps.measured[0]
    StampRenderer(240, 120, 100).get_text_width_height_descent(
        "Learning rate", FontProperties(size=9), False
    )
    s, font, dpi = changed
    got = StampRenderer(240, 120, dpi).get_text_width_height_descent(
        s, FontProperties(**font), False
    )
    assert text_stamps.measured[0] == before + 2
    assert got == tuple(
        RendererAgg(240, 120, dpi).get_text_width_height_descent(s, FontProperties(**font), False)
    )


def test_a_measure_follows_the_font_families():
    """The CJK fallback (resplot/draw/fonts.py) changes font.family: strings measured again."""
    import matplotlib

    before = text_stamps.measured[0]
    prop = FontProperties(size=9)
    StampRenderer(240, 120, 100).get_text_width_height_descent("loss", prop, False)
    with matplotlib.rc_context({"font.family": ["DejaVu Sans", "DejaVu Serif"]}):
        StampRenderer(240, 120, 100).get_text_width_height_descent("loss", prop, False)
    assert text_stamps.measured[0] == before + 2


def test_measures_are_bounded(monkeypatch):
    monkeypatch.setattr(text_stamps, "MEASURES_HELD", 50)
    before = text_stamps.measured[0]
    renderer = StampRenderer(240, 120, 100)
    for k in range(200):
        renderer.get_text_width_height_descent(f"{k}k", FontProperties(size=7), False)
    renderer.get_text_width_height_descent("0k", FontProperties(size=7), False)
    assert text_stamps.measured[0] == before + 201  # the oldest measure was dropped


def test_mathtext_is_measured_by_matplotlib():
    before = text_stamps.measured[0]
    renderer = StampRenderer(120, 80, 100)
    got = renderer.get_text_width_height_descent(r"\sigma^2", FontProperties(size=12), True)
    assert text_stamps.measured[0] == before
    assert got == RendererAgg(120, 80, 100).get_text_width_height_descent(
        r"\sigma^2", FontProperties(size=12), True
    )


def test_the_windows_canvas_draws_text_from_stamps(qtbot):
    from resplot.ui.page_view import PageView

    view = PageView("training", lambda: None)
    qtbot.addWidget(view)
    view.page.figure.suptitle("a title only this test draws")
    view.canvas.draw()
    assert isinstance(view.canvas.renderer, StampRenderer)
    assert text_stamps.made[0] >= 1
    made = text_stamps.made[0]
    view.canvas.draw()
    assert text_stamps.made[0] == made  # the second draw: every string from its stamp
    # Saving to a vector format is matplotlib's own renderer: the title stays text (glyph
    # outlines under a comment that says it), not a stamp's pixels.
    made = text_stamps.made[0]
    out = io.BytesIO()
    view.page.figure.savefig(out, format="svg")
    assert b"<!-- a title only this test draws -->" in out.getvalue()
    assert b"<image" not in out.getvalue()
    assert text_stamps.made[0] == made


def test_a_plain_agg_canvas_is_untouched():
    """Snapshots and exports outside the window draw as matplotlib does."""
    made = text_stamps.made[0]
    fig = Figure(figsize=(2, 1), dpi=100)
    canvas = FigureCanvasAgg(fig)
    fig.text(0.1, 0.5, "plain")
    canvas.draw()
    assert type(canvas.renderer) is RendererAgg
    assert text_stamps.made[0] == made
