"""A chart's event lines (resplot/draw/events.py): one path a kind however many events, one
line a pixel column, the same pixels as a line an event, set only when they move, and placed
on every x axis."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from resplot.data import xaxis
from resplot.data.cache import SeriesCache
from resplot.draw.events import COLORS, EventLines, EventPlaces, draw_events
from schema.store.records import Event, RunInfo, RunRef

REF = RunRef("local", "/tmp/x.db", "run-a")
T0 = 1_800_000_000.0


def _axes():
    fig = Figure(figsize=(5, 2.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(111)
    ax.set_xlim(0, 1000)
    return fig, ax


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba()).copy()


def test_many_events_are_one_path_a_kind_and_a_line_a_pixel_column():
    _fig, ax = _axes()
    lines = EventLines(ax)
    xs = np.arange(10_000) * 0.1  # 0 to 999.9: ten a data unit, ~2.6 a pixel column
    lines.set({"checkpoint": xs, "alert": np.array([5.0, 7.0])})
    lines.show()
    assert len(lines.collection.get_paths()) == 2  # two kinds, two paths
    assert lines.xs("checkpoint").tolist() == xs.tolist()  # every event kept
    drawn = lines.drawn("checkpoint")
    px = ax.transData.transform(np.column_stack([drawn, np.zeros(len(drawn))]))[:, 0]
    columns = np.floor(px)
    assert len(set(columns)) == len(drawn) == int(ax.bbox.width) + 1  # one a column, each one
    assert lines.drawn("alert").tolist() == [5.0, 7.0]  # in columns of their own
    assert lines.count() == len(drawn) + 2
    assert lines.xs("resume").tolist() == []
    # the colours follow the paths: the checkpoints' grey first, the alerts' red over them
    colors = lines.collection.get_color()
    assert np.allclose(colors[0][:3], [0x7F / 255] * 3)
    assert np.allclose(colors[1][:3], [0xD6 / 255, 0x27 / 255, 0x28 / 255])
    ax.set_xlim(100, 110)  # zoomed in: each event a column of its own, none outside
    lines.show()
    assert lines.drawn("checkpoint").tolist() == pytest.approx(xs[1000:1101].tolist())
    assert lines.drawn("alert").tolist() == []


def test_the_lines_are_the_pixels_of_a_line_an_event():
    xs = [33.0, 210.0, 477.7, 805.0]
    fig, ax = _axes()
    lines = EventLines(ax)
    lines.set({"checkpoint": np.array(xs[:2]), "alert": np.array(xs[2:])})
    lines.show()
    ours = _pixels(fig)
    fig2, ax2 = _axes()
    old = LineCollection(
        [[(x, 0.0), (x, 1.0)] for x in xs],
        linewidths=0.8,
        linestyles="dotted",
        colors=[COLORS["checkpoint"]] * 2 + [COLORS["alert"]] * 2,
        transform=ax2.get_xaxis_transform(),
        zorder=0.5,
    )
    ax2.add_collection(old, autolim=False)
    theirs = _pixels(fig2)
    assert int(np.any(ours != theirs, axis=2).sum()) == 0
    assert int(np.any(ours != _pixels(_axes()[0]), axis=2).sum()) > 100  # lines were drawn


def test_the_same_lines_again_mark_nothing_stale():
    fig, ax = _axes()
    lines = EventLines(ax)
    lines.set({"resume": np.array([100.0, 200.0])})
    lines.show()
    _pixels(fig)
    assert not lines.collection.stale
    lines.set({"resume": np.array([100.0, 200.0])})
    lines.show()
    assert not lines.collection.stale and not fig.stale
    lines.set({"resume": np.array([100.0, 200.0, 200.1])})  # 200.0's column: nothing new
    lines.show()
    assert not lines.collection.stale
    lines.set({"resume": np.array([100.0, 250.0])})
    lines.show()
    assert lines.collection.stale


def test_the_lines_are_laid_out_again_only_when_the_events_limits_or_size_move(monkeypatch):
    fig, ax = _axes()
    lines = EventLines(ax)
    thinned = []
    real = lines._thinned
    monkeypatch.setattr(lines, "_thinned", lambda xs: thinned.append(len(xs)) or real(xs))
    lines.set({"checkpoint": np.array([100.0, 200.0])})
    lines.show()
    laid = len(thinned)
    assert laid == len(COLORS)
    lines.set({"checkpoint": np.array([100.0, 200.0])})  # equal x's, new arrays
    lines.show()
    assert len(thinned) == laid  # nothing moved: kept
    ax.set_xlim(150, 1000)
    lines.show()
    assert len(thinned) == 2 * laid and lines.drawn("checkpoint").tolist() == [200.0]
    fig.set_size_inches(8, 2.5)
    lines.show()
    assert len(thinned) == 3 * laid
    lines.set({"checkpoint": np.array([100.0, 200.0, 300.0])})
    lines.show()
    assert lines.drawn("checkpoint").tolist() == [200.0, 300.0]


def test_a_section_card_has_no_event_lines():
    lines = EventLines()
    lines.set({"alert": np.array([1.0])})
    lines.show()
    assert lines.artists() == [] and lines.count() == 0


def _event(step, wall, kind="checkpoint", i=0):
    return Event(REF, i, wall, step, kind, "info", f"{kind} {i}")


def test_events_are_placed_on_each_x_axis():
    run = RunInfo(REF, "p", "a", "running", T0, T0)
    steps = [100, None, 300]
    walls = [T0 + 60, T0 + 120, T0 + 3600]
    on_steps = xaxis.event_xs("step", run, steps, walls, None)
    assert on_steps[0] == 100 and np.isnan(on_steps[1]) and on_steps[2] == 300
    assert xaxis.event_xs("relative", run, steps, walls, None).tolist() == pytest.approx(
        [60 / 3600, 120 / 3600, 1.0]
    )
    assert xaxis.event_xs("wall", run, steps, walls, None)[2] == pytest.approx((T0 + 3600) / 86400)
    guide = (np.array([0, 1000], np.int64), np.array([0.0, 2e6]))  # 2,000 tokens a step
    tokens = xaxis.event_xs("tokens", run, steps, walls, guide)
    assert tokens[0] == pytest.approx(2e5) and np.isnan(tokens[1])


def test_draw_events_hides_a_kind_and_leaves_stepless_events_off_a_step_axis():
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "a", "running", T0, T0)])
    cache.add_events(
        [
            _event(100, T0 + 1, "checkpoint", 1),
            _event(None, T0 + 2, "alert", 2),  # no step: nowhere on a step axis
            _event(300, T0 + 3, "alert", 3),
            _event(400, T0 + 4, "note", 4),  # not a drawn kind
            _event(500, T0 + 5, "resume", 5),
        ]
    )
    _fig, ax = _axes()
    lines, places = EventLines(ax), EventPlaces()
    left_out = draw_events(lines, places, cache, [REF], {}, "step", set(), None, set())
    lines.show()
    assert not left_out
    assert lines.xs("checkpoint").tolist() == [100.0]
    assert lines.xs("alert").tolist() == [300.0]
    assert lines.xs("resume").tolist() == [500.0]
    draw_events(lines, places, cache, [REF], {}, "step", {"alert"}, None, set())
    lines.show()
    assert lines.xs("alert").tolist() == [] and lines.count() == 2
    draw_events(lines, places, cache, [REF], {}, "wall", set(), None, set())
    assert len(lines.xs("alert")) == 2  # on a wall-clock axis the stepless alert has a place


def test_event_places_are_kept_until_the_runs_events_or_the_axis_change():
    cache = SeriesCache()
    cache.set_runs([RunInfo(REF, "p", "a", "running", T0, T0)])
    cache.add_events([_event(100, T0 + 1, "checkpoint", 1)])
    places = EventPlaces()
    first = places.of(cache, REF, None, "step", frozenset())
    assert first["checkpoint"].tolist() == [100.0]
    assert places.of(cache, REF, None, "step", frozenset()) is first  # nothing changed
    cache.add_events([_event(200, T0 + 2, "checkpoint", 2)])
    again = places.of(cache, REF, None, "step", frozenset())
    assert again["checkpoint"].tolist() == [100.0, 200.0]
    assert places.of(cache, REF, None, "step", frozenset({"checkpoint"})) == {}
    relative = places.of(cache, REF, None, "relative", frozenset())
    assert relative["checkpoint"].tolist() == pytest.approx([1 / 3600, 2 / 3600])
    cache.drop_source(REF.source)  # forgotten: nothing to place
    assert places.of(cache, REF, None, "relative", frozenset()) == {}
