"""Legends that never vanish: one strip above a page's charts names every plotted run (any
number: it wraps into columns and rows, the layout makes room for it), and a chart with few
series also gets its own legend with each series' latest value, in the corner with least data.

A chart with more than AXES_LEGEND_MAX series has no legend of its own (it would cover the
chart): the strip names its runs by colour, and the hover readout gives every value.
"""

from __future__ import annotations

import html
import time
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from resplot.data.hover import value_text
from resplot.data.layout import LEGEND_PT, legend_columns
from resplot.draw.legend_bitmap import VALUE_SEP, add_legend, remove_legend

LEGEND_CORNERS = ("upper right", "upper left", "lower right", "lower left")
AXES_LEGEND_MAX = 8
# Placing a legend scans every drawn vertex: on a new legend, then at most this often while
# data streams in (a 1 s poll would otherwise pay it on every redraw).
LEGEND_REPLACE_S = 5.0


class Entry(NamedTuple):
    """One line of the run strip: a run (a line handle) or a stacked part (a patch)."""

    label: str
    color: str
    style: str = "-"
    patch: bool = False


def _to_axes(ax, xy: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return ax.transLimits.transform(ax.transScale.transform(xy))


def legend_corner(ax, tracks, labels: list[str], taken: tuple[str, ...] = ()) -> str:
    """The corner where a legend of `labels` covers the fewest data columns, of those not
    `taken` (the chart's note holds the lower right one while it says something).

    Matplotlib's loc="best" only sees line vertices and misses the envelope bands that dense
    series are drawn as; this counts both (bands as vertical [min, max] spans), and lines
    sampled between their points too, so that a sparse line crossing a corner counts.
    """
    corners = tuple(c for c in LEGEND_CORNERS if c not in taken) or LEGEND_CORNERS
    w_px, h_px = max(ax.bbox.width, 1.0), max(ax.bbox.height, 1.0)
    pt = ax.figure.dpi / 72.0
    # Legend metrics in font sizes: text and handle, label spacing, border pads, axes pad.
    width = (max(map(len, labels)) * 0.6 + 2.0 + 0.8 + 0.8 + 1.0) * LEGEND_PT * pt / w_px
    height = (len(labels) * 1.5 + 0.8 + 1.0) * LEGEND_PT * pt / h_px
    width, height = min(1.0, width), min(1.0, height)
    cols = []  # (x, y_low, y_high) in axes fractions
    for track in tracks:
        if track.line.get_visible():
            xy = np.column_stack([track.line.get_xdata(), track.line.get_ydata()]).astype(float)
            if len(xy):
                a = _to_axes(ax, xy)
                cols.append((a[:, 0], a[:, 1], a[:, 1]))
                ok = np.isfinite(a).all(axis=1)
                a = a[ok][np.argsort(a[ok][:, 0], kind="stable")]
                if len(a) > 1:
                    gx = np.linspace(a[0, 0], a[-1, 0], 200)
                    gy = np.interp(gx, a[:, 0], a[:, 1])
                    cols.append((gx, gy, gy))
        for band in track.band_xy:
            a = _to_axes(ax, band)
            half = len(a) // 2
            hi, lo = a[:half], a[half:][::-1]
            cols.append((hi[:, 0], lo[:, 1], hi[:, 1]))
    if not cols:
        return corners[0]
    x = np.concatenate([c[0] for c in cols])
    ylo = np.concatenate([c[1] for c in cols])
    yhi = np.concatenate([c[2] for c in cols])
    best, best_n = corners[0], None
    for corner in corners:
        x0, x1 = (1.0 - width, 1.0) if "right" in corner else (0.0, width)
        y0, y1 = (1.0 - height, 1.0) if "upper" in corner else (0.0, height)
        with np.errstate(invalid="ignore"):
            n = int(np.count_nonzero((x >= x0) & (x <= x1) & (yhi >= y0) & (ylo <= y1)))
        if best_n is None or n < best_n:
            best, best_n = corner, n
    return best


class AxesLegend:
    """One chart's own legend: its series and their latest values, re-placed as data moves."""

    def __init__(self) -> None:
        self.items: tuple = ()
        self.placed: tuple[float, tuple] = (-np.inf, ())  # when, and the limits and size then
        self.drawn: tuple = ()  # level and completeness of each track's view then
        self.taken: tuple[str, ...] = ()  # the corners left free then

    def update(
        self, ax, tracks: dict, follow: bool, latest: dict, taken: tuple[str, ...] = ()
    ) -> None:
        """`tracks`: Item -> Track; `latest`: Item -> latest value (None: unknown); `taken`:
        corners the legend leaves free (legend_corner)."""
        items = tuple(tracks)
        if items != self.items:
            self.items = items
            self.placed = (-np.inf, ())
            if items and len(items) <= AXES_LEGEND_MAX:
                # Proxies: a track's line may be hidden under its envelope band.
                handles = [
                    Line2D(
                        [],
                        [],
                        color=it.color,
                        linestyle=it.style,
                        linewidth=1.4,
                        marker=it.marker or "None",
                        markersize=3.5,
                    )
                    for it in items
                ]
                add_legend(
                    ax,
                    handles,
                    [it.label for it in items],
                    loc="upper right",
                    fontsize=LEGEND_PT,
                    framealpha=0.6,
                )
            elif ax.get_legend() is not None:
                remove_legend(ax)
        legend = ax.get_legend()
        if legend is None:
            return
        for text, item in zip(legend.get_texts(), items, strict=False):
            value = value_text(latest.get(item), steady=True)
            text.set_text(f"{item.label}{VALUE_SEP}{value}" if value else item.label)
        # The corner depends on the limits, the axes' size in pixels (the legend's share of
        # the chart) and what each series draws; placed for other ones, it may cover data.
        now = time.monotonic()
        view = (ax.get_xlim(), ax.get_ylim(), (ax.bbox.width, ax.bbox.height))
        placed_at, placed_view = self.placed
        drawn = tuple(
            (t.view.level, t.view.complete) if t.view is not None else None for t in tracks.values()
        )
        moved = view != placed_view or any(t.changed for t in tracks.values())
        # Following a live run its limits and lines move every poll: re-placed at most every
        # LEGEND_REPLACE_S. Anything else moves them only now and then (a zoom, a resize, the
        # page laid out, data loaded): re-placed at once, so that a chart's corner is that of
        # what it shows, not of when it was placed. And whenever what is drawn changes in kind
        # (first data, another level, detail loaded).
        streaming = follow and any(t.streaming for t in tracks.values())
        due = (drawn, taken) != (self.drawn, self.taken) or (
            moved and (not streaming or now - placed_at >= LEGEND_REPLACE_S)
        )
        if due:  # the page calls this once its limits are set: the corner is for them
            texts = [t.get_text() for t in legend.get_texts()]
            legend.set_loc(legend_corner(ax, tracks.values(), texts, taken))
            self.placed = (now, view)
            self.drawn, self.taken = drawn, taken


class RunStrip:
    """The legend above all charts of a page: every plotted run once (and stacked parts)."""

    def __init__(self, figure: Figure) -> None:
        self.figure = figure
        self.legend = None
        self.key: tuple = ()
        self.rows = 0

    def rows_for(self, entries: list[Entry], width_px: float) -> int:
        if not entries:
            return 0
        cols = legend_columns([e.label for e in entries], width_px, self.figure.dpi)
        return -(-len(entries) // cols)

    def update(self, entries: list[Entry]) -> None:
        width_px = self.figure.bbox.width
        cols = legend_columns([e.label for e in entries], width_px, self.figure.dpi)
        key = (tuple(entries), cols)
        if key == self.key and (self.legend is not None or not entries):
            return
        self.key = key
        if self.legend is not None:
            self.legend.remove()
            self.legend = None
        self.rows = self.rows_for(entries, width_px)
        if not entries:
            return
        handles = [
            Patch(facecolor=e.color, alpha=0.85)
            if e.patch
            else Line2D([], [], color=e.color, linestyle=e.style, linewidth=1.8)
            for e in entries
        ]
        self.legend = self.figure.legend(
            handles,
            [e.label for e in entries],
            loc="upper left",
            bbox_to_anchor=(0.0, 1.0),
            ncols=cols,
            fontsize=LEGEND_PT,
            frameon=False,
            borderaxespad=0.3,
            handlelength=2.0,
            columnspacing=1.0,
            labelspacing=0.5,
            borderpad=0.2,
        )


NB_HYPHEN = "\u2011"  # looks like "-", never ends a line
WORD_JOINER = "\u2060"
# How the Qt strip draws a line style (the figure strip draws the line itself).
_STYLE_GLYPHS = {"-": "━━", "--": "╍╍", "-.": "━·", ":": "┅┅"}


def strip_html(entries: list[Entry]) -> str:
    """The run strip as Qt rich text: a coloured line (or block) and the name, per entry."""
    cells = []
    for e in entries:
        glyph = "■" if e.patch else _STYLE_GLYPHS.get(e.style, "━━")
        # Qt's rich text breaks a line at a hyphen or space even inside white-space:nowrap:
        # a name is kept whole with non-breaking hyphens and spaces.
        name = html.escape(e.label).replace("-", NB_HYPHEN).replace(" ", "&nbsp;")
        name = name.replace("…", "…" + WORD_JOINER)  # nor after a "…" that cut a name
        cells.append(
            f'<span style="white-space:nowrap"><span style="color:{e.color}">'
            f"<b>{glyph}</b></span>&nbsp;{name}</span>"
        )
    return '<span style="font-size:11px">' + " &nbsp; ".join(cells) + "</span>"
