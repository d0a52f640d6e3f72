"""A chart asked for a log y axis (the loss with "log y", the gradient norm always) whose series
reach 0 or below: a log axis cannot place those values (matplotlib leaves them out, the line
falling off the chart's bottom where it crosses 1e-3), so the chart is drawn linear, every
point inside its limits, and its note says why. From real stores, through the ChartPage the
window uses."""

from __future__ import annotations

import numpy as np
import pytest

from resplot.data.state import ViewState
from resplot.draw.charts import render
from resplot.sources.polling import Loaded
from resplot.sources.spec import parse_spec
from tests.fixtures.stores import BASE_TIME, make_run, new_store

STEPS = range(3000)
NOTE = "y: linear, values ≤ 0 (no log)"


def _store(tmp_path, losses: dict[str, list[tuple[int, float]]], norm: list | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "log.db"
    engine = new_store(path)
    for k, (name, loss) in enumerate(losses.items()):
        points = {"train/loss": loss}
        if norm is not None and k == 0:
            points["train/grad_norm"] = norm
        make_run(engine, name=name, points=points, created_at=BASE_TIME + k)
    engine.dispose()
    return path


def _page(path, **state):
    loaded = Loaded([parse_spec(str(path))])
    loaded.__enter__()
    refs = [r.ref for r in loaded.cache.runs()]
    page = render(loaded.cache, ViewState(page="training", **state), refs, fetch=loaded.fetch)
    return loaded, page


@pytest.fixture
def closing():
    held = []
    yield held
    for loaded in held:
        loaded.__exit__(None, None, None)


def _chart(page, title: str) -> int:
    return next(i for i, s in enumerate(page.specs) if s.title == title)


def test_a_loss_that_goes_below_zero_is_drawn_linear_and_says_so(tmp_path, closing):
    nll = [(s, 2.5 - s / 1000) for s in STEPS]  # a negative log-likelihood: -0.499 at the end
    ce = [(s, 2.0 + np.exp(-s / 500)) for s in STEPS]
    norm = [(s, 0.0 if s < 100 else 1.0 + np.sin(s / 50)) for s in STEPS]  # 0 while frozen
    loaded, page = _page(_store(tmp_path, {"nll": nll, "ce": ce}, norm), log_y=True)
    closing.append(loaded)
    for title in ("Loss", "Gradient norm"):
        i = _chart(page, title)
        ax = page.axes[i]
        assert ax.get_yscale() == "linear"
        assert NOTE in page._notes[i].get_text()
        lo, hi = ax.get_ylim()
        for track in page.tracks[i].values():
            y = np.asarray(track.line.get_ydata(), float)
            y = y[np.isfinite(y)]
            assert len(y) and lo <= y.min() and y.max() <= hi  # every point on the chart
    loss = page.axes[_chart(page, "Loss")]
    assert loss.get_ylim()[0] < -0.45


def test_positive_series_keep_their_log_axis(tmp_path, closing):
    ce = [(s, 2.0 + np.exp(-s / 500)) for s in STEPS]
    norm = [(s, 1.0 + 0.5 * np.sin(s / 50)) for s in STEPS]
    loaded, page = _page(_store(tmp_path, {"ce": ce}, norm), log_y=True)
    closing.append(loaded)
    for title in ("Loss", "Gradient norm"):
        i = _chart(page, title)
        assert page.axes[i].get_yscale() == "log"
        assert NOTE not in page._notes[i].get_text()
    loaded, page = _page(_store(tmp_path / "b", {"ce": ce}, norm), log_y=False)
    closing.append(loaded)
    assert page.axes[_chart(page, "Loss")].get_yscale() == "linear"  # the user's choice: no note
    assert NOTE not in page._notes[_chart(page, "Loss")].get_text()
