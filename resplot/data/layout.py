"""Where a chart page's axes go, in pixels: titles, tick labels, axis labels and the run legend
get the room their font sizes need at any figure size, so that at 1280×800 nothing overlaps or
is clipped. Fractions of the figure (matplotlib's default, and what this replaced) give a
chart title 40 px at 1920×1080 and 15 px at 1280×800, where it ran into the tick labels above.
No Qt here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

TITLE_PT = 9.0
TICK_PT = 7.0
LABEL_PT = 8.0
LEGEND_PT = 7.0
MIN_ROW_PX = 100  # below this a chart is unreadable: the window scrolls instead
MIN_AXES_W_PX = 300  # no narrower: fewer columns
MAX_COLS = 4
ASPECT = 2.0  # width / height of a chart's plotting area that reads best


# An All-page section's card: a band this high across the page above its charts (it took a
# whole chart's cell: 180 px of a 1280x800 page for one line of text).
BAND_PX = 26.0


@dataclass(frozen=True)
class Grid:
    rows: int
    cols: int
    bands: tuple[int, ...] = ()  # rows that are section bands (BAND_PX high), not charts


@dataclass(frozen=True)
class Frame:
    """The figure a grid of charts is laid out in: its size in pixels and dots per inch, the
    rows of the run legend above the charts, and whether the bottom row has an x label (the
    window leaves it out: its toolbar names the x axis)."""

    width_px: float
    height_px: float
    dpi: float = 100
    legend_rows: int = 0
    xlabel: bool = True


def grid(panels: int, frame: Frame) -> Grid:
    """Rows and columns for `panels` charts in `frame`: of the grids whose charts are at least
    MIN_AXES_W_PX wide and MIN_ROW_PX high, the one whose charts come nearest ASPECT (6 charts
    at 1280×800: 2 rows of 3 at about 380×180 px, not 3 rows of 2 at 590×100). When none fits
    the height the page scrolls: then as many columns as keep charts MIN_AXES_W_PX wide (3 at
    1280 px)."""
    if panels <= 1:
        return Grid(1, 1)
    # A chart's width depends on the figure's width, dpi and columns only.
    endless = Frame(frame.width_px, 1e9, frame.dpi)
    wide = [
        c
        for c in range(1, min(MAX_COLS, panels) + 1)
        if axes_px(endless, Grid(1, c))[0] >= MIN_AXES_W_PX
    ] or [1]
    fits = []
    for cols in wide:
        g = Grid(-(-panels // cols), cols)
        w, h = axes_px(frame, g)
        if h >= MIN_ROW_PX:
            fits.append((abs(math.log(w / h / ASPECT)), cols, g))
    if fits:
        return min(fits)[2]
    cols = max(wide)
    return Grid(-(-panels // cols), cols)


def slots(starts: list[bool], cols: int, bands: list[bool] | None = None) -> tuple[list[int], int]:
    """Grid cells (row * cols + col) for panels in order, a panel with starts[i] beginning a
    new row (an All-page section), one with bands[i] taking a row of its own (a section's
    card), and the rows they take."""
    cells, cell = [], 0
    for i, begins in enumerate(starts):
        band = bool(bands and bands[i])
        if (begins or band) and cell % cols:
            cell += cols - cell % cols
        cells.append(cell)
        cell += cols if band else 1
    return cells, max(1, -(-cell // cols))


def band_rows(cells: list[int], bands: list[bool], cols: int) -> tuple[int, ...]:
    """The rows of slots() that are section bands."""
    return tuple(c // cols for c, band in zip(cells, bands, strict=True) if band)


def height_ratios(g: Grid, axes_h: float) -> list[float]:
    """Row heights for a GridSpec: a chart row 1, a band BAND_PX against a chart's `axes_h`."""
    return [BAND_PX / max(axes_h, 1.0) if r in g.bands else 1.0 for r in range(g.rows)]


def axes_px(frame: Frame, g: Grid) -> tuple[float, float]:
    """The plotting area of each chart of grid `g` in `frame`, in pixels."""
    top_px, bottom_px, gap_y = _vertical_px(frame)
    left_px, right_px, gap_x = _horizontal_px(frame.dpi)
    bands = len(g.bands)
    charts = max(1, g.rows - bands)
    height = frame.height_px - top_px - bottom_px - gap_y * (g.rows - 1) - BAND_PX * bands
    axes_w = (frame.width_px - left_px - right_px - gap_x * (g.cols - 1)) / g.cols
    return axes_w, height / charts


def legend_columns(labels: list[str], width_px: float, dpi: float) -> int:
    """Columns of a one-line-per-run legend across the figure width."""
    if not labels:
        return 1
    px = dpi / 72.0
    # Text at ~0.6 em a character, plus handle (2 em), its pad and the column gap (1.6 em).
    per = (max(len(s) for s in labels) * 0.6 + 3.6) * LEGEND_PT * px
    return max(1, min(len(labels), int(width_px // max(per, 1.0))))


def legend_height_px(rows: int, dpi: float) -> float:
    return 0.0 if rows == 0 else (rows * 1.5 + 0.6) * LEGEND_PT * dpi / 72.0


def _vertical_px(frame: Frame) -> tuple[float, float, float]:
    """(top, bottom, gap between rows) in pixels."""
    dpi = frame.dpi
    px = dpi / 72.0
    title = TITLE_PT * 1.6 * px  # a title and its pad above each axes
    xticks = TICK_PT * 1.9 * px  # tick labels below each axes (plus tick length)
    xlabel = LABEL_PT * 1.6 * px if frame.xlabel else 0.0  # the x label under the bottom row
    legend = legend_height_px(frame.legend_rows, dpi)
    return legend + title + 4, xticks + xlabel + 4, title + xticks + 4


def _horizontal_px(dpi: float) -> tuple[float, float, float]:
    """(left, right, gap between columns) in pixels."""
    ylabels = (LABEL_PT * 1.4 + TICK_PT * 6.2) * dpi / 72.0  # y label + 6-character ticks (1.502M)
    return ylabels + 4, 10.0, ylabels + 8


def margins(frame: Frame, g: Grid) -> dict[str, float]:
    """subplots_adjust() arguments for a grid of charts with titles, y labels, tick labels and
    a legend strip of `frame.legend_rows` rows above them."""
    w, h = max(frame.width_px, 1.0), max(frame.height_px, 1.0)
    top_px, bottom_px, gap_y = _vertical_px(frame)
    left_px, right_px, gap_x = _horizontal_px(frame.dpi)
    axes_w, axes_h = axes_px(replace(frame, width_px=w, height_px=h), g)
    axes_h, axes_w = max(axes_h, 10.0), max(axes_w, 10.0)
    # A GridSpec's hspace is a fraction of its mean row (bands are rows of BAND_PX).
    mean_h = (axes_h * (g.rows - len(g.bands)) + BAND_PX * len(g.bands)) / max(g.rows, 1)
    return {
        "left": min(0.45, left_px / w),
        "right": max(0.55, 1.0 - right_px / w),
        "top": max(0.55, 1.0 - top_px / h),
        "bottom": min(0.45, bottom_px / h),
        "hspace": gap_y / max(mean_h, 1.0),
        "wspace": gap_x / axes_w,
    }


def min_height_px(frame: Frame, g: Grid) -> int:
    """The figure height at which each chart is MIN_ROW_PX high (below it, the window scrolls);
    `frame`'s own size does not count."""
    top, bottom, gap = _vertical_px(frame)
    bands = len(g.bands)
    charts = (g.rows - bands) * MIN_ROW_PX + bands * BAND_PX
    return int(charts + (g.rows - 1) * gap + top + bottom) + 1


# -- the window's own layout (resplot/ui/window_layout.py applies these) ---------------------
PREFERRED_WINDOW = (1400, 900)
SCREEN_MARGIN_PX = 24  # left free around a first window on a small screen
TREE_BELOW_PX = 1500  # narrower windows start with the sources tree folded away
TREE_PX = 360  # a sweep run's distinct name part (~250 px) and its status whole
TABLE_SHARE, MIN_TABLE_PX, MAX_TABLE_PX = 0.24, 150, 340


def window_size(avail_w: int, avail_h: int) -> tuple[int, int]:
    """A first window's size on a screen whose free area is avail_w × avail_h: the preferred
    size where it fits (a 1280×800 laptop got 1400×900 and lost its edges), else the screen."""
    w, h = PREFERRED_WINDOW
    return (
        max(640, min(w, avail_w - SCREEN_MARGIN_PX)),
        max(480, min(h, avail_h - SCREEN_MARGIN_PX)),
    )


def split_sizes(
    width: int, height: int, table_min: int = MIN_TABLE_PX
) -> tuple[list[int], list[int]]:
    """Default splitter sizes for a window: [tree, charts] and [charts, run table]. The charts
    get what the tree and the table can spare: the tree folds away below TREE_BELOW_PX (the
    status bar still names each source's state; Ctrl+B unfolds it), the table takes about a
    quarter of the height, growing with the window rather than staying 184 px, and at least
    `table_min` (what shows six runs)."""
    tree = 0 if width < TREE_BELOW_PX else TREE_PX
    table = int(min(MAX_TABLE_PX, max(table_min, TABLE_SHARE * height)))
    return [tree, max(1, width - tree)], [max(1, height - table), table]
