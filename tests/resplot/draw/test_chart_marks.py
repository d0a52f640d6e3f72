"""Run state on the charts, drawn from real stores by the ChartPage the window uses: a NaN
stretch is one marker and a shaded span, a line ends in its run's status, and a loss chart's
y range ignores the step-0 outlier (and says so)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from resplot.data import marks
from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from schema.rules.throttle import THROTTLE_BITS
from tests.fixtures.stores import BASE_TIME, make_run, new_store

STEPS = range(0, 3000)


def _loss(offset: float = 0.0) -> list[tuple[int, float]]:
    return [(s, 10.0 if s == 0 else 2.5 + offset + 2 * np.exp(-s / 300)) for s in STEPS]


@pytest.fixture
def loaded(tmp_path):
    path = tmp_path / "state.db"
    engine = new_store(path)
    nan = [(s, float("nan") if s >= 2000 else v) for s, v in _loss(0.1)]
    make_run(engine, name="nan", points={"train/loss": nan}, created_at=BASE_TIME)
    make_run(engine, name="done", points={"train/loss": _loss(0.2)}, created_at=BASE_TIME + 1)
    make_run(
        engine,
        name="live",
        status="running",
        heartbeat_at=time.time() + 3600,
        points={"train/loss": _loss(0.3)},
        created_at=BASE_TIME + 2,
    )
    make_run(
        engine,
        name="dead",
        status="running",
        heartbeat_at=BASE_TIME + 3 + 2999 + 600,
        points={"train/loss": _loss(0.4)},
        created_at=BASE_TIME + 3,
    )
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as out:
        yield out


def _page(loaded, **state):
    st = ViewState(**state)
    refs = [r.ref for r in loaded.cache.runs()]
    page = render(loaded.cache, st, refs, fetch=loaded.fetch)
    page.figure.canvas.draw()
    names = {r.ref: r.name for r in loaded.cache.runs()}
    tracks = {names[item.ref]: t for item, t in page.tracks[0].items()}
    return page, tracks


def test_a_nan_stretch_is_one_marker_and_a_shaded_span(loaded):
    tracks = _page(loaded)[1]
    bad = tracks["nan"].bad
    assert bad is not None and len(bad.get_xdata()) == 1  # not one per point or bucket
    assert bad.get_xdata()[0] == pytest.approx(2000, abs=64)  # the first NaN (its bucket)
    (span,) = tracks["nan"].bad_span.get_paths()
    xs = span.vertices[:, 0]
    assert xs.min() == pytest.approx(2000, abs=64) and xs.max() == pytest.approx(2999, abs=64)
    assert all(tracks[n].bad is None or not tracks[n].bad.get_visible() for n in ("done", "live"))


def test_each_line_ends_in_its_runs_status(loaded):
    tracks = _page(loaded)[1]
    assert tracks["live"].end.get_marker() == "o" and tracks["live"].end.get_visible()
    assert tracks["dead"].end.get_marker() == "X"  # "running" with a stale heartbeat: crashed
    assert tracks["done"].end is None or not tracks["done"].end.get_visible()
    x, y = tracks["live"].end.get_xdata()[0], tracks["live"].end.get_ydata()[0]
    line_x = np.asarray(tracks["live"].line.get_xdata(), float)
    assert x == line_x.max() and np.isfinite(y)
    # Any status string has a mark; one this viewer does not know gets the neutral one.
    assert marks.end_mark("stalled") == marks.NEUTRAL_END
    assert marks.end_mark("finished") is None


def test_a_mark_alone_strokes_no_line_and_draws_what_a_dashed_one_did(loaded):
    """A live dot and a crash's cross on a step axis are a point each: their artist has no
    line style (matplotlib stroked the one vertex of a dashed line, drawing nothing, at every
    draw of every live mark); the pixels are those of the dashed mark."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    page, tracks = _page(loaded)
    canvas = FigureCanvasAgg(page.figure)
    for name in ("live", "dead"):
        end = tracks[name].end
        assert end.get_visible() and len(end.get_xdata()) == 1
        assert end.get_linestyle() == "None"
    canvas.draw()
    alone = np.asarray(canvas.buffer_rgba()).copy()
    for name in ("live", "dead"):
        tracks[name].end.set_linestyle("--")
    canvas.draw()
    assert np.array_equal(alone, np.asarray(canvas.buffer_rgba()))


def test_the_loss_range_ignores_the_step_zero_outlier_and_says_so(loaded):
    page, _ = _page(loaded)
    lo, hi = page.axes[0].get_ylim()
    assert hi < 6.0 and lo < 2.7  # the curves fill the chart; 10 at step 0 is above it
    assert "top 1 % ignored" in page._notes[0].get_text()
    page, _ = _page(loaded, ignore_outliers=False)
    assert page.axes[0].get_ylim()[1] >= 10.0
    assert "ignored" not in page._notes[0].get_text()


def test_the_run_strip_says_which_runs_are_not_finished(loaded):
    page, _ = _page(loaded)
    labels = [t.get_text() for t in page.strip.legend.get_texts()]
    assert "live · running" in labels and "dead · crashed" in labels and "done" in labels


def test_on_a_time_axis_a_crashed_run_has_a_dashed_tail_to_its_last_heartbeat(loaded):
    tracks = _page(loaded, x_axis="wall")[1]
    dead = next(r for r in loaded.cache.runs() if r.name == "dead")
    end = tracks["dead"].end
    xs = np.asarray(end.get_xdata(), float)
    assert len(xs) == 2 and end.get_linestyle() == "--"
    assert xs[1] == pytest.approx(dead.heartbeat_at / 86400.0)  # wall axis: days
    assert xs[0] == pytest.approx(np.nanmax(np.asarray(tracks["dead"].line.get_xdata(), float)))
    assert list(end.get_markevery()) == [1]  # the cross where it died
    assert len(tracks["live"].end.get_xdata()) == 1  # a live run: its dot, no tail


def test_throttle_reasons_are_one_bar_per_stretch(tmp_path):
    """A power cap held from step 1000 to the end is one bar however many pixel columns it
    covers; a single hw-thermal sample is a short bar of its own; reasons never set draw
    nothing (the page's other charts are left alone)."""
    path = tmp_path / "throttle.db"
    engine = new_store(path)
    flags = [(s, float(0x4 if s >= 1000 else 0) + (0x40 if s == 500 else 0)) for s in STEPS]
    make_run(engine, name="capped", points={"sys/gpu0/throttle": flags}, created_at=BASE_TIME)
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as loaded:
        st = ViewState(page="system")
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, st, refs, fetch=loaded.fetch)
        page.figure.canvas.draw()
    i = next(k for k, spec in enumerate(page.specs) if spec.kind == "throttle")
    (bars,) = page._extra[i]
    rows = {}
    for seg in bars.get_segments():
        (x0, y0), (x1, y1) = seg
        assert y0 == y1  # horizontal bars, one lane per series in each reason's row
        rows.setdefault(round(y0), []).append((x0, x1))
    names = list(THROTTLE_BITS.values())
    assert sorted(names[r] for r in rows) == ["hw thermal", "power cap"]
    (cap,) = rows[names.index("power cap")]
    assert cap[0] == pytest.approx(1000, abs=16) and cap[1] == pytest.approx(3000, abs=16)
    (hot,) = rows[names.index("hw thermal")]
    assert hot[0] <= 500 <= hot[1] and hot[1] - hot[0] < 64
    assert bars.get_label() == "capped GPU0"


@pytest.mark.slow
def test_a_placeholder_before_training_sets_no_y_range(tmp_path):
    # nanoGPT logs mfu = running_mfu * 100 with running_mfu = -1 until it has measured one:
    # -100 at iteration 0, then 30-40 %.
    path = tmp_path / "nanogpt.db"
    engine = new_store(path)
    mfu = [(0, -100.0)] + [(s, 30.0 + 10 * np.sin(s / 700)) for s in range(250, 5001, 250)]
    loss = [(s, 4.0 - s / 5000) for s in range(0, 5001, 250)]
    make_run(engine, name="gpt", points={"mfu": mfu, "train/loss": loss})
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as out:
        page, _ = _page(out)
        (i,) = [i for i, s in enumerate(page.specs) if s.title == "MFU"]
        lo, hi = page.axes[i].get_ylim()
        assert 15 < lo < 30 and 40 < hi < 45  # the measured values fill the chart
        assert "placeholder -100 at the start left out" in page._notes[i].get_text()
        assert page.axes[i].lines[0].get_ydata()[0] == -100  # still drawn, below the range
    # A series that really goes below zero keeps its range.
    engine = new_store(tmp_path / "neg.db")
    make_run(
        engine, name="g", points={"mfu": [(s, -1.0 if s < 2 else s - 10.0) for s in range(20)]}
    )
    engine.dispose()
    with Loaded([parse_spec(str(tmp_path / "neg.db"))]) as out:
        page, _ = _page(out)
        (i,) = [i for i, s in enumerate(page.specs) if s.title == "MFU"]
        assert page.axes[i].get_ylim()[0] < -1 and "placeholder" not in page._notes[i].get_text()


@pytest.mark.parametrize("status", ["crashed", "stalled", "running"])
def test_a_zoom_that_ends_before_the_run_does_shows_no_end_mark(tmp_path, status):
    """A crashed run's cross, a stalled run's diamond, a live dot: drawn where the run's line
    ends. Zoomed to a range the run goes on past, its last point drawn is one past the view's
    right edge, and the mark went there, half cut, as if the run ended at the edge."""
    path = tmp_path / "zoom.db"
    engine = new_store(path)
    beat = time.time() + 3600 if status != "crashed" else None
    run = make_run(
        engine,
        name="r",
        status="running" if beat else status,
        heartbeat_at=beat,
        points={"train/loss": _loss()[:1500]},
    )
    if status == "stalled":  # a fresh heartbeat, no new step (tests/fixtures/sweep.py)
        from sqlalchemy import update

        from schema.store.tables import runs

        with engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.id == run.id).values(stalled_since=beat))
    make_run(engine, name="longer", points={"train/loss": _loss()}, created_at=BASE_TIME + 1)
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as loaded:
        st = ViewState(page="custom", custom_keys=["train/loss"])
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, st, refs, fetch=loaded.fetch)
        track = next(
            t for item, t in page.tracks[0].items() if loaded.cache.run(item.ref).name == "r"
        )
        assert track.end is not None and track.end.get_visible()  # the whole run: its mark
        assert track.end.get_marker() == marks.end_mark(status).marker
        page.follow = False
        for xlim, shown in (((500, 1000), False), ((1000, 2000), True)):
            page.axes[0].set_xlim(*xlim)
            for _ in range(3):
                page.refresh(loaded.cache, st, refs)
                loaded.fetch()
            page.refresh(loaded.cache, st, refs)
            assert track.end.get_visible() is shown, (xlim, track.end.get_xdata())
            if shown:
                assert track.end.get_xdata()[-1] == 1499


def test_after_a_zoom_the_y_axis_fits_the_data_in_view(tmp_path):
    """Zoomed to the flat end of a decaying loss, the y axis kept the whole run's range (2.4
    to 4.5 around values of 2.5-2.6): it fits what is in view, with the chart's outlier rule
    (a spike in view stays out of a loss chart's range, and its note says so), on every chart
    of the page (they share x); a chart whose y the user zoomed keeps it."""
    path = tmp_path / "zoom.db"
    engine = new_store(path)
    loss = [(s, 2.5 + 2 * np.exp(-s / 300) + (50.0 if s == 2500 else 0.0)) for s in STEPS]
    grad = [(s, 1.0 + s / 1000) for s in STEPS]
    make_run(engine, name="r", points={"train/loss": loss, "train/grad_norm": grad})
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as loaded:
        st = ViewState(
            page="custom", custom_keys=["train/loss", "train/grad_norm"], smoothing=0.0, log_y=False
        )
        refs = [r.ref for r in loaded.cache.runs()]
        page = render(loaded.cache, st, refs, fetch=loaded.fetch)
        titles = [s.title for s in page.specs]
        loss_ax = page.axes[next(i for i, t in enumerate(titles) if "oss" in t)]
        grad_ax = page.axes[next(i for i, t in enumerate(titles) if "rad" in t)]
        assert loss_ax.get_ylim()[1] > 4.0  # the whole run: the decay from 4.5
        loss_ax.set_xlim(2000, 2999)  # a zoom (the toolbar's x, outside a refresh)
        assert not page.follow
        for _ in range(3):
            page.refresh(loaded.cache, st, refs)
            loaded.fetch()
        page.refresh(loaded.cache, st, refs)
        in_view = [2.5 + 2 * np.exp(-s / 300) for s in range(2000, 3000)]
        lo, hi = loss_ax.get_ylim()
        assert lo <= min(in_view) and hi >= max(in_view), (lo, hi)
        assert hi - lo < 0.2, (lo, hi)  # not 2.4-4.5, and the spike to 52.5 left out
        assert "top 1 % ignored" in page._notes[page.axes.index(loss_ax)].get_text()
        glo, ghi = grad_ax.get_ylim()
        assert 2.9 < glo < 3.0 < 3.999 < ghi < 4.1, (glo, ghi)
        grad_ax.set_ylim(0, 10)  # the user's own y range on one chart
        page.refresh(loaded.cache, st, refs)
        assert grad_ax.get_ylim() == (0, 10)
        page.reset_view()
        page.refresh(loaded.cache, st, refs)
        assert loss_ax.get_ylim()[1] > 4.0 and grad_ax.get_ylim()[0] < 1.1


def test_an_end_mark_at_the_top_of_the_y_range_is_drawn_whole(loaded):
    """The live run's value is the chart's highest: its dot sat on the axes' top edge, half
    cut by the clip (the 12-run sweep's throughput chart at 1280). A mark whose point is
    inside the chart's limits is drawn whole; one outside them stays clipped."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    st = ViewState(page="custom", custom_keys=["train/loss"], log_y=False, ignore_outliers=False)
    refs = [r.ref for r in loaded.cache.runs()]
    page = render(loaded.cache, st, refs, fetch=loaded.fetch)
    canvas = FigureCanvasAgg(page.figure)
    names = {r.ref: r.name for r in loaded.cache.runs()}
    end = next(t for item, t in page.tracks[0].items() if names[item.ref] == "live").end
    ax = page.axes[0]
    y = end.get_ydata()[-1]
    ax.set_ylim(y - 0.5, y)  # the user's y range: its value exactly at the top edge
    page.refresh(loaded.cache, st, refs)
    assert end.get_visible() and tuple(ax.get_ylim()) == (y - 0.5, y)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())
    x_px = ax.transData.transform((end.get_xdata()[-1], y))[0]
    top = image.shape[0] - round(ax.get_window_extent().y1)  # the top row of the axes
    above = image[top - 4 : top - 1, int(x_px) - 2 : int(x_px) + 3, :3]
    assert (above < 200).any(), "the mark's upper half is cut off at the axes' edge"
    ax.set_ylim(y - 0.5, y - 0.1)  # its value above the range: clipped, not drawn outside
    page.refresh(loaded.cache, st, refs)
    assert end.get_clip_on()


def test_a_point_no_segment_reaches_is_drawn_as_a_dot(tmp_path):
    """A series' only point (a metric logged once) and a value between NaNs: a line through
    them draws no segment there, and they were on no chart. Each gets a dot of the line's
    colour; points a segment reaches get none."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = tmp_path / "lone.db"
    engine = new_store(path)
    gaps = [(s, 1.0 if s in (500, 501, 502, 1500) else float("nan")) for s in range(0, 2000)]
    once = {"final/acc": [(7, 3.0)], "eval/gaps": gaps}
    make_run(engine, name="once", points=once, created_at=BASE_TIME)
    engine.dispose()
    with Loaded([parse_spec(str(path))]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        state = ViewState(page="custom", custom_keys=["final/acc", "eval/gaps"], smoothing=0.0)
        page = render(loaded.cache, state, refs, fetch=loaded.fetch)
        canvas = FigureCanvasAgg(page.figure)
        canvas.draw()
        image = np.asarray(canvas.buffer_rgba())
        lines = {key: line for (_title, _ref, key), line in page.lines().items()}
        for key, x_lone in (("final/acc", [7.0]), ("eval/gaps", [1500.0])):
            line = lines[key]
            assert line.get_marker() == "o"
            x = np.asarray(line.get_xdata(), float)
            assert sorted(x[list(line.get_markevery())]) == x_lone  # not 500-502: a segment
            ax = line.axes
            px, py = ax.transData.transform((x_lone[0], 3.0 if key == "final/acc" else 1.0))
            row = image.shape[0] - round(float(py))
            dot = image[row - 1 : row + 2, int(px) - 1 : int(px) + 2, :3]
            assert (dot < 200).any(axis=2).all(), f"{key}: no dot at its point"


def test_a_run_whose_counter_is_nan_throughout_is_named_not_on_its_x_axis(tmp_path):
    """A tokens counter logged as NaN at every step places no point: the chart's note names
    the run (it had kept the track as placed and drawn one point, or nothing, unsaid)."""
    engine = new_store(tmp_path / "tokens.db")
    loss = _loss()
    tokens = {"nan": float("nan"), "ok": 4096.0}
    for name, per_step in tokens.items():
        counted = [(s, per_step * s) for s in STEPS[::10]]
        make_run(engine, name=name, points={"train/loss": loss, "train/tokens": counted})
    engine.dispose()
    with Loaded([parse_spec(str(tmp_path / "tokens.db"))]) as loaded:
        page, tracks = _page(loaded, x_axis="tokens")
        assert tracks["nan"].unplaced and len(tracks["nan"].line.get_xdata()) == 0
        assert not tracks["ok"].unplaced and len(tracks["ok"].line.get_xdata()) > 100
        assert "not on this x axis (not logged): nan train" in page._notes[0].get_text()
        # "auto" falls back to the run's steps when its counter has no value.
        page, tracks = _page(loaded, x_axis="auto")
        assert not tracks["nan"].unplaced and max(tracks["nan"].line.get_xdata()) >= 2900
