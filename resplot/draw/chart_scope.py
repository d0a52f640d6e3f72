"""What a chart page's refresh works on (its _Scope): the charts it refreshes, each run's
context at each chart width (the steps an x range shows, the tokens guide) and the fine
buckets a pixel its views ask for, within the hosts' budget. ChartPage
(resplot/draw/charts.py) is one; its series and refresh live there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from resplot.data import xaxis
from resplot.data.model import RunRef
from resplot.data.views import FINE_PER_PIXEL, ViewMemo, fine_points, over_budget
from resplot.draw.track_inputs import RunContext, tokens_guide
from resplot.draw.tracks import BAND_FROM_SERIES, DENSE_PAGE_FINE_PER_PIXEL


@dataclass
class _Scope:
    """What one refresh works on: the charts it refreshes (in a user's view, those the window
    shows), each chart's run contexts, whether the page is dense (its series drawn as bands)
    and the fine buckets a pixel its views ask for, and every run the page names."""

    fresh: list[int]
    contexts: list[dict[RunRef, RunContext]]
    dense: bool
    fine: int
    page_refs: list[RunRef]


class ChartScope:
    """The scope part of a ChartPage (its axes, widths, x map and view are the page's)."""

    def _scope(self, cache, state, specs, refs, xlim, every: bool = False) -> _Scope:
        """What a refresh at `xlim` (None: following the data) works on (see _Scope)."""
        # In a user's view only the charts the window shows; the rest stay `behind`.
        shown_now = None if xlim is None or every or self.in_view is None else self.in_view()
        fresh = [i for i in range(len(specs)) if shown_now is None or i in shown_now]
        dense = sum(len(s.items) for s in specs if s.kind == "line") > BAND_FROM_SERIES
        fine = DENSE_PAGE_FINE_PER_PIXEL if dense else FINE_PER_PIXEL
        # A run's context depends on the chart's width only: worked out once a width (a
        # guided x axis reads a guide series for each run), not once a chart.
        page_refs = list(dict.fromkeys([*refs, *(it.ref for s in specs for it in s.items)]))
        widths = [self._pixels(i) for i in range(len(specs))]
        kept, self._guides = self._guides, {}
        by_width = {
            px: self._contexts(cache, state, page_refs, xlim, px, kept)
            for px in dict.fromkeys(widths)
        }
        contexts = [by_width[px] for px in widths]
        if over_budget(cache, self._fine_points(cache, specs, contexts, fine)):
            fine = 0  # past the budget: level 1 where it gives fewer buckets than pixels
        return _Scope(fresh, contexts, dense, fine, page_refs)

    def _step_range(self, ref: RunRef, mode: str, xlim) -> tuple[float, float]:
        """The steps of a run that an x range shows (±inf: follow all data)."""
        if xlim is None:
            return -np.inf, np.inf
        lo, hi = sorted(xlim)
        if mode == "step":
            return np.floor(lo), np.ceil(hi)
        known = self._x_steps.get(ref)
        if known is None or len(known[0]) < 2:
            return -np.inf, np.inf  # nothing drawn yet to map it by: ask for everything
        x, steps = known
        pad = (steps[-1] - steps[0]) / max(1, len(steps))  # one drawn point's worth of steps
        a = np.interp(lo, x, steps, left=-np.inf, right=np.inf)
        b = np.interp(hi, x, steps, left=-np.inf, right=np.inf)
        if a == np.inf or b == -np.inf:
            # The range lies wholly past the run's data (or before it): a step range just
            # outside it, which holds nothing (±inf there meant "from the start / to the end",
            # and an infinite start crashed the views: the GUI soak found it).
            edge = float(steps[-1] + 1) if a == np.inf else float(steps[0] - 1)
            return edge, edge
        return a - pad, b + pad

    def _contexts(self, cache, state, refs, xlim, pixels, kept=None) -> dict[RunRef, RunContext]:
        """Each run's context at one chart width; its guide's view kept between refreshes
        (`kept`: the last scope's memos), so that a finished run's guide is the same arrays
        and its tracks recompute nothing (each poll on a guided axis redrew every series)."""
        out = {}
        for ref in refs:
            lo, hi = self._step_range(ref, state.x_axis, xlim)
            guide = None
            key = xaxis.guide_key(state.x_axis, cache.keys(ref), cache.events(ref, "metric"))
            if key is not None:
                memo = (kept or {}).get((ref, key, pixels)) or ViewMemo()
                self._guides[(ref, key, pixels)] = memo
                with self._guide_lock:
                    guide = tokens_guide(cache, ref, lo, hi, pixels, key, memo)
            out[ref] = RunContext(cache.run(ref), lo, hi, guide, key)
        return out

    def _guide_ahead(self, cache, ref: RunRef, ctx: RunContext, pixels: int):
        """On the poller's thread (work_ahead): the guide the next refresh will find for a
        run whose counter got points, through the memo that refresh reads (so the same
        arrays); False where there is no memo to go through."""
        memo = self._guides.get((ref, ctx.guide_key, pixels))
        if memo is None:
            return False
        with self._guide_lock:
            return tokens_guide(cache, ref, ctx.lo, ctx.hi, pixels, ctx.guide_key, memo)

    def _fine_points(self, cache, specs, contexts, fine: int) -> dict[str, float]:
        """The raw points each source's host would read for the page's fine views."""
        total: dict[str, float] = {}
        kept, self._fine_kept = self._fine_kept, {}
        for i, spec in enumerate(specs):
            pixels = self._pixels(i)
            for item in spec.items:
                series = (item.ref, item.key)
                summary, ctx = cache.summary(*series), contexts[i][item.ref]
                if summary is None:
                    continue
                # A series' count is worked out again only when its summary or range moved:
                # a poll asked every series of the page (a finished run's too) each time.
                asked = (summary, ctx.lo, ctx.hi, pixels, fine)
                was = kept.get((i, *series))
                if was is not None and was[0] == asked:
                    n = was[1]
                else:
                    n = fine_points(summary, ctx.lo, ctx.hi, pixels, fine)
                self._fine_kept[(i, *series)] = (asked, n)
                total[item.ref.source] = total.get(item.ref.source, 0.0) + n
        return total
