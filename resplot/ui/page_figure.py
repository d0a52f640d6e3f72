"""The figure of a page in the window: matplotlib's, less its pick events (resplot uses none).

matplotlib connects `Figure.pick` to every mouse press and scroll, and it asks each artist of
the figure for its children to find what was picked. An axis asked for its children makes a
Tick (a grid line, two marks and two labels: six artists) for every tick its locator gives,
which resplot never draws (AxisArt draws an axis as one artist: resplot/draw/axis_art.py).
In a soak of the window (scripts/bench/bench_soak.py) the clicks, zooms and pans of two
minutes had made 381 such Ticks on 44 charts, a third of the window's artists, and every full
pass of Python's collector traverses them (docs/benchmarks/viewer.md).
"""

from __future__ import annotations

from matplotlib.figure import Figure


class PageFigure(Figure):
    """A figure whose mouse presses and scrolls pick nothing."""

    def pick(self, mouseevent) -> None:
        """No artist is pickable: nothing to look for (and no axis made to list its ticks)."""
