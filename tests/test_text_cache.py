"""Text drawn from cached glyph bitmaps (resplot/draw/text_cache.py) is the same pixels as
matplotlib's own drawing: whole canvases compared, at fractional and whole-pixel moves, rotated,
in several sizes, aliased and not, through a CJK font's fallback, with math text left to
matplotlib; and a redraw renders no glyph again."""

from __future__ import annotations

import random
import warnings

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg, RendererAgg
from matplotlib.figure import Figure

from resplot.draw import fonts, text_cache
from resplot.draw.text_cache import TextCachingCanvas
from tests.fixtures.postgres import missing_system_dependency

STRINGS = ["0.5", "1.0", "1e-3", "−2.5", "20,000", "train/loss", "step", "lr × 10⁻⁴",
           "min–max per 128 steps", "gpu0 temp °C", "WAVE fj ij", "学习率扫描"]  # fmt: skip


class CachedAgg(TextCachingCanvas, FigureCanvasAgg):
    pass


def drawn(canvas_type, shift: float = 0.0, seed: int = 5) -> np.ndarray:
    """A figure of many texts (and a line and axes, as a chart has) drawn once by a canvas of
    `canvas_type`, every text moved right by `shift` pixels; its RGBA pixels."""
    fig = Figure(figsize=(6.4, 4.8), dpi=100)
    canvas = canvas_type(fig)
    ax = fig.add_axes((0.1, 0.1, 0.8, 0.8))
    ax.plot(np.arange(50), np.sin(np.arange(50) / 5))
    ax.set_title("train/loss · 学习率扫描")
    rng = random.Random(seed)
    for _ in range(80):
        x, y = rng.uniform(20, 600), rng.uniform(20, 460)
        fig.text((x + shift) / 640, y / 480, rng.choice(STRINGS), transform=fig.transFigure,
                 rotation=rng.choice([0, 0, 0, 90, 30, -45]),
                 fontsize=rng.choice([6.5, 8, 9, 10.5, 14]),
                 antialiased=rng.random() < 0.8, color=rng.choice(["k", "C1", "#2a6"]))  # fmt: skip
    fig.text(0.5, 0.5, r"$\alpha^2 + \sqrt{x}$")  # math text: matplotlib's own way
    fig.text(0.2, 0.3, "office fi AVA").set_fontfeatures(["-liga", "-kern"])
    fig.text(0.2, 0.6, "office fi AVA")  # the same string, other shaping: another layout
    fig.text(0.6, 0.3, "fiğİ istanbul").set_language([("en", 0, 2), ("tr", 2, 13)])
    canvas.draw()
    return np.asarray(canvas.buffer_rgba()).copy()


@pytest.fixture
def cjk_fallback():
    family = fonts.find_cjk()
    if family is None:
        missing_system_dependency("a CJK font (apt-get install fonts-noto-cjk)")
    with matplotlib.rc_context({"font.family": ["DejaVu Sans", family]}):
        yield


def test_cached_text_is_the_same_pixels_as_matplotlibs(cjk_fallback):
    # Under another matplotlib than 3.11 (SUPPORTED false) text goes matplotlib's own way and
    # nothing is cached: the pixels must still be the same.
    for shift in (0.0, 0.37, 3.0, 3.37, 11.81):
        want = drawn(FigureCanvasAgg, shift)
        first = drawn(CachedAgg, shift)
        glyphs = len(text_cache._glyphs)
        again = drawn(CachedAgg, shift)
        assert np.array_equal(first, want), shift
        assert np.array_equal(again, want), shift
        assert len(text_cache._glyphs) == glyphs  # the redraw rendered no glyph anew
        assert (glyphs > 0) == text_cache.SUPPORTED


def test_a_shift_of_whole_pixels_reuses_the_glyphs(cjk_fallback):
    drawn(CachedAgg, 0.25)
    glyphs = len(text_cache._glyphs)
    assert np.array_equal(drawn(CachedAgg, 7.25), drawn(FigureCanvasAgg, 7.25))
    assert len(text_cache._glyphs) == glyphs


def test_a_changed_font_setting_lays_the_text_out_again(cjk_fallback):
    """get_font() gives other fonts when the last-resort fallback is switched off: a layout
    cached before must not be reused."""

    def text_drawn(canvas_type) -> np.ndarray:
        fig = Figure(figsize=(2, 1), dpi=100)
        canvas = canvas_type(fig)
        fig.text(0.1, 0.4, "A一கB", fontsize=14)
        canvas.draw()
        return np.asarray(canvas.buffer_rgba()).copy()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the Tamil letter is in no installed font: the point
        assert np.array_equal(text_drawn(CachedAgg), text_drawn(FigureCanvasAgg))
        with matplotlib.rc_context({"font.enable_last_resort": False}):
            assert np.array_equal(text_drawn(CachedAgg), text_drawn(FigureCanvasAgg))


def test_the_caches_stay_bounded(monkeypatch, cjk_fallback):
    monkeypatch.setattr(text_cache, "_glyphs", text_cache._Lru(50))
    monkeypatch.setattr(text_cache, "_layouts", text_cache._Lru(10))
    for seed in range(3):
        assert np.array_equal(drawn(CachedAgg, 0.5, seed), drawn(FigureCanvasAgg, 0.5, seed))
    full = (50, 10) if text_cache.SUPPORTED else (0, 0)
    assert (len(text_cache._glyphs), len(text_cache._layouts)) == full


def test_the_window_draws_its_pages_through_the_cache(qtbot, tmp_path):
    from tests.fixtures.stores import make_run, new_store
    from tests.fixtures.windows import open_window

    path = tmp_path / "r.db"
    engine = new_store(path)
    make_run(engine, name="r", points={"train/loss": [(s, 1 / (s + 1)) for s in range(500)]})
    engine.dispose()
    win = open_window(qtbot, [path], tmp_path / "settings.json", runs=1)
    qtbot.waitUntil(lambda: win.current_page().shows_data(), timeout=30_000)
    for view in (win.page_view(), win.ranks):
        view.canvas.draw()
        renderer = view.canvas.get_renderer()
        assert isinstance(renderer, text_cache.TextCachingRenderer) == text_cache.SUPPORTED
    canvas = win.page_view().canvas
    canvas.draw()
    cached = np.asarray(canvas.buffer_rgba()).copy()
    plain = RendererAgg(*canvas.get_width_height(physical=True), canvas.figure.dpi)
    canvas.figure.draw(plain)  # matplotlib's own renderer, the same figure and size
    assert np.array_equal(np.asarray(plain.buffer_rgba()), cached)
