"""A chart page drawn in two layers (matplotlib's blitting recipe,
`galleries/users_explain/animations/blitting.py`): the axes (background, ticks, labels, grid,
titles) are drawn when limits, size or style change, and saved; the series over them (lines,
bands, events, notes, legends, spines: ChartPage.layer_artists) are drawn over the saved
picture. A poll that only adds points inside the followed limits (resplot/data/headroom.py)
therefore costs the series' draw, not the page's: their artists are `animated`, so a change
to them does not mark the figure stale, and a figure that is not stale has nothing new under
its series.

The series of runs that ended (finished, failed, killed, crashed long ago), and a live run's
whose end lies past the view's right edge, are settled (resplot/draw/tiers.py): their artists
sit under every live series' (LIVE_FLOOR) and go into the saved picture, drawn once after
the axes, up to the first artist in drawing order that is not settled
(ChartPage.settled_artists); a poll draws the rest: the
live runs' series and what lies over all series (end marks, notes, legend, spines). A settled
artist changed since (its `stale` flag, which matplotlib sets on any change, an animated
artist's included) or a series moving between the tiers makes the next draw a full one. A
blitted frame is a full draw's pixels: a full draw is the same sequence.

Charts outside the visible part of a scrolled page are left out of a full draw (their axes
`animated` for it) and drawn when they scroll into view. In a user's view (a zoom, a pan) the
page refreshes only the charts in view (ChartPage.behind: the others keep what they drew):
a chart that comes into view behind is left out of the draw too, and the page is refreshed
(`on_behind`), then drawn.

A live series' body (all but its newest pixels) goes into the saved picture too, under every
artist a poll draws, and a poll draws its tail (resplot/ui/tails.py). The picture as it was
before the bodies is kept too: a cut that no longer holds (a live run highlighted, a series
past its next boundary, a new one) is made again from it, the bodies drawn anew, with no full
draw of the page.

A full draw the window queues runs in pieces (resplot/ui/pieces.py): the canvas draws the
axes, then `settled_pieces` the settled series, the cuts and the live tier a chart a piece;
a blit asked for meanwhile waits for it (`after_pieces`).

The hover line (resplot/ui/crosshair.py) saves the page after the series are drawn: its
`draw_event` handler runs after this one (connected later), and a blit hands it the new page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from matplotlib.lines import Line2D
from matplotlib.spines import Spine
from matplotlib.transforms import Bbox

from resplot.draw.limits import quietly
from resplot.draw.plain_draw import draw_mark
from resplot.draw.spines import draw_spines
from resplot.ui.reach import (
    Box,
    changed,
    disjoint,
    join,
    meet,
    reach,
    redraw_box,
    settle,
    whole_pixels,
)
from resplot.ui.region_paint import update_boxes
from resplot.ui.tails import Tails

VIEW_MARGIN_PX = 24  # a chart this near the visible part is drawn with it (its title above)


def _attached(artists: list) -> list:
    """Those of the artists still in a figure."""
    return [a for a in artists if a.get_figure(root=True) is not None]


def _same(now: list, then: list, stale: bool = False) -> bool:
    """Whether two lists hold the same artists in the same order (`stale`: none changed)."""
    return len(now) == len(then) and all(
        a is b and not (stale and a.stale) for a, b in zip(now, then, strict=True)
    )


class Layers:
    def __init__(self, canvas, page, view_rows: Callable[[], tuple[float, float] | None]) -> None:
        """`view_rows`: the canvas rows (logical pixels from its top) the window shows, None
        for all of them."""
        self.canvas, self.page, self.view_rows = canvas, page, view_rows
        self.enabled = True  # False: every draw is a full draw (the benchmark's "before")
        # The axes and settled series as the last full draw left them, the live ones excluded.
        self.background = None
        self.drawn: list[int] = []  # the charts the last full draw drew
        self.settled: list = []  # the settled series' artists in it, chart by chart
        self.tails = Tails()  # the live series cut into a body (in it) and a tail
        self.under_cuts = None  # the saved picture before the bodies were drawn into it
        self._size: tuple | None = None  # the canvas's size at that draw
        self.full_draws = 0  # draws of the whole page (tests and benchmarks read them)
        self.blits = 0  # series drawn over the saved axes
        self.recuts = 0  # blits that cut the live series again first
        self.patches = 0  # blits that drew only the boxes where the series changed
        # The canvas's buffer holds the last frame drawn here (nothing else drew into it since
        # but the hover line, which `before_patch` takes out): a blit may then draw only where
        # the series changed (resplot/ui/reach.py).
        self.intact = False
        # The live artists' reaches (display pixels) as last drawn; None: they draw nothing.
        self.reaches: dict = {}
        self.before_patch: list[Callable[[], None]] = []
        # Asked when a chart in view is behind the page's refresh: refresh the page (and draw).
        self.on_behind: Callable[[], None] | None = None
        self._layered: list[list] | None = None  # during a full draw: each chart's series
        self._marked: list[list] = []  # the series mark() last set `animated`, chart by chart
        self._marked_as = True  # ... to this
        self._pieced = False  # a draw in pieces did the draw_event's work (end_pieces)
        self._put_off = False  # a blit was put off by a draw in pieces (after_pieces)
        self._live_drawn: list = []  # ... the live tier it drew (end_pieces)
        # Told when the series are drawn over the saved axes, before the blit shows them (the
        # hover line, drawn into the same frame).
        self.on_blit: list[Callable[[], None]] = []
        canvas.mpl_connect("draw_event", self._on_draw)

    # -- which charts, which artists ---------------------------------------------------------
    def in_view(self) -> list[int]:
        """The charts that meet the visible part of the canvas (all of them if it is whole)."""
        axes = self.page.axes
        rows = self.view_rows()
        if rows is None:
            return list(range(len(axes)))
        ratio = self.canvas.device_pixel_ratio or 1.0
        height = self.page.figure.bbox.height
        top = height - (rows[0] - VIEW_MARGIN_PX) * ratio  # figure pixels grow upwards
        bottom = height - (rows[1] + VIEW_MARGIN_PX) * ratio
        return [i for i, ax in enumerate(axes) if ax.bbox.y1 >= bottom and ax.bbox.y0 <= top]

    def charts_due(self) -> list[int]:
        """The charts a full draw draws: those in view that the page's last refresh brought
        up to date (not behind)."""
        behind = self.page.behind
        return [i for i in self.in_view() if i not in behind]

    def behind_in_view(self) -> bool:
        """Whether a chart in view is behind the page's last refresh (refresh, then draw)."""
        return bool(self.page.behind.intersection(self.in_view()))

    def shown_charts(self) -> list[int] | None:
        """What the page refreshes (ChartPage.in_view): the charts in view, None for all (every
        draw a full draw of every chart: disabled)."""
        return self.in_view() if self.enabled else None

    def mark(self) -> list[list]:
        """Make every chart's series `animated` (or not, while disabled): a full draw then
        leaves them out, and a change to them does not mark the figure stale. Returns each
        chart's series (ChartPage.layer_artists)."""
        layered = [self.page.layer_artists(i) for i in range(len(self.page.axes))]
        # Only mark() sets them: the same artists marked the same way need no call each (a
        # poll marks ~100 a chart).
        if layered != self._marked or self.enabled != self._marked_as:
            for artists in layered:
                for artist in artists:
                    artist.set_animated(self.enabled)
            self._marked, self._marked_as = [list(a) for a in layered], self.enabled
        return layered

    # -- drawing ---------------------------------------------------------------------------------
    def begin_full_draw(self) -> list:
        """Before the canvas draws the page: leave the charts out of view out of it; returns
        them (their axes, `animated` until end_full_draw)."""
        self._layered = self.mark()  # the draw's series, read once (_on_draw's tiers)
        axes = self.page.axes
        if self.enabled:
            self.drawn = self.charts_due()
            if self.on_behind is not None and self.behind_in_view():
                self.on_behind()  # refreshed, then drawn
        else:
            self.drawn = list(range(len(axes)))
        keep = set(self.drawn)
        hidden = [ax for i, ax in enumerate(axes) if i not in keep and not ax.get_animated()]
        for ax in hidden:
            ax.set_animated(True)  # Figure.draw skips it; set_animated marks nothing stale
        return hidden

    def end_full_draw(self, hidden: list) -> None:
        # (what the draw read of the page holds its artists: a page given back frees them)
        self._layered, self._live_drawn = None, []
        for ax in hidden:
            ax.set_animated(False)

    def release(self) -> None:
        """Drop the saved axes (a page's pixels): the next draw is a full draw."""
        self.background, self.drawn, self.settled, self._size = None, [], [], None
        self._marked = []
        self.under_cuts = None
        self.tails.clear(twins=True)
        self.intact, self.reaches = False, {}
        self._live_drawn, self._put_off = [], False

    def scribbled(self) -> None:
        """Something else drew into the canvas's buffer (a drag's preview): the next blit
        draws the whole page over the saved picture."""
        self.intact = False

    def _tiers(self, layered: list[list] | None = None) -> list[tuple[int, list, list]]:
        """(chart, settled artists, the rest) of each chart drawn, in drawing order
        (`layered`: every chart's ChartPage.layer_artists, if known)."""
        out = []
        for i in self.drawn:
            if i < len(self.page.axes):
                # by zorder: the settled ones first
                artists = self.page.layer_artists(i) if layered is None else layered[i]
                settled = self.page.settled_artists(i)
                k = next((n for n, a in enumerate(artists) if a not in settled), len(artists))
                out.append((i, artists[:k], artists[k:]))
        return out

    def _on_draw(self, _event) -> None:
        if self.canvas.is_saving() or not self.enabled:
            # A saved file's draw: its size and dpi are the file's.
            self.background = self.under_cuts = None
            self.intact = False
            return
        if self._pieced:  # a draw in pieces did all of it (end_pieces)
            self._pieced = False
            return
        tiers = self._tiers(self._layered)
        self._draw(tiers, settled=True)
        for _ in self._over_settled(tiers):
            pass
        self._drawn_whole()

    def settled_pieces(self) -> Iterator[None]:
        """A full draw in pieces (resplot/ui/pieces.py), after the axes: the settled series,
        then the live series' cuts, then the live tier, a chart a piece."""
        tiers = self._tiers(self._layered)
        for i, low, high in tiers:
            # (an artist removed since, its chart refreshed between pieces, draws nothing)
            self._draw([(i, _attached(low), high)], settled=True)
            yield
        yield from self._over_settled(tiers)

    def end_pieces(self) -> bool:
        """The end of a full draw in pieces: False where the settled series drawn are no
        longer the page's (start again). The live tier's changes since it was drawn are for
        `after_pieces`."""
        tiers = self._tiers(self.mark())
        if not _same([a for _i, low, _high in tiers for a in low], self.settled, stale=True):
            return False
        if not _same([a for _i, _low, high in tiers for a in high], self._live_drawn):
            # A chart's refresh between pieces added or removed live artists (quietly: their
            # chart is not stale): the live tier made again at once, from before the cuts.
            self.canvas.restore_region(self.under_cuts)
            self._cut(tiers)
            self._draw(tiers, settled=False)
            self._reached(tiers)
        self._live_drawn = []
        self._drawn_whole()
        self._pieced = True  # the draw_event that follows finds it done
        return True

    def after_pieces(self) -> None:
        """A draw in pieces is shown: the polls it kept from drawing are drawn over it (a
        live series changed since its piece, cut again where its cut no longer holds)."""
        if self._put_off:
            self._put_off = False
            self.present()

    def _over_settled(self, tiers: list) -> Iterator[None]:
        """A full draw's work once the settled series are drawn: save the picture, cut the
        live series and draw their bodies, save it, draw the live tier and note where it
        reaches; a chart a piece."""
        # (Their stale flags were cleared as each was drawn, _draw: here, after the turns a
        # draw in pieces gave the event loop, that would hide a refresh's change between them.)
        self.settled = [a for _i, settled, _rest in tiers for a in settled]
        self.under_cuts = self.canvas.copy_from_bbox(self.page.figure.bbox)
        self._live_drawn = [a for _i, _low, high in tiers for a in high]
        yield from self._cut_pieces(tiers)
        self._size = self.canvas.get_width_height(physical=True)
        self.reaches = {}
        for i, low, high in tiers:
            tier = (i, low, _attached(high))
            self._draw([tier], settled=False)
            self._reached([tier], again=False)
            yield

    def _drawn_whole(self) -> None:
        self.intact = True
        self.full_draws += 1

    def _cut(self, tiers: list) -> None:
        for _ in self._cut_pieces(tiers):
            pass

    def _cut_pieces(self, tiers: list) -> Iterator[None]:
        """Cut the live series and draw their bodies (under all the rest of the live tier)
        into the picture, a chart a piece, and save it."""
        self.tails.clear()
        for i, _settled, live in tiers:
            ax = self.page.axes[i]
            with quietly(ax):
                self.tails.cut(ax, _attached(live))
            yield
        # Nothing cut: the picture is the one before the cuts (a canvas-sized copy saved).
        bbox = self.page.figure.bbox
        self.background = self.canvas.copy_from_bbox(bbox) if self.tails.cuts else self.under_cuts

    def _draw(self, tiers: list, settled: bool) -> None:
        figure = self.page.figure
        for i, low, high in tiers:
            if settled:
                # Quietly: drawing a legend lays its frame out again, which would mark the
                # figure stale (a full draw at the next poll).
                with quietly(self.page.axes[i]):
                    for artist in low:
                        figure.draw_artist(artist)
                        # As drawn (an invisible one too: its draw is a no-op): a change from
                        # now on makes the next draw, or a draw in pieces' end, a full one.
                        artist.stale = False
            else:
                self._draw_live(i, high)

    def _draw_live(self, i: int, artists: list) -> None:
        """Draw these live artists of chart i (in order) over the canvas's buffer."""
        figure = self.page.figure
        renderer = self.canvas.get_renderer()
        with quietly(self.page.axes[i]):
            spines = []  # drawn together (resplot/draw/spines.py), in their place
            for artist in artists:
                if isinstance(artist, Spine):
                    if artist.get_visible():
                        spines.append(artist)
                    continue
                if spines:
                    draw_spines(figure, spines)
                    spines = []
                # An invisible artist draws nothing (one cut is made visible again by a new
                # cut first: Tails.fresh).
                if not artist.get_visible() or self.tails.draw(artist):
                    continue
                # Not cut: all of it (an end mark through the renderer's calls).
                if not (isinstance(artist, Line2D) and draw_mark(renderer, artist)):
                    figure.draw_artist(artist)
            if spines:
                draw_spines(figure, spines)

    # -- where a blit draws ------------------------------------------------------------------
    def _figure_box(self) -> Box:
        w, h = self.canvas.get_width_height(physical=True)
        return (0.0, 0.0, float(w), float(h))

    def _reach(self, artist, renderer, figure_box: Box) -> Box | None:
        """The pixels a live artist's draw may touch (a cut one's: its tail's)."""
        tail = self.tails.tail_box(artist)
        if tail is not None:
            return meet(tail, figure_box) if artist.get_visible() else None
        return reach(artist, renderer, figure_box)

    def _reached(self, tiers: list, again: bool = True) -> None:
        """Note where each live artist of these charts drew (all of them were drawn; `again`:
        forget the others')."""
        renderer = self.canvas.get_renderer()
        figure_box = self._figure_box()
        if again:
            self.reaches = {}
        for _i, _low, high in tiers:
            for artist in high:
                self.reaches[artist] = self._reach(artist, renderer, figure_box)
                settle(artist)

    def _changes(self, tiers: list) -> list[Box] | None:
        """The boxes (whole pixels, disjoint) where live artists changed since the last frame:
        each changed one's reach then and now (empty: nothing changed); None: draw them all
        (an artist not drawn by the last frame)."""
        renderer = self.canvas.get_renderer()
        figure_box = self._figure_box()
        boxes: list[Box] = []
        for _i, _low, high in tiers:
            # One box a chart: its live artists drawn once a poll, not once in each of its
            # boxes (a live series' tail and its legend's new value: the series, the spines
            # and the end mark drawn twice).
            chart_box = None
            for artist in high:
                if not changed(artist):
                    continue
                if artist not in self.reaches:
                    return None
                now = self._reach(artist, renderer, figure_box)
                chart_box = join(chart_box, join(self.reaches[artist], now))
                self.reaches[artist] = now
                settle(artist)
            pixels = None if chart_box is None else whole_pixels(chart_box, figure_box)
            if pixels is not None:
                boxes.append(pixels)
        return disjoint(boxes)

    def _patch(self, tiers: list, boxes: list[Box]) -> None:
        """Put back the saved picture in `boxes` and draw there every live artist that reaches
        into it, in drawing order (resplot/ui/reach.py)."""
        for box in boxes:
            meets = [
                (i, [a for a in high if (r := self.reaches.get(a)) is not None and meet(r, box)])
                for i, _low, high in tiers
            ]
            reaches = [self.reaches[a] for _i, artists in meets for a in artists]

            def draw(meets=meets) -> None:
                for i, artists in meets:
                    if artists:
                        self._draw_live(i, artists)

            redraw_box(self.canvas, self.background, box, reaches, draw)

    def needs_full_draw(self, tiers: list | None = None) -> bool:
        """Whether anything under the live series changed since the last full draw (a limit,
        the size, a title, a new series' artists, a settled series, a series between the
        tiers, ...), or other charts came into view. (A live series' cut is made again by the
        blit: `present`.)"""
        if (
            not self.enabled
            or self.canvas_drawing()
            or self.background is None
            or self.page.figure.stale
            or self._size != self.canvas.get_width_height(physical=True)
            or self.charts_due() != self.drawn
        ):
            return True
        settled = [a for _i, low, _high in tiers or self._tiers() for a in low]
        return not _same(settled, self.settled, stale=True)

    def canvas_drawing(self) -> bool:
        """Whether the canvas is drawing the page in pieces (its buffer is not a frame)."""
        return bool(getattr(self.canvas, "drawing", False))

    def present(self) -> bool:
        """Show the page's current state: its live series over the saved axes and settled
        series when nothing under them changed (True), else a full draw (queued, as
        `draw_idle`). Where the buffer holds the last frame, only the boxes where live
        artists changed are drawn and shown (resplot/ui/reach.py)."""
        tiers = self._tiers(self.mark())
        if self.needs_full_draw(tiers):
            if self.canvas_drawing():
                self._put_off = True  # drawn once it is done (after_pieces)
            self.canvas.draw_idle()
            return False
        fresh = self.tails.fresh([(self.page.axes[i], high) for i, _low, high in tiers])
        # Only where live artists changed, where the buffer holds the last frame and the cuts
        # hold (None: all of the live tier).
        boxes = self._changes(tiers) if fresh and self.intact else None
        if boxes == []:
            return True  # nothing drawn changed
        if not fresh:
            self.canvas.restore_region(self.under_cuts)
            self._cut(tiers)
            self.recuts += 1
        elif boxes is None:
            self.canvas.restore_region(self.background)
        if boxes is None:
            self._draw(tiers, settled=False)
            self._reached(tiers)
        else:
            for hook in self.before_patch:  # the hover line out of the frame
                hook()
            self._patch(tiers, boxes)
            self.patches += 1
        self.intact = True
        for told in self.on_blit:  # the hover line draws itself into the same frame
            told()
        if boxes is None:
            self.canvas.blit(self._shown_bbox())
        else:
            update_boxes(self.canvas, [Bbox.from_extents(*box) for box in boxes])
        self.blits += 1
        return True

    def _shown_bbox(self) -> Bbox:
        """The part of the figure the window shows (a blit outside it repaints nothing)."""
        bbox = self.page.figure.bbox
        rows = self.view_rows()
        if rows is None:
            return bbox
        ratio = self.canvas.device_pixel_ratio or 1.0
        y1 = min(bbox.y1, bbox.height - rows[0] * ratio)
        y0 = max(bbox.y0, bbox.height - rows[1] * ratio)
        return Bbox([[bbox.x0, max(y0, 0.0)], [bbox.x1, max(y1, y0)]])
