"""When and how the main window redraws its page: coalesced requests (a redraw REDRAW_DELAY_MS
after the first, at once for a zoom or pan but no more often than that), the redraw run over
turns of the event loop (resplot/ui/redraw_turns.py: the series warmed, the page refreshed a
chart at a time, its draw held until then), or in one call (`redraw_now`). MainWindow
(resplot/ui/window.py) is one; its widgets, cache, state and timers are its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from PyQt5.QtCore import QTimer

from resplot.data.pages import metric_keys, search_terms
from resplot.data.selection import empty_text, project_size, shown_text
from resplot.draw.charts import ChartPage
from resplot.ui import status_bar
from resplot.ui.page_view import PageView
from resplot.ui.ranks_view import RanksView

REDRAW_DELAY_MS = 50


class WindowRedraws:
    """The redraw part of a MainWindow."""

    def schedule_redraw(self) -> None:
        """Coalesce: however many calls arrive, one redraw runs REDRAW_DELAY_MS later (or
        after the one under way)."""
        self._side_due = True  # (the cache or the state changed: the run table, tree, alerts)
        if self.redraw_turns.busy:
            self.redraw_turns.again = True
        if not self._redraw_timer.isActive():
            self._redraw_timer.start(REDRAW_DELAY_MS)

    def view_changed(self) -> None:
        """A zoom, pan or resize: redraw (and ask for the tiles it needs) at once, but no more
        often than every REDRAW_DELAY_MS while a drag keeps moving the view. A debounce would
        add its whole delay to every single zoom."""
        self.redraw_turns.forget()  # (for the view before)
        since = (time.monotonic() - self._last_redraw) * 1000
        delay = max(0, int(REDRAW_DELAY_MS - since))
        if delay == 0:
            # Posted, like the draw_idle the toolbar asks for right after it moved the limits:
            # the refresh runs first and that one draw shows it. On the redraw timer (a timer
            # event, after posted events) the page was drawn twice, at the new limits with the
            # old columns, then refreshed: a zoom or a pan frame cost two full draws.
            # The redraw timer runs meanwhile: it says a redraw is due (until redraw_now
            # stops it) and stands in should the posted call not come.
            if not self._view_redraw_posted:
                self._view_redraw_posted = True
                QTimer.singleShot(0, lambda at=self._last_redraw: self._posted_redraw(at))
            if not self._redraw_timer.isActive():
                self._redraw_timer.start(REDRAW_DELAY_MS)
            return
        # A redraw already due sooner covers this one; one scheduled later (new data coalesced
        # for REDRAW_DELAY_MS) must not hold up the user's zoom.
        if self._redraw_timer.isActive() and self._redraw_timer.remainingTime() <= delay:
            return
        self._redraw_timer.start(delay)

    def _posted_redraw(self, posted_after: float) -> None:
        self._view_redraw_posted = False
        if self._closed or self._last_redraw != posted_after:
            return  # closed, or a redraw since covered the view change
        self._redraw_due()

    def _refresh_due(self, page: ChartPage) -> bool:
        """Whether a refresh of `page` is due (a redraw asked for, or its warm-up under way):
        a draw of it now would be drawn again after."""
        if self.redraw_turns.pending(page):
            return True
        due = self._redraw_timer.isActive() or self._view_redraw_posted
        return due and self.current_page() is page

    def _redraw_due(self) -> None:
        """The redraw asked for (the timer's, a view change's), a turn of the event loop at a
        time (resplot/ui/redraw_turns.py): the chart page's series worked out first, then its
        charts refreshed one by one, then drawn (in pieces)."""
        if self.state.page == "ranks" or self._closed:
            self.redraw_now()
            return
        page = self.pages[self.state.page].page
        refs = self.plotted_refs()

        def steps() -> Iterator[None]:
            yield from page.warm(self.cache, self.state, refs)
            yield from self._redraw()

        if self.redraw_turns.step(page, steps):
            self._redraw_timer.start(0)  # (a redraw is due meanwhile: callers see it)
        elif self.redraw_turns.again:
            self.redraw_turns.again = False
            self._redraw_timer.start(0)  # what came while it ran

    def work_ahead(self, refs: set) -> None:
        """The poller's hook (its worker thread, new points of `refs` in the cache): the page
        last drawn works out their series' views ahead of the redraw (ChartPage.work_ahead).
        Reads one attribute the GUI thread replaces whole."""
        page = self.ahead_page
        if page is not None:
            page.work_ahead(refs)

    def redraw_now(self) -> None:
        """Refresh the page from the cache and the state, and draw it (in pieces, queued)."""
        self._side_due = True
        self.redraw_turns.forget()
        for _ in self._redraw():
            pass

    def _redraw(self) -> Iterator[None]:
        """redraw_now()'s work, a yield after each chart of a chart page is refreshed."""
        self._redraw_timer.stop()
        self._last_redraw = time.monotonic()
        self.redraw_count += 1
        self.tile_wait.reading()
        # The side (run table, sources tree, alerts) shows the cache, the state and the time,
        # never the view: a zoom or pan leaves it to its own timer. Refreshed at each, its
        # table repainted a row (~4 ms of a zoom's ~57 on the Training page).
        if self._side_due:
            self._side_due = False
            self._refresh_side()
        refs = self.plotted_refs()
        if self.state.assign_looks(refs):
            self.model.looks_changed()  # the table's colour swatches
        runs = self.cache.runs()
        self._runs_laid_out = self._runs_laid_out or bool(runs)
        self.shown_label.setText(
            shown_text(len(refs), len(runs), self.state.auto_tick, project_size(runs))
        )
        if self.state.page == "ranks":
            self.ahead_page = None
            self.ranks.refresh(self.cache, self.state)
            self._after_refresh(self.ranks)
            return
        view = self.pages[self.state.page]
        states = self._source_texts
        loading = [f"{k} ({v})" for k, v in states.items()] or list(
            self.source_labels.values() or self.state.sources
        )
        view.page.empty_text = empty_text(self.state, len(refs), len(runs), loading)
        view.measure()
        yield from view.page.refresh_steps(self.cache, self.state, refs)
        self.ahead_page = view.page
        view.fit()
        if view.search is not None:
            matching = len(metric_keys(self.cache, refs, self.state.metric_filter))
            shown = sum(1 for s in view.page.specs if s.kind != "section")
            folded = len(self.state.collapsed_sections)
            more = "; search to narrow" if matching > shown and not folded else ""
            text = f"showing {shown} of {matching} keys{more}"
            bad = search_terms(self.state.metric_filter)[1]
            if bad:  # taken literally: said, with why
                text += f" · not a regex, matched as text: {'; '.join(bad)}"
            view.count.setText(text)
        self._after_refresh(view)
        view.canvas.queued.resume_held()  # a draw held while the page was refreshed

    def _after_refresh(self, view: PageView | RanksView) -> None:
        """Draw what the page's refresh set, or fetch the tiles it asked for first."""
        self.tile_wait.say_over()
        waiting = self.cache.wanted_count()
        self.loading_label.setText(f"loading {waiting} tiles…" if waiting else "")
        status_bar.tidy(self)
        self.tile_wait.after_refresh(view, waiting)
