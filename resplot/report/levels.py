"""Which resolution of each series a report embeds, under its size budget. Plain arithmetic,
no I/O: `choose()` is tested on its own.

Every series is embedded either raw (every point) or as columns of one width W (first step,
min and max with their steps, last, as the viewer's tiles: a stored rollup level, or a fine
level the host folds from the raw points, schema/buckets.py). The page builds every coarser
width from those columns itself (exactly: extremes and lasts combine), so a zoom draws at least
one exact column a pixel down to W steps a pixel; a series whose raw points fit is exact at
every zoom. One W serves every series (the finest the budget allows), then the budget left
turns the cheapest series raw, smallest first.
"""

from __future__ import annotations

from dataclasses import dataclass

from schema import buckets
from schema.rollup import STEP_HI, STEP_LO, N

# Bytes a point or a column takes in the file (base64, float64 values: an upper bound; the
# builder measures the real size and asks again with its ratio when values pack as float32).
RAW_BYTES = 18.0  # step delta 1, value 8, wall 4 -> 13 bytes, x 4/3
COLUMN_BYTES = 56.0  # 4 step bytes, 3 values x 8, wall 4, mean 4 -> 36 bytes, x 4/3 (+ slack)
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


def choose(needs: list[Need], budget: float, ratio: float = 1.0) -> tuple[int, list[int]]:
    """(W, each series' level): the finest common width whose estimate fits `budget` bytes
    (the coarsest there is when none does), then series made raw, cheapest first, while the
    budget lasts. `ratio` scales the estimates (measured size / estimated size)."""
    chosen = WIDTHS[-1]
    for width in WIDTHS:
        if sum(need.bytes(need.level(width), ratio) for need in needs) <= budget:
            chosen = width
            break
    levels = [need.level(chosen) for need in needs]
    left = budget - sum(need.bytes(lv, ratio) for need, lv in zip(needs, levels, strict=True))
    order = sorted(range(len(needs)), key=lambda i: needs[i].n)
    for i in order:
        if levels[i] == 0:
            continue
        extra = needs[i].bytes(0, ratio) - needs[i].bytes(levels[i], ratio)
        if extra > left:
            break
        levels[i], left = 0, left - extra
    return chosen, levels
