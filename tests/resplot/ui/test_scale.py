"""A store of a few million points, written once per session through reslog's public API:
rollups agree with the raw points, extremes are exact at every sample count and zoom, charts
keep a one-step spike and dip at every level, what a first view reads does not grow with the
store, and the tile cache keeps to its bound."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import reslog
from reslog.tools.maintenance import check_store
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from schema.store import buckets

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]

RUNS, STEPS = 4, 100_000
SPIKE, DIP = 61_803, 27_182
KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens", "time/step")


@pytest.fixture(scope="session")
def big_store(tmp_path_factory):
    """RUNS runs × STEPS steps × 5 keys, a valid/loss every 500 steps and GPU utilisation every
    8th step (about 2.6M points); run r's loss has a spike to 50 at SPIKE + r and a dip to -1
    at DIP + r."""
    path = tmp_path_factory.mktemp("big") / "reslog.db"
    for r in range(RUNS):
        run = reslog.init(project="big", name=f"r{r}", store=path, system=False)
        writer = run._writer  # keep the loop behind the bounded buffer, as a test of no drops
        for s in range(STEPS):
            loss = 2.0 + 3.0 * math.exp(-s / 20_000) + 0.001 * ((s * 7919) % 13)
            loss = {SPIKE + r: 50.0, DIP + r: -1.0}.get(s, loss)
            m = {
                "train/loss": loss,
                "train/lr": 1e-3,
                "train/grad_norm": 1.0,
                "train/tokens": float(s * 4096),
                "time/step": 0.25,
            }
            if s % 500 == 0:
                m["valid/loss"] = loss
            if s % 8 == 0:
                m["sys/gpu0/util"] = 97.0
            run.log(m, step=s)
            if s % 512 == 0:
                while writer.pending_points() > 300_000:
                    time.sleep(0.005)
        assert run.finish(timeout=300)
    return path


def test_the_store_holds_every_point_and_its_rollups_agree(big_store):
    with reslog.open(big_store) as st:
        keys = st.keys("r0").set_index("key")
    assert keys.loc["train/loss", "points"] == STEPS
    assert keys.loc["train/loss", "max"] == 50.0 and keys.loc["train/loss", "min"] == -1.0
    report = check_store(str(big_store), sample=12)
    assert report.problems == [], report.problems
    assert any("rollups   agree" in line for line in report.info)


@pytest.mark.parametrize("samples", [1, 10, 300, 1000, 20_000])
def test_history_keeps_the_spike_and_the_dip_at_every_sample_count(big_store, samples):
    with reslog.open(big_store) as st:
        df = st.history("r2", "train/loss", samples=samples)
    assert len(df) <= samples and df["count"].sum() == STEPS
    assert df["max"].max() == 50.0 and df["min"].min() == -1.0
    row = df[df.step <= SPIKE + 2].iloc[-1]  # the row holding the spike
    assert row["max"] == 50.0


@pytest.mark.parametrize("half", [40_000, 4_000, 400, 40, 3])
def test_a_zoom_around_the_spike_keeps_it_exact_at_every_level(big_store, half):
    lo, hi = SPIKE + 1 - half, SPIKE + 1 + half
    with reslog.open(big_store) as st:
        df = st.history("r1", "train/loss", samples=500, start=lo, stop=hi)
        raw = st.points("r1", "train/loss", start=lo, stop=hi)
    assert df["count"].sum() == len(raw) == min(hi, STEPS) - lo  # the widest runs off the end
    assert df["max"].max() == raw["value"].max() == 50.0
    assert df["min"].min() == raw["value"].min()
    assert df.step.min() == lo and df.step.max() <= hi - 1


def drawn_extremes(page, panel: str = "Loss") -> tuple[float, float]:
    """The highest and lowest y any track of a panel draws (its line and its bands)."""
    ys = []
    for spec, tracks in zip(page.specs, page.tracks, strict=False):
        if spec.title != panel:
            continue
        for track in tracks.values():
            y = np.asarray(track.line.get_ydata(), dtype=float)
            ys.append(y[np.isfinite(y)])
            ys += [xy[:, 1] for xy in track.band_xy]
    values = np.concatenate(ys)
    return float(values.max()), float(values.min())


def test_charts_draw_the_spike_and_the_dip_at_every_zoom(big_store):
    state = ViewState(page="training", smoothing=0.0)
    state.log_y = False  # the dip is below zero
    with Loaded([parse_spec(str(big_store))]) as loaded:
        refs = [r.ref for r in loaded.cache.runs() if r.name == "r0"]
        page = render(loaded.cache, state, refs, fetch=loaded.fetch)
        levels = {t.view.level for ts in page.tracks for t in ts.values() if t.view}
        assert max(levels) >= 1  # the whole run is drawn from buckets, not from points
        assert drawn_extremes(page) == (50.0, -1.0)
        ax = page.axes[0]
        for half in (30_000, 3_000, 300, 30):
            page.follow = False
            ax.set_xlim(SPIKE - half, SPIKE + half)
            for _ in range(3):
                page.refresh(loaded.cache, state, refs)
                loaded.fetch()
            page.refresh(loaded.cache, state, refs)
            track = next(iter(page.tracks[0].values()))
            assert track.view.complete
            assert drawn_extremes(page)[0] == 50.0, half
        assert track.view.level == 0  # zoomed in to raw points


def test_a_first_view_reads_what_it_draws_not_the_store(big_store):
    with Loaded([parse_spec(str(big_store))]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        render(loaded.cache, ViewState(page="training"), refs, fetch=loaded.fetch)
        cache = loaded.cache
        rows = sum(len(t) for r in refs for k in cache.keys(r) for t in cache.tiles_of(r, k))
        # ~2.6M points in the store; the page's 5 panels × 4 runs read a few thousand rows each.
        assert rows < 100_000, rows
        assert loaded.cache.tile_bytes < 16 << 20


def test_the_tile_cache_keeps_to_its_bound(big_store):
    state = ViewState(page="training", smoothing=0.0)
    limit = 3 << 20  # more than one view at full resolution needs, far less than the pan
    with Loaded([parse_spec(str(big_store))]) as loaded:
        loaded.cache.set_tile_limit(limit)
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, state, refs, fetch=loaded.fetch)
        ax = page.axes[0]
        for start in range(0, STEPS, 9_000):  # pan across the runs at full resolution
            page.follow = False
            ax.set_xlim(start, start + 1_500)
            page.refresh(loaded.cache, state, refs)
            loaded.fetch()
            page.refresh(loaded.cache, state, refs)
            assert page.incomplete() == 0
            assert loaded.cache.tile_bytes <= limit and loaded.cache.tiles_over == 0
        assert loaded.cache._tiles.evicted > 0


def test_a_view_needing_more_than_the_bound_keeps_its_tiles_and_says_so(big_store, tmp_path):
    """Below what one page needs, the cache holds the page's tiles past the bound (evicting
    them as they came would draw nothing), reports by how much, and the snapshot says so."""
    state = ViewState(page="training", smoothing=0.0)
    with Loaded([parse_spec(str(big_store))]) as loaded:
        loaded.cache.set_tile_limit(100_000)
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, state, refs, fetch=loaded.fetch)
        assert page.incomplete() == 0 and loaded.cache.wanted_count() == 0
        assert loaded.cache.tiles_over > 0
        assert loaded.cache.tile_bytes == loaded.cache.tile_limit + loaded.cache.tiles_over
    out = tmp_path / "page.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "resplot.cli",
            "snapshot",
            str(big_store),
            "-o",
            str(out),
            "--tile-cache-mb",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "above the 1 MB tile cache; all kept for the snapshot" in proc.stderr
    assert "warning" not in proc.stderr and out.stat().st_size > 10_000


def open_window(qtbot, store, tmp_path, tile_limit: int | None = None, paused: bool = False):
    """The real window on `store` through a local source, polling every 0.2 s (`paused`:
    its worker never polls; the test polls the source itself)."""
    from resplot.data.cache import SeriesCache
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow, make_poller

    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    if tile_limit is not None:
        cache.set_tile_limit(tile_limit)
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    if paused:  # before the worker starts: its first poll would run beside the test's own
        win.set_paused(True)
    poller = make_poller(cache, 0.2, win.ask_host_key)
    win.attach_poller(poller)
    win.add_source(str(store))
    return win, cache, poller


def test_the_window_draws_a_stand_in_only_when_it_has_one(qtbot, big_store, tmp_path):
    """While tiles load, the window draws what coarser cached tiles show (after a zoom), but
    with nothing cached to stand in (a first view) it waits and draws the data when it comes."""
    win, cache, poller = open_window(qtbot, big_store, tmp_path)

    def drawn() -> bool:
        page = win.current_page()
        return (
            any(page.tracks)
            and cache.wanted_count() == 0
            and not win._redraw_timer.isActive()
            and page.incomplete() == 0
        )

    qtbot.waitUntil(drawn, timeout=60_000)
    poller.set_paused(True)
    cache.begin_view()  # no view holds the tiles now, so the tight bound evicts them all
    cache.set_tile_limit(1)
    cache.set_tile_limit(256 << 20)
    win.redraw_now()
    assert cache.wanted_count() > 0 and win.tile_wait.awaiting
    assert not win.current_page().shows_data() and not win.tile_wait.stand_in.isActive()
    poller.set_paused(False)
    qtbot.waitUntil(drawn, timeout=60_000)

    poller.set_paused(True)
    page = win.current_page()
    page.axes[0].set_xlim(SPIKE - 300, SPIKE + 300)  # level-1 tiles cached stand in for raw
    win.redraw_now()
    assert cache.wanted_count() > 0 and win.tile_wait.awaiting
    assert page.shows_data() and win.tile_wait.stand_in.isActive()
    poller.set_paused(False)
    qtbot.waitUntil(drawn, timeout=60_000)
    assert {t.view.level for ts in page.tracks for t in ts.values()} == {0}
    poller.stop()


def fine_store(tmp_path: Path) -> Path:
    """3 runs x 20,000 steps of loss and lr: a training page in the fine range."""
    from tests.fixtures.stores import make_run, new_store

    path = tmp_path / "fine.db"
    engine = new_store(path)
    rng = np.random.default_rng(7)
    for r in range(3):
        loss = (3.0 + rng.standard_normal(20_000) * 0.1).tolist()
        make_run(
            engine,
            name=f"r{r}",
            points={
                "train/loss": list(enumerate(loss)),
                "train/lr": [(s, 1e-3 * (1 - s / 20_000)) for s in range(20_000)],
            },
        )
    engine.dispose()
    return path


def test_a_first_view_in_the_fine_range_draws_data_not_empty_axes(qtbot, tmp_path):
    """Runs of 20,000 steps: the charts want fine tiles, which the host folds from every raw
    point. Level 1 is asked for with them and comes first; the page is never drawn as empty
    axes while they load (growing the canvas to fit its charts drew it so, ~0.3 s for a
    training page, while the tiles that had arrived waited), and it ends fine."""
    win, _cache, poller = open_window(qtbot, fine_store(tmp_path), tmp_path)
    page = win.current_page()
    draws = []  # per draw of the page: how many of its series it drew, of how many

    def on_draw(_event) -> None:
        tracks = [t for ts in page.tracks for t in ts.values()]
        draws.append((sum(t.view is not None for t in tracks), len(tracks)))

    win.page_view().canvas.mpl_connect("draw_event", on_draw)

    def done() -> bool:
        return any(page.tracks) and page.incomplete() == 0

    qtbot.waitUntil(lambda: bool(done() and draws and draws[-1][0] == draws[-1][1]), timeout=60_000)
    levels = {t.view.level for ts in page.tracks for t in ts.values()}
    assert levels and all(buckets.is_fine(lv) for lv in levels), levels
    assert not [d for d in draws if d[1] and not d[0]], draws  # series there, none drawn
    poller.stop()


@pytest.mark.parametrize("fine_late", [False, True], ids=["fine-in-time", "fine-late"])
def test_a_first_view_draws_level_1_only_while_the_fine_tiles_are_late(
    qtbot, tmp_path, monkeypatch, fine_late
):
    """Level 1 arrives while the host still folds the fine tiles. On a page with nothing drawn
    yet it waits FIRST_STAND_IN_DELAY_MS for them: fine tiles in time (a local store's) make
    one draw, with them; late ones (a remote page's) find level 1 drawn meanwhile. Once the
    page has shown data, a stand-in waits STAND_IN_DELAY_MS (which keeps a zoom from drawing
    twice). The poller is paused and polled here a reply at a time, and the host is "late"
    by holding the poll after level 1, so what the window does at each step is known."""
    from resplot.ui.pieces import QueuedDraw
    from resplot.ui.tile_wait import FIRST_STAND_IN_DELAY_MS, STAND_IN_DELAY_MS

    win, cache, poller = open_window(qtbot, fine_store(tmp_path), tmp_path, paused=True)
    view = win.page_view()
    page = view.page

    def levels() -> list[int]:
        tracks = [t for ts in page.tracks for t in ts.values()]
        return sorted({t.view.level for t in tracks if t.view is not None})

    drawn = []  # the page's levels at each draw of it (not held)

    queue = QueuedDraw.queue

    def draw_now(queued) -> None:  # drawn now, not in pieces from the next turn of the loop
        if queued.canvas is view.canvas:
            queued.canvas.draw()
        else:
            queue(queued)

    monkeypatch.setattr(QueuedDraw, "queue", draw_now)
    view.canvas.mpl_connect("draw_event", lambda _e: drawn.append(levels()))
    # New data in the same limits is drawn over the saved axes (resplot/ui/layers.py): a draw.
    view.layers.on_blit.append(lambda: drawn.append(levels()))
    source = poller.source(poller.labels()[0])
    source.poll(cache)  # runs and series rows
    win.on_runs_changed()
    win.redraw_now()
    assert cache.wanted_count() and not drawn  # level 1 and fine asked for, nothing drawn
    waits = []  # the stand-in timer when level 1 came: (active, interval)

    def replied(_step) -> None:
        win.redraw_now()
        if levels() == [1] and not waits:
            waits.append((win.tile_wait.stand_in.isActive(), win.tile_wait.stand_in.interval()))
            if fine_late:
                qtbot.wait(3 * FIRST_STAND_IN_DELAY_MS)  # the host still folding

    source.poll(cache, replied)
    assert waits == [(True, FIRST_STAND_IN_DELAY_MS)]
    assert drawn[-1] and all(buckets.is_fine(lv) for lv in drawn[-1])
    # Level 1 drawn only while they were late. How often is not the rule: CI once drew level 1
    # twice in the wait (not seen in 40 runs here; the window was paused after its worker had
    # started, whose first poll could put tiles beside the test's and draw them).
    assert drawn[:-1] if fine_late else not drawn[:-1]
    assert all(levels == [1] for levels in drawn[:-1]), drawn
    drawn.clear()
    page.axes[0].set_xlim(9_000, 9_400)  # raw tiles wanted; fine ones stand in
    win.redraw_now()
    assert page.shows_data() and not drawn
    assert win.tile_wait.stand_in.isActive()
    assert win.tile_wait.stand_in.interval() == STAND_IN_DELAY_MS
    poller.stop()


def test_the_first_runs_lay_out_an_empty_page_at_once(qtbot, tmp_path):
    """The window's first runs are laid out, and their tiles asked for, in the same turn of
    the event loop (a first view: the poll brought everything there is to lay out); once a
    refresh has laid runs out, new runs wait REDRAW_DELAY_MS to be coalesced (a directory of
    stores reports them one store at a time)."""
    from resplot.ui.window import REDRAW_DELAY_MS

    win, cache, poller = open_window(qtbot, fine_store(tmp_path), tmp_path, paused=True)
    source = poller.source(poller.labels()[0])
    source.poll(cache)  # runs and series rows
    win._redraw_timer.stop()
    win.on_runs_changed()
    assert win._redraw_timer.isActive() and win._redraw_timer.interval() == 0
    win.redraw_now()  # the layout
    win._redraw_timer.stop()
    win.on_runs_changed()
    assert win._redraw_timer.isActive() and win._redraw_timer.interval() == REDRAW_DELAY_MS
    poller.stop()


def test_the_window_says_once_when_the_view_holds_more_than_tile_cache_mb(
    qtbot, big_store, tmp_path
):
    # As tile_cache_mb = 1 would (the setting's least is 16).
    win, cache, poller = open_window(qtbot, big_store, tmp_path, tile_limit=1 << 20)
    # Every message the bar shows: another (an alert) may replace this one before a look at
    # the bar's current message (under load the test once missed it so).
    shown: list[str] = []
    win.statusBar().messageChanged.connect(shown.append)
    qtbot.waitUntil(lambda: cache.tiles_over > 0 and cache.wanted_count() == 0, timeout=60_000)
    qtbot.waitUntil(lambda: any("above tile_cache_mb (1 MB)" in m for m in shown), timeout=10_000)
    said = [m for m in shown if "above tile_cache_mb" in m]
    assert len(said) == 1 and str(tmp_path / "settings.json") in said[0]
    tracks = [t for ts in win.current_page().tracks for t in ts.values()]
    assert tracks and all(t.view is not None for t in tracks)  # every series drawn, none dropped
    poller.stop()
