"""A text drawn again where its last draw put it, while nothing its place depends on changed.

A chart's note ("min–max per 512 steps · smoothed …") lies over the live series in the chart's
lower right corner: a live poll whose series end there draws it again, three charts of four
on the Training page. Its string comes from a stamp (resplot/draw/text_stamps.py), but
matplotlib lays the text out at every draw first (the font looked up, its line metrics read
from the font's tables, the string measured, the alignment worked out): ~0.4 ms a draw, ~1.2
ms a poll. The window's renderer tells a KeptText where it drew its string (the call it got:
`keep_draw`), and the text's next draw on that renderer makes the same call, as long as what
decides that call is the same: the renderer and its size, the string, the font, the colour,
the alignment, the position and its transform, the clip. The same call draws the same pixels
(the same stamp at the same place).

Every other draw is matplotlib's own: another renderer (SVG and PDF files, `resplot
snapshot`), more than one line (matplotlib draws each line without saying which text it is),
mathtext, a text with a box, path effects, TeX, or a transform that is not affine.
"""

from __future__ import annotations

from matplotlib import rcParams
from matplotlib.backend_bases import GraphicsContextBase
from matplotlib.text import Text

from resplot.draw.text_stamps import StampRenderer, font_key


class KeptText(Text):
    """A Text whose draw on the window's renderer repeats its last one when its place is the
    same (the module's docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # (what the call depended on, the call: its graphics context, x, y, string, font, angle)
        self.kept_call: tuple | None = None
        self._asking: tuple | None = None  # the key of the draw under way

    def draw(self, renderer) -> None:
        key = self._place_key(renderer) if isinstance(renderer, StampRenderer) else None
        kept = self.kept_call
        if key is not None and kept is not None and kept[0] == key:
            gc0, x, y, s, prop, angle = kept[1]
            gc = renderer.new_gc()
            try:
                gc.copy_properties(gc0)
                renderer.draw_text(gc, x, y, s, prop, angle, ismath=False, mtext=self)
            finally:
                gc.restore()
            self.stale = False
            return
        self.kept_call = None
        self._asking = key
        try:
            super().draw(renderer)
        finally:
            self._asking = None

    def keep_draw(self, renderer, gc, x: float, y: float, s: str, prop, angle: float) -> None:
        """The window's renderer drew this text's string with this call (StampRenderer)."""
        if self._asking is None:
            return
        copy = GraphicsContextBase()
        copy.copy_properties(gc)
        self.kept_call = (self._asking, (copy, x, y, s, prop, angle))

    def _place_key(self, renderer) -> tuple | None:
        """What the window renderer's draw_text call for this text depends on (None: a text
        left to matplotlib at every draw)."""
        transform = self.get_transform()
        if (
            not self.get_visible()
            or "\n" in self.get_text()
            or self.get_bbox_patch() is not None
            or self.get_path_effects()
            or self.get_usetex()
            or self.get_wrap()
            or not transform.is_affine
        ):
            return None
        clip = self.get_clip_box() if self.get_clip_on() else None
        clip_path = self.get_clip_path() if self.get_clip_on() else None
        return (
            id(renderer),
            renderer.width,
            renderer.height,
            renderer.dpi,
            self.get_text(),
            tuple(self.get_position()),
            transform.get_matrix().tobytes(),
            str(self.get_color()),
            self.get_alpha(),
            self.get_antialiased(),
            font_key(self.get_fontproperties()),
            self.get_rotation(),
            self.get_rotation_mode(),
            self.get_horizontalalignment(),
            self.get_verticalalignment(),
            self.get_url(),
            self.get_fontfeatures(),
            self.get_language(),
            None if clip is None else tuple(clip.extents),
            id(clip_path),
            tuple(rcParams["font.family"]),
            rcParams["text.hinting"],
            rcParams["text.hinting_factor"],
            rcParams["text.kerning_factor"],
        )


def add_kept_text(ax, x: float, y: float, s: str, **kwargs) -> KeptText:
    """`ax.text(x, y, s, **kwargs)` as a KeptText (its clip path the axes patch, as there)."""
    text = KeptText(x, y, s, **{"clip_on": False, **kwargs})
    ax.add_artist(text)
    return text
