"""How one chart's axes is dressed before any data: its title and labels, formatters that
carry their scale, log and percent axes, the throttle chart's reason rows, and the texts and
collections every chart keeps (event lines, "no data", its note); and an All-page section's
card, which takes a chart's cell."""

from __future__ import annotations

from dateutil.tz import tzlocal
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullFormatter, PercentFormatter

from resplot.data.alerts import THROTTLE_BITS
from resplot.data.layout import TITLE_PT
from resplot.data.pages import PanelSpec
from resplot.draw.axis_art import AxisArt, drop_tick_artists, hide_axes
from resplot.draw.clip_box import share_clip_box
from resplot.draw.events import EventLines
from resplot.draw.kept_text import add_kept_text
from resplot.draw.ticks import CompactFormatter, ReadableLogLocator

NOTE_PT = 6.5
GRID = {"alpha": 0.25, "linewidth": 0.6}


def dress(ax, spec: PanelSpec, x_mode: str = "step") -> tuple[EventLines, object, object]:
    """Set up a chart's axes for `spec` on the x axis `x_mode` (resplot/data/xaxis.py); (its
    event lines, its "no data" text, its note)."""
    # y fixed: matplotlib would otherwise measure every top tick label at each draw to
    # lift the title over them (~20 ms a page), and layout.py leaves it the room.
    ax.set_title(spec.title, fontsize=TITLE_PT, loc="left", y=1.0)
    ax.set_ylabel(spec.ylabel, fontsize=8)
    # matplotlib's own axes (not drawn) set as the art draws them: what reads them agrees.
    ax.tick_params(labelsize=7)
    ax.grid(True, **GRID)
    # Ticks, labels and grid under everything the chart draws (its lowest, NaN spans, at
    # 0.4): the window saves the axes once and draws the series over them, the same
    # pixels as a full draw (resplot/ui/layers.py).
    ax.xaxis.set_zorder(0.3)
    ax.yaxis.set_zorder(0.3)
    # Drawn as a few paths and texts rather than matplotlib's artists a tick: 70 % of a
    # full draw's time (resplot/draw/axis_art.py).
    art = AxisArt(ax, grid=GRID, labelsize=7)
    ax.add_artist(art)
    art.set_clip_on(False)  # its labels lie outside the axes
    share_clip_box(ax, art)
    hide_axes(ax)
    # Every label says its own scale (1.5M, 3e-4): an offset text above the axis sat
    # on the chart's title (resplot/draw/ticks.py).
    ax.yaxis.set_major_formatter(CompactFormatter())
    if x_mode == "wall":
        # Dates (days since 1970): as 1.5M-style numbers they read "19.675931k". The charts
        # share one x ticker, so each chart dressed sets it for all of them. Times of day in
        # this machine's time zone (as `reslog show` prints them; matplotlib's default is
        # UTC), the date at midnight; no offset text (the date under every chart's labels
        # sat on the next row's title: no row is left for it), the hover says the whole date.
        local = tzlocal()
        locator = AutoDateLocator(tz=local)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=local, show_offset=False))
    else:
        ax.xaxis.set_major_formatter(CompactFormatter())
    if spec.log_y:
        ax.set_yscale("log")
        # Losses span less than a decade: label 2, 3, 5 as plain numbers, not 10^x.
        ax.yaxis.set_major_locator(ReadableLogLocator())
        ax.yaxis.set_major_formatter(CompactFormatter())
        ax.yaxis.set_minor_formatter(NullFormatter())
    if spec.percent:
        ax.yaxis.set_major_formatter(PercentFormatter(spec.percent))
    if spec.kind == "throttle":
        names = list(THROTTLE_BITS.values())
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_ylim(-0.6, len(names) - 0.4)
        drop_tick_artists(ax)  # made again by set_yticks
    events = EventLines(ax)
    empty = ax.text(
        0.5,
        0.5,
        "no data",
        transform=ax.transAxes,
        ha="center",
        va="center",
        color="#999999",
        fontsize=8,
    )
    # Each live poll draws it with the series: the same call as its last draw, a copy of the
    # same bitmap (resplot/draw/kept_text.py, text_stamps.py).
    note = add_kept_text(
        ax,
        0.995,
        0.01,
        "",
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        color="#888888",
        fontsize=NOTE_PT,
        zorder=5,
        clip_on=False,
    )
    share_clip_box(ax, empty, note)
    return events, empty, note


def section_card(ax, spec: PanelSpec) -> tuple[EventLines, object, object]:
    """An All-page section's card: its prefix and chart count, in a band across the page above
    its charts (a click on it folds or unfolds the section: resplot/ui/page_view.py)."""
    ax.set_axis_off()
    drop_tick_artists(ax)
    title = ax.text(
        0.005,
        0.5,
        spec.title,
        transform=ax.transAxes,
        ha="left",
        va="center",
        fontsize=10,
        fontweight="bold",
        color="#333333",
    )
    what = "click to unfold" if spec.title.startswith("▸") else "click to fold"
    hint = ax.text(
        0.995,
        0.5,
        what,
        transform=ax.transAxes,
        ha="right",
        va="center",
        fontsize=NOTE_PT,
        color="#888888",
    )
    card = ax.add_patch(
        Rectangle(
            (0, 0),
            1,
            1,
            transform=ax.transAxes,
            facecolor="#f3f5f9",
            edgecolor="#d0d5de",
            zorder=-1,
        )
    )
    share_clip_box(ax, title, hint, card)
    return EventLines(), hint, hint
