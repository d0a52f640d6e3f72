"""A chart page's back and forward views, bounded (issue 31, memory flat).

matplotlib's toolbar pushes a view of every axes of the figure onto its stack at each zoom and
pan (a dict of limits and two position boxes an axes) and keeps them all: with 46 axes (the All
page) 237 objects for the collector a push, for as long as the page is shown. In the soak they
were most of what grew after minute 5 (tuples and `Bbox`es held by the toolbar's stack), each
one more object for every full pass of the cyclic collector to traverse. Here the history holds
at most VIEWS_HELD views beside the first (Home), each the x and y limits and autoscale flags
of the navigable axes, held weakly (a chart built anew leaves no axes alive here).
"""

from __future__ import annotations

import weakref

VIEWS_HELD = 50  # back and forward views kept beside the first (Home)


def _view(figure) -> list[tuple]:
    """The limits and autoscale flags of every navigable axes of the figure, as
    matplotlib's toolbar takes them (its `_get_view`: what `Axes.set` takes back)."""
    return [
        (
            weakref.ref(ax),
            {
                "xlim": ax.get_xlim(),
                "ylim": ax.get_ylim(),
                "autoscalex_on": ax.get_autoscalex_on(),
                "autoscaley_on": ax.get_autoscaley_on(),
            },
        )
        for ax in figure.axes
        if ax.get_navigate()
    ]


def _same(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(
        ra() is rb() and va == vb for (ra, va), (rb, vb) in zip(a, b, strict=True)
    )


class ViewHistory:
    """The views a page's toolbar moves between: push, back, forward, home."""

    def __init__(self, held: int = VIEWS_HELD) -> None:
        self.held = held
        self.views: list[list[tuple]] = []
        self.at = -1  # the view shown (-1: none pushed)

    def push(self, figure) -> None:
        """The figure's view now after the one shown (the views forward of it dropped); the
        same view as the one shown is not pushed twice (a press pushes one where matplotlib's
        own stack is empty, which it always is here)."""
        view = _view(figure)
        if self.at >= 0 and _same(self.views[self.at], view):
            return
        del self.views[self.at + 1 :]
        self.views.append(view)
        if len(self.views) > self.held + 1:
            del self.views[1]  # the oldest after Home
        self.at = len(self.views) - 1

    def clear(self) -> None:
        self.views, self.at = [], -1

    def can_back(self) -> bool:
        return self.at > 0

    def can_forward(self) -> bool:
        return self.at < len(self.views) - 1

    def back(self) -> bool:
        return self._go(max(self.at - 1, 0))

    def forward(self) -> bool:
        return self._go(min(self.at + 1, len(self.views) - 1))

    def home(self) -> bool:
        return self._go(0)

    def _go(self, at: int) -> bool:
        """Show view `at` (False: nothing pushed). Axes gone since are skipped."""
        if not self.views:
            return False
        self.at = at
        for ref, limits in self.views[at]:
            ax = ref()
            figure = None if ax is None else ax.get_figure(root=True)
            if figure is not None and any(ax is other for other in figure.axes):
                ax.set(**limits)
        return True
