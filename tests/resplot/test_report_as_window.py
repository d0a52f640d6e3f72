"""The report draws as the window does, in a real headless Chromium (tests/fixtures/browser.py):
a lone point is a dot, a zoom between two points fits the segment across it, and numbers read
the same (tick labels, the readout's x). Each test names the window's test of the same thing."""

from __future__ import annotations

import random

from resplot.cli import main
from resplot.data.numbers import short_value
from resplot.draw.ticks import compact_labels
from tests.fixtures.browser import console_errors, open_report
from tests.fixtures.stores import BASE_TIME, make_run, new_store


def test_a_point_no_segment_reaches_is_a_dot(tmp_path, browser):
    """As in the window (tests/resplot/draw/test_chart_marks.py): a value between NaNs was a
    moveTo with no lineTo after it, drawn nowhere; it is a dot of the series' colour."""
    path = tmp_path / "lone.db"
    engine = new_store(path)
    loss = [(s, 1.0 if s in (500, 501, 502, 1500) else float("nan")) for s in range(2000)]
    make_run(engine, name="lone", points={"train/loss": loss}, created_at=BASE_TIME)
    engine.dispose()
    out = tmp_path / "lone.html"
    assert main(["report", str(path), "-o", str(out), "--pages", "training"]) == 0
    open_report(browser, out)
    assert console_errors(browser) == []
    found = browser.execute_script(
        """
        const c = resplotReport.charts[0], dpr = window.devicePixelRatio || 1;
        const color = c.panel.items[0].color;
        const probe = document.createElement("canvas").getContext("2d");
        probe.fillStyle = color; probe.fillRect(0, 0, 1, 1);
        const want = probe.getImageData(0, 0, 1, 1).data;
        const ctx = c.canvas.getContext("2d");
        const near = (x) => {
          const col = Math.round(resplotReport.pixelOf(0, x) * dpr);
          const img = ctx.getImageData(col - 3, 0, 7, c.canvas.height).data;
          for (let i = 0; i < img.length; i += 4)
            if (Math.abs(img[i] - want[0]) + Math.abs(img[i + 1] - want[1])
                + Math.abs(img[i + 2] - want[2]) < 60 && img[i + 3] > 200) return true;
          return false;
        };
        return [near(1500), near(1000)];
        """
    )
    assert found == [True, False]  # the lone point's dot; nothing where every value is NaN


def test_a_zoom_between_two_points_fits_the_segment_across_it(tmp_path, browser):
    """As in the window (tests/resplot/draw/test_follow_limits.py): a loss logged every 1,000
    steps zoomed to 1,200-1,800 has no value inside; the y range was 0-1 by default, and the
    segment from 51 to 52 across the view was off the chart."""
    path = tmp_path / "sparse.db"
    engine = new_store(path)
    loss = [(s, 50.0 + s / 1000) for s in range(0, 10_001, 1000)]
    make_run(engine, name="sparse", points={"train/loss": loss}, created_at=BASE_TIME)
    engine.dispose()
    out = tmp_path / "sparse.html"
    assert main(["report", str(path), "-o", str(out), "--pages", "training"]) == 0
    open_report(browser, out)
    browser.execute_script("resplotReport.setRange(1200, 1800)")
    frame = browser.execute_script(
        "const f = resplotReport.charts[0].frame; return [f.y0, f.y1, f.log]"
    )
    lo, hi = (10**v for v in frame[:2]) if frame[2] else frame[:2]
    assert lo < 51.2 and 51.8 < hi < 53, frame  # the segment's 51.2-51.8, fitted
    assert console_errors(browser) == []


def test_numbers_read_as_the_windows(tmp_path, browser):
    """The report's tick labels and readout x in the window's style (resplot/draw/ticks.py,
    resplot/data/numbers.py), the same strings for the same values: it wrote `6.00e-4`,
    `430000` and `6B` where the window writes `6e-4`, `430k` and `6G`. Its own functions are
    checked against Python's on ticks of every scale, halfway values and random ones; then the
    charts' own ticks."""
    path = tmp_path / "scales.db"
    engine = new_store(path)
    steps = range(0, 400_000, 1000)
    make_run(
        engine,
        name="scales",
        created_at=BASE_TIME,
        points={
            "train/loss": [(s, 3.0 - s / 400_000) for s in steps],
            "lr": [(s, 6e-4 * (1 - s / 400_000)) for s in steps],
            "train/tokens": [(s, 16_384.0 * s) for s in steps],
        },
    )
    engine.dispose()
    out = tmp_path / "scales.html"
    assert main(["report", str(path), "-o", str(out), "--pages", "training"]) == 0
    open_report(browser, out)
    assert console_errors(browser) == []

    rng = random.Random(7)
    lists = [
        [0, 0.0002, 0.0004, 0.0006],
        [2.5e-5, 5e-5, 7.5e-5],
        [0.125, 0.25, 0.375],  # halfway values: Python rounds to even, toFixed away from 0
        [0, 100_000, 200_000, 300_000, 400_000],
        [2e9, 4e9, 6e9],
        [-1, 0, 1],
        [0.5],
        [1e15, 2e15],
    ]
    for _ in range(200):
        step = rng.choice([1, 2, 2.5, 5]) * 10.0 ** rng.randint(-8, 11)
        first = round(rng.uniform(-5, 5) * 10.0 ** rng.randint(-7, 12) / step) * step
        lists.append([first + k * step for k in range(rng.randint(1, 7))])
    values = [2.957, 0.00028, 11_480, 428_000, 8.378e9, 999_960, 0, -1234.5, 1e-7, 1e20, 2.5e-5]
    values += [rng.uniform(-1, 1) * 10.0 ** rng.randint(-9, 16) for _ in range(300)]
    labels, shorts = browser.execute_script(
        "return [arguments[0].map(resplotReport.compactLabels),"
        " arguments[1].map(resplotReport.shortValue)]",
        lists,
        values,
    )
    assert labels == [compact_labels(v) for v in lists]
    assert shorts == [short_value(v) for v in values]

    # The charts: ticks as the window labels the same values.
    titles = browser.execute_script("return resplotReport.charts.map(c => c.panel.title)")
    lr = titles.index("Learning rate")
    for chart in range(len(titles)):
        ticks = browser.execute_script("return resplotReport.yLabels(arguments[0])", chart)
        assert len(ticks) >= 2, (titles[chart], ticks)
        assert [label for _v, label in ticks] == compact_labels([v for v, _label in ticks])
    lr_labels = [
        label
        for _v, label in browser.execute_script("return resplotReport.yLabels(arguments[0])", lr)
    ]
    assert all("e-4" in label or label == "0" for label in lr_labels), lr_labels
    x = browser.execute_script("return resplotReport.xLabels(0)")
    assert [label for _t, label in x] == compact_labels([t for t, _label in x])
    assert any(label.endswith("k") for _t, label in x), x  # steps to 400,000: `100k`, not 100000
    browser.execute_script(
        "const e = document.getElementById('xmode'); e.value = 'tokens';"
        "e.dispatchEvent(new Event('change'))"
    )
    x = browser.execute_script("return resplotReport.xLabels(0)")
    assert all(label.endswith("G") or label == "0" for _t, label in x), x  # 6.5G tokens, not B
    assert console_errors(browser) == []
