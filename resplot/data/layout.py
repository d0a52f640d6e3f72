"""Where a chart page's axes go, in pixels: titles, tick labels, axis labels and the run legend
get the room their font sizes need at any figure size, so that at 1280×800 nothing overlaps or
is clipped. Fractions of the figure (matplotlib's default, and what this replaced) give a
chart title 40 px at 1920×1080 and 15 px at 1280×800, where it ran into the tick labels above.
No Qt here.
"""

from __future__ import annotations

from dataclasses import dataclass

TITLE_PT = 9.0
TICK_PT = 7.0
LABEL_PT = 8.0
LEGEND_PT = 7.0
MIN_ROW_PX = 100  # below this a chart is unreadable: the window scrolls instead
MIN_COL_PX = 260  # a chart narrower than this gets its own row


@dataclass(frozen=True)
class Grid:
    rows: int
    cols: int


def grid(panels: int, width_px: float, height_px: float | None = None, dpi: float = 100) -> Grid:
    """Rows and columns for `panels` charts in a figure `width_px` wide: 2 columns (3 for
    more than 8 charts), more when the charts would otherwise be lower than MIN_ROW_PX in
    `height_px` (a laptop screen: 6 charts in 2 rows of 3, not 3 squeezed rows of 2), fewer
    when narrower than MIN_COL_PX each. What still does not fit scrolls."""
    if panels <= 1:
        return Grid(1, 1)
    fit = max(1, min(4, int(width_px // MIN_COL_PX)))
    cols = min(fit, 2 if panels <= 8 else 3)
    while height_px is not None and cols < min(fit, panels):
        if min_height_px(Grid(-(-panels // cols), cols), dpi, 2) <= height_px:
            break
        cols += 1
    return Grid(-(-panels // cols), cols)


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


def _vertical_px(dpi: float, legend_rows: int) -> tuple[float, float, float]:
    """(top, bottom, gap between rows) in pixels."""
    px = dpi / 72.0
    title = TITLE_PT * 1.6 * px  # a title and its pad above each axes
    xticks = TICK_PT * 1.9 * px  # tick labels below each axes (plus tick length)
    xlabel = LABEL_PT * 1.6 * px  # the x label under the bottom row
    return legend_height_px(legend_rows, dpi) + title + 4, xticks + xlabel + 4, title + xticks + 4


def margins(
    width_px: float, height_px: float, g: Grid, dpi: float, legend_rows: int = 0
) -> dict[str, float]:
    """subplots_adjust() arguments for a grid of charts with titles, y labels, tick labels and
    a legend strip of `legend_rows` rows above them."""
    px = dpi / 72.0
    w, h = max(width_px, 1.0), max(height_px, 1.0)
    top_px, bottom_px, gap_y = _vertical_px(dpi, legend_rows)
    ylabels = (LABEL_PT * 1.4 + TICK_PT * 5.5) * px  # y label + five-character tick labels
    gap_x = ylabels + 8
    left_px = ylabels + 4
    right_px = 10.0
    inner_h = h - top_px - bottom_px
    inner_w = w - left_px - right_px
    axes_h = (inner_h - gap_y * (g.rows - 1)) / g.rows
    axes_w = (inner_w - gap_x * (g.cols - 1)) / g.cols
    axes_h, axes_w = max(axes_h, 10.0), max(axes_w, 10.0)
    return {
        "left": min(0.45, left_px / w),
        "right": max(0.55, 1.0 - right_px / w),
        "top": max(0.55, 1.0 - top_px / h),
        "bottom": min(0.45, bottom_px / h),
        "hspace": gap_y / axes_h,
        "wspace": gap_x / axes_w,
    }


def min_height_px(g: Grid, dpi: float, legend_rows: int) -> int:
    """The figure height at which each chart is MIN_ROW_PX high (below it, the window scrolls)."""
    top, bottom, gap = _vertical_px(dpi, legend_rows)
    return int(g.rows * MIN_ROW_PX + (g.rows - 1) * gap + top + bottom) + 1
