"""Which resolution of each series a report embeds, under its size budget. Plain arithmetic,
no I/O: `choose()` is tested on its own.

Every series is embedded either raw (every point) or as columns of one width W (first step,
min and max with their steps, last, as the viewer's tiles: a stored rollup level, or a fine
level the host folds from the raw points, schema/store/buckets.py). The page builds every coarser
width from those columns itself (exactly: extremes and lasts combine), so a zoom draws at least
one exact column a pixel down to W steps a pixel; a series embedded raw is exact at every zoom.

Every point when all of them fit the budget. Otherwise one W for every series: the coarsest
width that still gives the longest series COLUMNS_GOAL columns, or coarser where the budget
says so; then the series whose points cost little more than their columns (sparse or short
ones) go raw while the budget lasts. The budget is a bound, not a goal: 2,048 columns draw the
whole run exact to the pixel on any screen, and a quarter of it on a 560-pixel chart, in a file
that opens in well under a second (docs/benchmarks.md); finer columns would fill the budget
with detail few readers zoom to, and slow every opening.
"""

from __future__ import annotations

from dataclasses import dataclass

from schema.store import buckets
from schema.store.rollup import STEP_HI, STEP_LO, N

# Bytes a point or a column takes in the file (deflated, base64, float64 values: about; the
# builder measures the real size and asks again with the ratio it measured).
RAW_BYTES = 12.0  # step delta 1, value 8, wall 4 -> 13 bytes, deflated ~0.7, x 4/3
COLUMN_BYTES = 30.0  # 4 step bytes, 3 values x 8, wall 4, mean 4 -> 36 bytes, ~0.6, x 4/3
COLUMNS_GOAL = 2048
RAW_PREMIUM = 2.0  # a series goes raw once its points cost at most this many times its columns
# Fine levels then stored levels, by width: raw is width 1.
WIDTHS = (
    [1]
    + [1 << s for s in range(1, buckets.FINE_SHIFT + 1)]
    + [buckets.width(level) for level in range(1, buckets.MAX_LEVEL + 1)]
)


@dataclass(frozen=True)
class Need:
    """A series as the budget sees it: its summary's count, step span and stored levels."""

    n: int
    step_lo: int
    step_hi: int
    levels: int

    @classmethod
    def of(cls, summary) -> Need:
        agg = summary.agg
        return cls(int(agg[N]), int(agg[STEP_LO]), int(agg[STEP_HI]), int(summary.levels))

    def columns(self, width: int) -> int:
        """Columns of `width` steps it fills (at most its points)."""
        return min(self.n, (self.step_hi - self.step_lo) // width + 1)

    def level(self, width: int) -> int:
        """The level giving columns of `width` (0: raw). A width coarser than its stored levels
        reach: its coarsest stored level (a short series: few columns anyway)."""
        if width <= 1 or self.n <= self.columns(width):
            return 0
        shift = width.bit_length() - 1
        if shift <= buckets.FINE_SHIFT:
            return -shift
        level = (shift - buckets.FIRST_SHIFT) // buckets.LEVEL_SHIFT + 1
        return min(level, max(1, self.levels))

    def bytes(self, level: int, ratio: float = 1.0) -> float:
        if level == 0:
            return self.n * RAW_BYTES * ratio
        return self.columns(buckets.width(level)) * COLUMN_BYTES * ratio


def goal_width(needs: list[Need], columns: int = COLUMNS_GOAL) -> int:
    """The coarsest width that gives the longest series `columns` columns."""
    span = max((n.step_hi - n.step_lo for n in needs), default=0)
    best = WIDTHS[1]
    for width in WIDTHS[1:]:
        if span // width + 1 < columns:
            break
        best = width
    return best


def choose(
    needs: list[Need], budget: float, ratio: float = 1.0, columns: int = COLUMNS_GOAL
) -> tuple[int, list[int]]:
    """(W, each series' level): every point (W = 1) when all fit `budget` bytes; else the
    finest width from goal_width() up whose estimate fits (the coarsest there is when none
    does), then series made raw, cheapest first, while they cost at most RAW_PREMIUM times
    their columns and the budget lasts. `ratio` scales the estimates (measured / estimated)."""
    if sum(need.bytes(0, ratio) for need in needs) <= budget:
        return 1, [0] * len(needs)
    goal = goal_width(needs, columns)
    chosen = WIDTHS[-1]
    for width in WIDTHS:
        if width < goal:
            continue
        if sum(need.bytes(need.level(width), ratio) for need in needs) <= budget:
            chosen = width
            break
    levels = [need.level(chosen) for need in needs]
    left = budget - sum(need.bytes(lv, ratio) for need, lv in zip(needs, levels, strict=True))
    order = sorted(range(len(needs)), key=lambda i: needs[i].n)
    for i in order:
        if levels[i] == 0:
            continue
        cols, raw = needs[i].bytes(levels[i], ratio), needs[i].bytes(0, ratio)
        if raw > RAW_PREMIUM * cols or raw - cols > left:
            continue
        levels[i], left = 0, left - (raw - cols)
    return chosen, levels
