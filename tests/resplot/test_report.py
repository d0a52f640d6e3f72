"""`resplot report`: one HTML file, opened from disk in a real headless Chromium that can reach
no network (tests/fixtures/browser.py): no console error, no request, every run listed, the
hover reads the logged values, a zoom's drawn columns hold the store's extremes, a one-step
spike is drawn at every zoom, and the page looks right at 1280x800 (the screenshot is kept in
the test's temp folder)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pytest

import reslog
from resplot.cli import main
from resplot.report.levels import Need, choose
from tests.fixtures.browser import HEIGHT, WIDTH, console_errors, open_report
from tests.fixtures.stores import BASE_TIME, make_run, new_store

SPIKE_STEP = 12_345
LONG = 40_000


def _loss(i: int, steps: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(i)
    v = 4.0 * np.exp(-steps / 15_000) + 1.5 + i * 0.1 + rng.normal(0, 0.02, len(steps))
    v[steps == SPIKE_STEP] = 50.0 + i  # one step, one run each: must never vanish
    return v


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, str]:
    """A small store (every point fits) and a long one (columns only, under a small budget).
    The small one has a CJK name, a crashed run, an alert and a checkpoint."""
    base = tmp_path_factory.mktemp("report")
    small, long = str(base / "small.db"), str(base / "long.db")
    engine = new_store(small)
    for i, name in enumerate(("基线 baseline", "lr-1e-3", "wsd-0.5")):
        steps = np.arange(0, 3000)
        make_run(
            engine,
            name=name,
            created_at=BASE_TIME + i * 60,
            status="crashed" if i == 2 else "finished",
            config={"optim": {"lr": 3e-4 * (i + 1)}, "batch_tokens": 524288},
            summary={"test/ppl": 15.5 + i},
            points={
                "train/loss": list(zip(steps.tolist(), _loss(i, steps).tolist(), strict=True)),
                "train/tokens": [(s, 4096.0 * s) for s in range(0, 3000, 10)],
                "valid/loss": [(s, 3.0 - s / 3000 + i * 0.1) for s in range(0, 3000, 500)],
                "lr": [(s, 1e-3 * min(1.0, s / 100)) for s in range(3000)],
            },
            events=[("checkpoint", "saved step 1000", 1000), ("alert", "loss spike", 2000)],
        )
    engine.dispose()
    engine = new_store(long)
    for i in range(2):
        steps = np.arange(LONG)
        pts = list(zip(steps.tolist(), _loss(i, steps).tolist(), strict=True))
        make_run(engine, name=f"long-{i}", created_at=BASE_TIME + i, points={"train/loss": pts})
    engine.dispose()
    return {"small": small, "long": long}


def _logged(store: str, run: str, key: str) -> tuple[np.ndarray, np.ndarray]:
    with reslog.open(store) as r:
        df = r.points(run, key)
    return df["step"].to_numpy(), df["value"].to_numpy()


@pytest.mark.slow
def test_report_opens_offline_lists_every_run_and_reads_the_hover(stores, tmp_path, browser):
    out = tmp_path / "report.html"
    assert main(["report", stores["small"], "-o", str(out), "--pages", "training", "system"]) == 0
    html = out.read_text(encoding="utf-8")
    assert "基线 baseline" in html and "<script src" not in html and "<link" not in html
    open_report(browser, out)
    assert console_errors(browser) == []
    # Nothing was requested: no resource entry beyond the page itself.
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
    legend = browser.execute_script(
        "return [...document.querySelectorAll('#legend > span')].map(e => e.textContent)"
    )
    assert legend == ["基线 baseline", "lr-1e-3", "wsd-0.5"]
    table = browser.execute_script(
        "return [...document.querySelectorAll('#runs tbody tr')].map(tr => "
        "[...tr.cells].map(c => c.textContent))"
    )
    assert [row[1] for row in table] == ["finished", "finished", "crashed"]
    assert [row[4] for row in table] == ["基线 baseline", "lr-1e-3", "wsd-0.5"]
    assert "crashed" in table[2][3] and "loss spike" in table[0][3]  # the window's alerts
    md = browser.execute_script("return document.getElementById('md').textContent")
    assert md.startswith("| run | optim.lr |") and "test/ppl" in md

    # Hover step 1234 of the loss chart with the mouse: each run's logged value there.
    from selenium.webdriver.common.action_chains import ActionChains

    step = 1234
    browser.execute_script("resplotReport.setRange(1200, 1300)")  # a step is several pixels
    canvas = browser.find_elements("css selector", "canvas.plot")[0]
    px = browser.execute_script("return resplotReport.pixelOf(0, arguments[0])", step)
    width = canvas.size["width"]
    ActionChains(browser).move_to_element_with_offset(canvas, round(px - width / 2), 0).perform()
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#tip tr.row')].map(r => [r.dataset.label, "
        "r.dataset.step, r.dataset.value])"
    )
    train = {label: (int(s), float(v)) for label, s, v in rows if label.endswith(" train")}
    assert len(train) == 3
    for name in ("基线 baseline", "lr-1e-3", "wsd-0.5"):
        steps, values = _logged(stores["small"], name, "train/loss")
        at, value = train[f"{name} train"]
        assert at == step
        assert value == values[np.searchsorted(steps, at)]  # bit for bit

    # Events and alerts: a marker on the chart, named by the hover at their step.
    browser.execute_script("resplotReport.setRange(1950, 2050)")
    px = browser.execute_script("return resplotReport.pixelOf(0, 2000)")
    ActionChains(browser).move_to_element_with_offset(canvas, round(px - width / 2), 0).perform()
    events = browser.execute_script(
        "return [...document.querySelectorAll('#tip .ev')].map(e => e.textContent)"
    )
    assert len(events) == 3 and all("alert @ step 2000: loss spike" in e for e in events)
    shot = tmp_path / "report-1280x800.png"
    browser.get_screenshot_as_file(str(shot))  # the readout open over the loss chart
    from PIL import Image

    assert Image.open(shot).size == (WIDTH, HEIGHT)

    # x by wall time, hours, tokens; smoothing off; linear y: all drawn, nothing logged wrong.
    def control(element_id: str, value) -> None:
        browser.execute_script(
            "const e = document.getElementById(arguments[0]);"
            "if (e.type === 'checkbox') e.checked = arguments[1]; else e.value = arguments[1];"
            "e.dispatchEvent(new Event(e.type === 'range' ? 'input' : 'change'))",
            element_id,
            value,
        )

    for mode in ("wall", "relative", "tokens", "step"):
        control("xmode", mode)
        frame = browser.execute_script("return resplotReport.charts[0].frame")
        assert len([d for d in browser.execute_script("return resplotReport.drawn(0)") if d]) == 6
        if mode == "tokens":  # the token count logged every 10 steps, up to step 2990
            assert math.isclose(frame["x1"] - frame["x0"], 4096.0 * 2999, rel_tol=0.06)
        if mode == "relative":  # hours since each run's start (a point a second)
            assert 0.8 < frame["x1"] < 1.0
        if mode == "wall":  # ticks on whole minutes (decimal steps of a day put them at 00:59)
            ticks = browser.execute_script("return resplotReport.xLabels(0)")
            seconds = [round(t * 86400) for t, _label in ticks]
            step = seconds[1] - seconds[0]
            assert len(ticks) >= 3 and step % 60 == 0 and 3600 % step == 0, ticks
            assert all(s % step == 0 for s in seconds), ticks
            labels = [label for _t, label in ticks]
            assert len(set(labels)) == len(labels) and all(len(x) == 11 for x in labels), labels
    # Wall times in the browser's time zone, as the window labels them: India's (+5:30) puts
    # the ticks on its own whole hours and minutes, not UTC's.
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kolkata"})
    try:
        control("xmode", "wall")
        ticks = browser.execute_script("return resplotReport.xLabels(0)")
    finally:
        browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})
    india = dt.timezone(dt.timedelta(hours=5, minutes=30))
    for t, label in ticks:
        at = dt.datetime.fromtimestamp(round(t * 86400), india)
        assert label == at.strftime("%m-%d %H:%M") and at.second == 0, ticks
    control("xmode", "step")
    control("smooth", "0")
    assert browser.execute_script("return resplotReport.view.smoothing") == 0
    control("logy", False)
    assert browser.execute_script("return resplotReport.charts[0].frame.log") is False

    # Hiding runs: from the legend, and from the run table's tick boxes.
    browser.find_elements("css selector", "#legend > span")[1].click()
    drawn = browser.execute_script("return resplotReport.drawn(0).filter(Boolean).length")
    assert drawn == 4  # two runs left: train and valid loss each
    browser.find_elements("css selector", "#runs input[type=checkbox]")[2].click()
    drawn = browser.execute_script("return resplotReport.drawn(0).filter(Boolean)")
    assert {d["label"] for d in drawn} == {"基线 baseline train", "基线 baseline valid"}
    assert console_errors(browser) == []


@pytest.mark.slow
def test_zoomed_columns_hold_the_stores_extremes_and_the_spike(stores, tmp_path, browser):
    out = tmp_path / "long.html"
    assert main(["report", stores["long"], "-o", str(out), "--max-mb", "0.4"]) == 0
    assert out.stat().st_size <= 0.4 * (1 << 20)
    open_report(browser, out)
    assert console_errors(browser) == []
    notes = browser.execute_script("return document.getElementById('notes').textContent")
    width = browser.execute_script("return resplotReport.data.budget.width")
    assert width > 1 and f"columns of {width} steps" in notes  # what was left out, said
    truth = {f"long-{i}": _logged(stores["long"], f"long-{i}", "train/loss") for i in range(2)}

    def check(lo: float, hi: float) -> list[dict]:
        browser.execute_script("resplotReport.setRange(arguments[0], arguments[1])", lo, hi)
        drawn = [d for d in browser.execute_script("return resplotReport.drawn(0)") if d]
        assert len(drawn) == 2
        for d in drawn:
            steps, values = truth[d["label"].removesuffix(" train")]
            for c_lo, c_hi, vmin, vmax, min_at, max_at in d["columns"]:
                a, b = np.searchsorted(steps, [c_lo, c_hi + 1])
                assert (vmin, vmax) == (values[a:b].min(), values[a:b].max())
                assert values[np.searchsorted(steps, min_at)] == vmin
                assert values[np.searchsorted(steps, max_at)] == vmax
            if lo <= SPIKE_STEP <= hi:
                assert d["max"] == values[steps == SPIKE_STEP][0]  # the spike, drawn exactly
        return drawn

    # Every zoom from the whole run down to a few columns: exact columns, the spike kept;
    # at least one column a pixel until the file's finest width is passed, which is said.
    plot = browser.execute_script("return resplotReport.charts[0].frame.px")
    for span in (LONG, 20_000, 4_000, 400, 100, 20):
        lo, hi = SPIKE_STEP - span * 0.3, SPIKE_STEP + span * 0.7
        drawn = check(lo, hi)
        coarse = browser.execute_script("return resplotReport.charts[0].div.dataset.coarse")
        fine_enough = span / plot >= width  # W-step columns still one a pixel or more
        covered = math.floor((min(hi, LONG - 1) - max(lo, 0)) / (hi - lo) * plot)
        for d in drawn:
            assert d["coarse"] is not fine_enough
            if fine_enough:
                assert d["count"] >= covered  # at least one exact column a pixel
        assert coarse == ("0" if fine_enough else "1")
    # 1 % ranges anywhere, zoomed with the mouse the way a reader does.
    from selenium.webdriver.common.action_chains import ActionChains

    browser.execute_script("resplotReport.setRange(0, arguments[0])", LONG * 0.1)
    canvas = browser.find_elements("css selector", "canvas.plot")[0]
    x_of = browser.execute_script(
        "return [resplotReport.pixelOf(0, 1000), resplotReport.pixelOf(0, 1400)]"
    )
    left = round(x_of[0] - canvas.size["width"] / 2)
    (
        ActionChains(browser)
        .move_to_element_with_offset(canvas, left, 0)
        .click_and_hold()
        .move_by_offset(round(x_of[1] - x_of[0]), 0)
        .release()
        .perform()
    )
    lo, hi = browser.execute_script("return resplotReport.view.range")
    assert 900 < lo < 1100 and 1300 < hi < 1500
    drawn = [d for d in browser.execute_script("return resplotReport.drawn(0)") if d]
    assert all(d["columns"] for d in drawn)
    check(lo, hi)
    # The wheel zooms around the cursor; shift + drag pans by what the mouse moved.
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    from selenium.webdriver.common.keys import Keys

    ActionChains(browser).scroll_from_origin(
        ScrollOrigin.from_element(canvas, 0, 0), 0, 100
    ).perform()
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => r()))")
    lo2, hi2 = browser.execute_script("return resplotReport.view.range")
    assert lo2 < lo and hi2 > hi and math.isclose(hi2 - lo2, (hi - lo) * 1.25, rel_tol=1e-6)
    (
        ActionChains(browser)
        .move_to_element(canvas)
        .key_down(Keys.SHIFT)
        .click_and_hold()
        .move_by_offset(-100, 0)
        .release()
        .key_up(Keys.SHIFT)
        .perform()
    )
    browser.execute_script("return new Promise(r => requestAnimationFrame(() => r()))")
    lo3, hi3 = browser.execute_script("return resplotReport.view.range")
    assert math.isclose(hi3 - lo3, hi2 - lo2, rel_tol=1e-9) and lo3 > lo2
    check(lo3, hi3)
    assert console_errors(browser) == []


def test_the_budget_chooses_levels_and_is_never_passed():
    long = Need(n=100_000, step_lo=0, step_hi=99_999, levels=4)
    short = Need(n=50, step_lo=0, step_hi=49_000, levels=1)
    width, levels = choose([long] * 800 + [short], budget=10 << 20)
    assert width > 64 and levels[-1] == 0  # the sparse series raw, the long ones as columns
    spent = sum(n.bytes(lv) for n, lv in zip([long] * 800 + [short], levels, strict=True))
    assert spent <= 10 << 20
    assert choose([long], budget=1 << 30) == (1, [0])  # room for everything: every point


def test_report_errors_are_one_line(stores, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", stores["small"], "-o", str(out), "--max-mb", "0.01"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("resplot: error: --max-mb 0.01 is too small") and err.count("\n") == 1
    assert not out.exists()
    assert main(["report", stores["small"], "-o", str(out), "--pages", "timing"]) == 1
    assert "nothing to report" in capsys.readouterr().err


def test_report_size_follows_the_budget(stores, tmp_path):
    sizes = {}
    for mb in (0.3, 1.0):
        out = tmp_path / f"r{mb}.html"
        assert main(["report", stores["long"], "-o", str(out), "--max-mb", str(mb)]) == 0
        sizes[mb] = out.stat().st_size
        assert sizes[mb] <= mb * (1 << 20)
    assert sizes[1.0] > sizes[0.3]  # a bigger budget buys finer columns
    assert not math.isclose(sizes[1.0], sizes[0.3])


def _data(path: Path) -> dict:
    import json
    import re

    text = path.read_text(encoding="utf-8")
    found = re.search(r'id="report-data" type="application/json">(.*?)</script>', text, re.S)
    return json.loads(found.group(1))


@pytest.mark.slow
def test_timing_and_ranks_pages_on_request(stores, tmp_path):
    import base64
    import io

    from PIL import Image

    from tests.fixtures.job import make_job

    job = {h: tmp_path / f"{h}.db" for h in ("gpu-a", "gpu-b")}
    make_job(job, steps=300)
    out = tmp_path / "job.html"
    args = ["report", *(str(p) for p in job.values()), "-o", str(out), "--pages", "timing", "ranks"]
    assert main(args) == 0
    data = _data(out)
    assert [p["name"] for p in data["pages"]] == ["timing", "ranks"]
    timing = data["pages"][0]["panels"]
    assert {p["title"]: len(p["items"]) for p in timing}["Step time"] == 4  # a line a rank
    assert sum(p["stacked"] for p in timing) == 4  # each rank's breakdown (drawn as lines)
    img = data["pages"][1]["img"]
    assert img.startswith("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(img.split(",", 1)[1]))).size[0] > 600
    # A store with no multi-rank job: the Ranks tab and the notes say why.
    out = tmp_path / "nojob.html"
    assert main(["report", stores["small"], "-o", str(out), "--pages", "training", "ranks"]) == 0
    data = _data(out)
    assert data["pages"][1]["img"] is None
    assert any(n.startswith("Ranks page: No multi-rank job") for n in data["notes"])


@pytest.mark.slow
def test_hostile_names_stay_names(tmp_path, browser):
    # A name that closes the script element, injects markup or names a template slot is shown
    # as text: the data are JSON with '</' escaped, and the page sets textContent only.
    name = "</script><img src=x onerror=alert(1)>{{JS}}{{BIN}} \u2028 ✓"
    store = tmp_path / "hostile.db"
    engine = new_store(store)
    make_run(
        engine,
        name=name,
        config={"k": "{{DATA}}"},
        points={"train/loss": [(s, 1.0 + s) for s in range(50)]},
    )
    engine.dispose()
    out = tmp_path / "hostile.html"
    assert main(["report", str(store), "-o", str(out)]) == 0
    open_report(browser, out)
    assert console_errors(browser) == []
    legend = browser.execute_script(
        "return [...document.querySelectorAll('#legend > span')].map(e => e.textContent)"
    )
    assert legend == [name]
    assert browser.execute_script("return document.querySelectorAll('img').length") == 0


@pytest.mark.slow
def test_charts_out_of_view_are_drawn_when_scrolled_in(stores, tmp_path, browser):
    out = tmp_path / "keys.html"
    keys = ["train/*", "valid/*", "lr"]
    assert main(["report", stores["small"], "-o", str(out), "--keys", *keys]) == 0
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": WIDTH, "height": 150, "deviceScaleFactor": 1, "mobile": False},
    )
    open_report(browser, out)
    browser.find_elements("css selector", "#tabs button")[1].click()  # the --keys page
    charts = "resplotReport.charts.filter(c => c.page === 1)"
    titles = browser.execute_script(f"return {charts}.map(c => c.panel.title)")
    assert titles == ["train/loss", "train/tokens", "valid/loss", "lr"]  # glob order
    assert browser.execute_script(f"return {charts}.map(c => c.frame !== null)") == [
        True,
        True,
        False,
        False,
    ]
    browser.execute_script(f"{charts}[3].div.scrollIntoView()")
    browser.execute_script("return new Promise(r => setTimeout(r, 300))")
    assert browser.execute_script(f"return {charts}[3].frame !== null")
    index = browser.execute_script(f"return resplotReport.charts.indexOf({charts}[3])")
    drawn = [d for d in browser.execute_script("return resplotReport.drawn(arguments[0])", index)]
    assert [d["label"] for d in drawn] == ["基线 baseline", "lr-1e-3", "wsd-0.5"]
    assert console_errors(browser) == []


def _columns(path: Path) -> tuple[dict, dict]:
    """The report's data and its column stream decoded as the page decodes it."""
    import base64
    import re
    import zlib

    text = path.read_text(encoding="utf-8")
    stream = re.search(
        r'id="report-bin" type="application/octet-stream">(.*?)</script>', text, re.S
    ).group(1)
    raw = zlib.decompress(base64.b64decode(stream))
    types = {"i1": np.int8, "i2": np.int16, "i4": np.int32, "f4": np.float32, "f8": np.float64}

    def column(c: dict) -> np.ndarray:
        dtype = np.dtype(types[c["t"]]).newbyteorder("<")
        size, n = dtype.itemsize, c["n"]
        planes = np.frombuffer(raw, np.uint8, n * size, c["o"]).reshape(size, n)
        values = planes.T.copy().view(dtype).ravel().astype(np.float64)
        return np.cumsum(values) + c["f"] if c["z"] else values

    return _data(path), {"column": column}


@pytest.mark.postgres
def test_a_postgresql_store_reports_exact_columns(pg_store, tmp_path):
    # The same report from a PostgreSQL store (its own source, fine levels folded from its
    # points): every column's extremes are the store's, the spike among them.
    engine = new_store(pg_store)
    steps = np.arange(6000)
    values = _loss(0, steps)
    make_run(
        engine,
        name="pg-run",
        points={"train/loss": list(zip(steps.tolist(), values.tolist(), strict=True))},
    )
    engine.dispose()
    out = tmp_path / "pg.html"
    assert main(["report", pg_store, "-o", str(out), "--max-mb", "0.07"]) == 0
    data, dec = _columns(out)
    (series,) = [s for s in data["series"] if s["key"] == "train/loss"]
    assert series["width"] > 1  # columns, not every point
    cols = {name: dec["column"](c) for name, c in series["cols"].items()}
    lo = cols["lo"]
    mn_at, mx_at = lo + cols["mn"], lo + cols["mx"]
    for i in range(len(lo)):
        a, b = int(lo[i]), int(lo[i] + cols["hi"][i]) + 1
        assert cols["vmin"][i] == values[a:b].min() and cols["vmax"][i] == values[a:b].max()
        assert values[int(mn_at[i])] == cols["vmin"][i] and values[int(mx_at[i])] == cols["vmax"][i]
    assert cols["vmax"].max() == values.max()  # the largest value, kept


def test_a_log_panel_whose_series_reach_zero_is_linear_and_noted(tmp_path):
    """As in the window (tests/resplot/draw/test_log_axis.py): a loss below 0 cannot be placed
    on a log axis, so its panel is drawn linear and the report's notes say which."""
    path = tmp_path / "nll.db"
    engine = new_store(path)
    nll = [(s, 2.5 - s / 1000) for s in range(3000)]
    make_run(engine, name="nll", points={"train/loss": nll}, created_at=BASE_TIME)
    engine.dispose()
    out = tmp_path / "nll.html"
    assert main(["report", str(path), "-o", str(out), "--pages", "training"]) == 0
    data = _data(out)
    (loss,) = [p for p in data["pages"][0]["panels"] if p["title"] == "Loss"]
    assert loss["log"] is False
    assert "training page, Loss: y linear, values ≤ 0 (no log)" in data["notes"]
