"""The Ranks page (resplot/draw/ranks.py, resplot/ui/ranks_view.py): a job's rank x step heatmap
of step time and each phase, rows grouped by host, the straggler outlined and said, the hover
with a rank's breakdown, zoom in steps, and what is not shown said; in `resplot snapshot --page
ranks` and in the window. The job is tests/fixtures/job.py: 4 ranks on two "hosts", each host's
store read through its own source, joined by the job's group."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.patches import Rectangle
from PyQt5.QtCore import QPoint

from resplot.cli import main
from resplot.data.cache import SeriesCache
from resplot.data.state import PAGES, ViewState
from resplot.draw.ranks import NO_JOB, render_ranks
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from schema.store import read
from schema.store.connect import open_store
from tests.fixtures.job import GROUP, default_slow, make_job
from tests.fixtures.stores import make_run, new_store
from tests.fixtures.windows import open_window, settle

STEPS = 2000
SLOW_RANK, SLOW_PHASE, _, SLOW_FIRST, SLOW_LAST = default_slow(STEPS)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """The job's two stores, one a host (made once: the tests only read them)."""
    root = tmp_path_factory.mktemp("job")
    stores = {h: root / f"{h}.db" for h in ("gpu-a", "gpu-b")}
    make_job(stores, steps=STEPS)
    return stores


def loaded(paths):
    cache = SeriesCache()
    sources = [LocalSource(parse_spec(str(p))) for p in paths]
    for source in sources:
        source.poll(cache)
    return cache, sources


def draw(paths, **state):
    cache, sources = loaded(paths)
    view_state = ViewState(page="ranks")
    for name, value in state.items():
        setattr(view_state, name, value)
    try:
        page = render_ranks(
            cache,
            view_state,
            size=(12.8, 6),
            dpi=100,
            fetch=lambda: [s.poll(cache) for s in sources],
        )
    finally:
        for source in sources:
            source.close()
    return page, cache, sources


def stored(path, rank: int, key: str) -> dict[int, float]:
    engine = open_store(str(path), readonly=True)
    try:
        with engine.connect() as conn:
            kid = {v: k for k, v in read.key_names(conn).items()}[key]
            for run_id, run in read.list_runs(conn):
                if run.rank == rank:
                    steps, _, values = read.series(engine, run_id, kid)
                    return dict(zip(steps, values, strict=True))
    finally:
        engine.dispose()
    raise AssertionError(f"no rank {rank} in {path}")


def test_the_map_is_the_job_grouped_by_host_with_the_straggler_outlined(hosts):
    page, _, _ = draw(hosts.values(), ranks_phase="data")
    view = page.view
    assert view is not None and view.complete and page.phase == "data"
    assert page.follow  # drawing set the limits, not the user: still following every step
    # The image is the phase's exact per-cell largest values, rows by host then rank.
    assert [(r.rank, r.host) for r in view.rows] == [
        (0, "gpu-a"),
        (1, "gpu-a"),
        (2, "gpu-b"),
        (3, "gpu-b"),
    ]
    shown = np.ma.filled(page.image.get_array(), np.nan)
    assert np.array_equal(shown, view.matrices["data"].vmax, equal_nan=True)
    assert page.image.get_extent() == [view.edges[0], view.edges[-1], 4, 0]
    texts = [a.get_text() for a in page._host_artists if hasattr(a, "get_text")]
    assert texts == ["gpu-a", "gpu-b"]
    assert [t.get_text() for t in page.ax.get_yticklabels()] == ["0", "1", "2", "3"]
    # The straggler: rank 2's row outlined over its stretch, and said above the map.
    (outline,) = [a for a in page._artists if isinstance(a, Rectangle)]
    assert int(outline.get_y()) == SLOW_RANK
    assert outline.get_x() <= SLOW_FIRST + 8 and outline.get_x() + outline.get_width() >= SLOW_LAST
    said = page.mark_texts[0].get_text()
    assert said.startswith(f"▭ straggler: rank {SLOW_RANK} on gpu-b: {SLOW_PHASE} +")
    assert "the other ranks wait" in said
    assert "llama-350m-ddp (4 ranks, 2 hosts)" in page.title.get_text()
    assert f"job {GROUP}" in page.title.get_text() and "data time" in page.title.get_text()
    # Not shown as it is: a cell is several steps, and the rule judged bucket means.
    assert page.note.get_text().startswith(f"a cell is {view.cell_steps} steps")
    assert view.cell_steps > 1 and "stragglers judged on means of" in page.note.get_text()
    # Hovering a cell: that rank's breakdown, and the alert marked on it.
    middle = (SLOW_FIRST + SLOW_LAST) / 2
    hover = page.hover_text(middle, SLOW_RANK + 0.5)
    assert hover.startswith(f"rank {SLOW_RANK} on gpu-b, step ")
    for phase in ("step", "data", "forward", "backward", "comm"):
        assert f"\n  {phase}: " in hover
    assert f"\nstraggler: rank {SLOW_RANK} on gpu-b" in hover
    assert "straggler" not in page.hover_text(middle, 0.5)
    assert page.hover_text(middle, 7.5) is None and page.hover_text(None, None) is None


def test_the_page_opens_on_each_ranks_own_work_beside_its_step_time(hosts):
    page, _, _ = draw(hosts.values())  # the default: phase "step"
    view = page.view
    assert page.phase == "step" and page.pair and page.shown == "own work"
    assert page.axes == [page.ax, page.ax_step] and page.ax_step.get_visible()
    own, step = view.matrices["own work"].vmax, view.matrices["step"].vmax
    assert np.array_equal(np.ma.filled(page.image.get_array(), np.nan), own, equal_nan=True)
    assert np.array_equal(np.ma.filled(page.image_step.get_array(), np.nan), step, equal_nan=True)
    assert page.image_step.norm is page.image.norm  # one colour scale: the two compare
    # In the slow stretch every rank's step is as slow; only rank 2's own work is.
    middle = view.column_of((SLOW_FIRST + SLOW_LAST) // 2)
    others = [r for r in range(4) if r != SLOW_RANK]
    assert np.ptp(step[:, middle]) < 0.05 * step[SLOW_RANK, middle]
    assert own[SLOW_RANK, middle] > max(own[others, middle]) + 0.15
    # The straggler outlined on both maps, each map captioned, the scores beside the rows.
    outlines = [a for a in page._artists if isinstance(a, Rectangle)]
    assert sorted((o.axes is page.ax, int(o.get_y())) for o in outlines) == [
        (False, SLOW_RANK),
        (True, SLOW_RANK),
    ]
    assert page.ax.get_title(loc="left").startswith("own work: step minus the wait")
    assert page.ax_step.get_title(loc="left").startswith("step time (time/step)")
    scores = view.scores("own work")
    assert scores[SLOW_RANK][0] < 0.75 and scores[SLOW_RANK][1] < 0.75
    assert all(min(scores[r]) > 0.9 for r in others)
    said = {t.get_text() for t in page._artists if hasattr(t, "get_text")}
    assert f"{scores[SLOW_RANK][0]:.2f} · {scores[SLOW_RANK][1]:.2f}" in said
    assert "own work and step time" in page.title.get_text()


def recipe_job(tmp_path, steps: int = 1000):
    """The job as docs/ranks.md's recipe logs it: data, forward, backward (holding the wait for
    the slowest rank, as DDP's backward does) and optimizer, no time/step, no time/comm; each
    log() at the end of a step, so its wall is the step's end."""
    from tests.fixtures.job import HOSTS, NAME, default_slow, job_series

    series = job_series(steps, default_slow(steps))
    stores = {h: tmp_path / f"{h}.db" for h in ("gpu-a", "gpu-b")}
    engines = {h: new_store(p) for h, p in stores.items()}
    step_time = np.array([v for _, v in series[0]["time/step"]])  # lockstep: every rank's
    walls = 1.7e9 + np.cumsum(step_time)
    for rank, host in HOSTS.items():
        keys = series[rank]
        comm = np.array([v for _, v in keys["time/comm"]])
        keys["time/backward"] = [
            (s, v + c) for (s, v), c in zip(keys["time/backward"], comm, strict=True)
        ]
        logged = ("time/data", "time/forward", "time/backward", "time/optimizer")
        points = {
            k: [(s, v, float(w)) for (s, v), w in zip(keys[k], walls, strict=True)] for k in logged
        }
        make_run(
            engines[host],
            name=f"{NAME}-rank{rank}",
            host=host,
            rank=rank,
            world_size=4,
            group="recipe",
            points=points,
        )
    for engine in engines.values():
        engine.dispose()
    return stores, walls


def test_a_job_without_time_step_gets_its_step_time_from_the_log_intervals(tmp_path):
    from resplot.data.ranks import STEP_INTERVALS, job_view

    stores, walls = recipe_job(tmp_path)
    cache, sources = loaded(stores.values())
    try:
        state = ViewState(page="ranks")
        page = render_ranks(
            cache, state, size=(12.8, 6), dpi=100, fetch=lambda: [s.poll(cache) for s in sources]
        )
        # Zoomed in, a cell is one step: the wall time from the previous log() call.
        for _ in range(50):
            zoom = job_view(cache, "recipe", 900, 960, 400)
            if zoom is not None and zoom.complete:
                break
            for source in sources:
                source.poll(cache)
    finally:
        for source in sources:
            source.close()
    view = page.view
    assert view is not None and view.step_from == STEP_INTERVALS
    assert "step time: the interval between a rank's log() calls (no time/step)" in (
        " ".join(page.note.get_text().split())
    )
    assert page.ax_step.get_title(loc="left").startswith("step time: the interval between")
    # Without comm, own work cannot be told from waiting: the map above is the phase rank 2
    # is named in, outlined there and on the step time.
    assert page.shown == "data" and "the phase rank 2 is named in" in page.ax.get_title(loc="left")
    assert [s.rank for s in view.stragglers] == [2] and view.stragglers[0].phase == "data"
    outlines = [a for a in page._artists if isinstance(a, Rectangle)]
    assert {int(o.get_y()) for o in outlines} == {2} and len(outlines) == 2
    # Scored as steps that wait for no one: rank 2's 0.33 s step 0.2 s longer (0.62), the
    # others whole (their data waits of a millisecond or two, alone, would score 0.5-0.7).
    scores = view.scores("data")
    assert min(scores[2]) > 0.55 and max(scores[2]) < 0.7, scores
    assert all(min(scores[r]) > 0.9 for r in (0, 1, 3)), scores
    assert zoom.level == 0 and zoom.cell_steps == 1
    for step in (901, 930, 960):
        got = zoom.matrices["step"].vmax[:, zoom.column_of(step)]
        assert got == pytest.approx(walls[step - 1] - walls[step - 2], rel=1e-9)


def test_zoomed_in_a_cell_is_one_step_and_holds_its_value(hosts):
    cache, sources = loaded(hosts.values())
    state = ViewState(page="ranks")
    state.ranks_phase = "data"
    try:
        page = render_ranks(cache, state, fetch=lambda: [s.poll(cache) for s in sources])
        page.ax.set_xlim(980, 1020)  # what the toolbar's zoom does
        assert not page.follow
        for _ in range(10):
            page.refresh(cache, state)
            if page.view.complete:
                break
            for source in sources:
                source.poll(cache)
    finally:
        for source in sources:
            source.close()
    view = page.view
    assert view.complete and view.level == 0 and view.cell_steps == 1
    assert view.edges[0] <= 980 and view.edges[-1] >= 1020
    assert tuple(page.ax.get_xlim()) == (980, 1020)  # the user's zoom is kept
    truth = stored(hosts["gpu-b"], SLOW_RANK, "time/data")
    column = view.column_of(1000)
    assert view.matrices["data"].vmax[SLOW_RANK, column] == truth[1000]
    assert page.note.get_text().startswith("a cell is 1 step")
    assert view.judged_per == 1 and "judged on means" not in page.note.get_text()


def test_ranks_no_source_holds_are_said_and_no_job_is_said_plainly(hosts, tmp_path):
    page, _, _ = draw([hosts["gpu-a"]])
    assert page.view.missing == [2, 3]
    assert "ranks 2, 3 of 4 in no source" in page.note.get_text()
    assert "(2 of 4 ranks, 1 host)" in page.title.get_text()
    engine = new_store(tmp_path / "single.db")
    make_run(engine, name="one-gpu", points={"time/step": [(1, 0.3)]})
    engine.dispose()
    page, _, _ = draw([tmp_path / "single.db"])
    assert page.view is None and page.axes == []
    assert page.message.get_text() == NO_JOB


@pytest.mark.slow
def test_snapshot_draws_the_ranks_page_and_says_what_is_wrong(hosts, tmp_path, capsys):
    a, b = (str(p) for p in hosts.values())
    out = tmp_path / "ranks.png"
    assert main(["snapshot", a, b, "--page", "ranks", "--phase", "comm", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    err = capsys.readouterr().err
    assert f"ranks page: job {GROUP}, 4 ranks, comm" in err
    # Both local stores were read for the cells' tiles (each its own source), not only the last.
    assert "warning" not in err, err
    engine = new_store(tmp_path / "single.db")
    make_run(engine, name="one-gpu", points={"time/step": [(1, 0.3)]})
    engine.dispose()
    for argv, message in (
        ([str(tmp_path / "single.db")], "No multi-rank job in these sources"),
        ([a, "--phase", "bogus"], "--phase bogus: the job logged no such phase; its phases: step"),
        ([a, b, "--job", "nope"], f"--job nope: no such job in the given sources; jobs: {GROUP}"),
    ):
        assert main(["snapshot", *argv, "--page", "ranks", "-o", str(tmp_path / "x.png")]) != 0
        err = capsys.readouterr().err
        assert err.startswith("resplot: error:") and message in err, err


@pytest.mark.integration
def test_the_window_shows_the_page_once_a_job_arrives_and_hovers_a_cell(qtbot, hosts, tmp_path):
    engine = new_store(tmp_path / "single.db")
    make_run(engine, name="one-gpu", points={"train/loss": [(1, 3.0), (2, 2.9)]})
    engine.dispose()
    win = open_window(qtbot, [tmp_path / "single.db"], tmp_path / "settings.json", runs=1)
    ranks_tab = PAGES.index("ranks")
    assert not win.tabs.isTabVisible(ranks_tab)  # no job: no Ranks tab
    for path in hosts.values():
        win.add_source(str(path))
    qtbot.waitUntil(lambda: len(win.cache.runs()) == 5, timeout=30_000)
    qtbot.waitUntil(lambda: win.tabs.isTabVisible(ranks_tab), timeout=10_000)
    win.set_page("ranks")
    settle(qtbot, win)
    page = win.ranks.page
    qtbot.waitUntil(lambda: page.view is not None and page.view.complete, timeout=30_000)
    assert win.current_page() is page and win.tabs.currentIndex() == ranks_tab
    assert win.ranks.phase_combo.count() == 8 and not win.ranks.job_combo.isVisible()
    # Hover rank 2's cell in the middle of its slow stretch.
    fx, fy = page.ax.transData.transform(((SLOW_FIRST + SLOW_LAST) / 2, SLOW_RANK + 0.5))
    ratio = win.ranks.canvas.device_pixel_ratio or 1.0
    at = QPoint(int(fx / ratio), int((page.figure.bbox.height - fy) / ratio))
    qtbot.mouseMove(win.ranks.canvas, at)
    qtbot.waitUntil(win.ranks.hover.isVisible, timeout=5000)
    text = win.ranks.hover.text()
    assert text.startswith(f"rank {SLOW_RANK} on gpu-b, step ") and "straggler: rank 2" in text
    hover = win.ranks.hover.geometry()
    assert not hover.contains(at)  # beside the pointer, not over the hovered cell
    # Another phase from the chooser: kept in the view state, drawn.
    win.ranks.phase_combo.setCurrentText("comm")
    win.ranks.phase_combo.activated.emit(win.ranks.phase_combo.currentIndex())
    assert win.state.ranks_phase == "comm"
    settle(qtbot, win)
    assert page.phase == "comm" and "comm time" in page.title.get_text()
    win.ranks.stat_combo.activated.emit(win.ranks.stat_combo.findData("mean"))
    settle(qtbot, win)
    assert win.state.ranks_stat == "mean" and "mean of each cell" in page.title.get_text()
    win.close()


@pytest.mark.integration
def test_a_job_row_unfolds_in_the_window_and_opens_the_ranks_page(qtbot, hosts, tmp_path):
    from resplot.ui.run_menu import job_menu

    win = open_window(qtbot, list(hosts.values()), tmp_path / "settings.json", runs=4)
    table = win.table
    (job,) = [i for i in table._all_rows() if not i.parent().isValid()]
    assert table.ref_at(job) is None and win.model.data(table.proxy.mapToSource(job)).startswith(
        "llama-350m-ddp (4 ranks, 2 hosts)"
    )
    assert not table.view.isExpanded(job)  # one row until unfolded
    rank3 = next(r.ref for r in win.cache.runs() if r.rank == 3)
    win.highlight(rank3)  # a click on its line: its row selected, its job unfolded
    assert table.view.isExpanded(job) and table.selected_refs() == [rank3]
    menu = job_menu(win, job)
    texts = [a.text() for a in menu.actions()]
    assert texts == ["Hide its 4 runs", "Show on the Ranks page"]  # the default selection
    menu.actions()[1].trigger()
    assert win.state.page == "ranks" and win.state.ranks_job == GROUP
    menu.actions()[0].trigger()
    assert win.state.ticked == [] and not win.state.auto_tick
    win.close()


def test_a_hang_is_outlined_from_its_step_on_the_rank_that_never_came(tmp_path):
    import time

    from tests.reslog.tools.test_jobs import stall
    from tests.schema.test_rank_rules import WAITING_IN_BACKWARD, blocked_here
    from tests.schema.test_rank_rules import stack_of_a_thread_blocked_in as stack_in

    stores = {h: tmp_path / f"{h}.db" for h in ("gpu-a", "gpu-b")}
    made = make_job(stores, steps=300, healthy=True, status="running", heartbeat_at=time.time())
    for rank, run in made.items():
        body = stack_in(blocked_here) if rank == 1 else WAITING_IN_BACKWARD
        stall(stores["gpu-a" if rank < 2 else "gpu-b"], run.uid, body)
    page, _, _ = draw(stores.values())
    view = page.view
    assert view.hang is not None and view.hang.culprits == [1]
    (mark,) = view.marks
    assert mark.kind == "hang" and mark.rows == (1,) and mark.last is None
    outlines = [a for a in page._artists if isinstance(a, Rectangle)]
    assert [o.axes for o in outlines] == [page.ax, page.ax_step]  # on both maps
    for outline in outlines:
        assert int(outline.get_y()) == 1  # rank 1's row: its last cell, where it stopped
        assert outline.get_x() == view.edges[view.column_of(300)]
        assert outline.get_x() + outline.get_width() == view.edges[-1]
    said = page.mark_texts[0].get_text()
    assert said.startswith("▭ hang: hung collective after step 300")
    assert "rank 1 on gpu-a" in " ".join(said.split())
    # The caption wraps: every text of the page inside the figure, the frame chain whole.
    renderer = page.figure._get_renderer()
    page.figure.draw(renderer)
    width = page.figure.bbox.width
    for text in [page.title, page.note, *page.mark_texts, page.ax.title, page.ax_step.title]:
        if text.get_text():
            box = text.get_window_extent(renderer)
            assert box.x0 >= 0 and box.x1 <= width, text.get_text()
    assert "\n" in said and "blocked_here" in said.replace("\n", " ")
    # Above every map, the row titles do not run into the alerts: the maps start below them.
    lowest = min(t.get_window_extent(renderer).y0 for t in page.mark_texts if t.get_text())
    assert page.ax.title.get_window_extent(renderer).y1 <= lowest + 1
    assert "blocked_here" in page.hover_text(view.edges[-1] - 1, 1.5)


@pytest.mark.slow
def test_a_few_huge_cells_take_the_top_colour_and_the_colour_bar_says_so(tmp_path):
    stores = {h: tmp_path / f"{h}.db" for h in ("gpu-a", "gpu-b")}
    make_job(stores, steps=2000, slow=(1, "data", 5.0, 1000, 1001))  # one 5 s hiccup
    page, cache, _ = draw(stores.values(), ranks_phase="data")
    vmax = page.view.matrices["data"].vmax
    high = page.image.norm.vmax
    assert page.colorbar.extend == "max" and high < 0.1 < np.nanmax(vmax)
    assert f"(over {high * 1000:.1f} ms: the top colour)" in page.cax.get_ylabel()
    state = ViewState(page="ranks")
    state.ranks_phase = "forward"  # nothing to clip: the colour bar made again without
    page.refresh(cache, state)
    assert page.colorbar.extend == "neither" and "top colour" not in page.cax.get_ylabel()
    assert page.image.norm.vmax == np.nanmax(page.view.matrices["forward"].vmax)
    page.save(tmp_path / "x.png")  # and it draws
