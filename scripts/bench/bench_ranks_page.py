"""resplot's Ranks page at a job's size: what a refresh of the page costs (the rank x step
matrices from the cache, `job_view`, and setting the image), and a draw of its canvas, against
the Timing page's refresh and draw for the same runs (the per-run charts a user had before).

    .venv/bin/python scripts/bench/bench_ranks_page.py [--ranks 64] [--per-host 8] [--steps 5000]
        [--repeat 10] [--store-dir DIR]

A job of `--ranks` ranks on `--ranks / --per-host` hosts (tests/fixtures/job.py: a store a host,
read through a local source each, as over SSH one source a host), 7 phase keys a rank, every
`--steps` step logged. Reported, medians of `--repeat`: the first complete view (cold cache:
summaries read, the tiles the page asks for fetched), then a refresh on a warm cache (what each
redraw pays while the job logs), the zoomed-in refresh (raw points, 200 steps), and the Agg draw
of the figure at 1280×720; the Timing page of the same runs (its first 4 stacks, step time of
every rank) as the baseline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.data.state import ViewState  # noqa: E402
from resplot.draw.charts import ChartPage  # noqa: E402
from resplot.draw.ranks import RanksPage  # noqa: E402
from resplot.sources.local import LocalSource  # noqa: E402
from resplot.sources.spec import parse_spec  # noqa: E402
from tests.fixtures.job import make_job  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def until_complete(page, cache, state, sources, refresh) -> int:
    """Refresh and fetch until nothing is wanted; the rounds it took."""
    for rounds in range(1, 20):
        refresh()
        if not cache.wanted_count():
            return rounds
        for source in sources:
            source.poll(cache)
    raise RuntimeError("the page never completed")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--store-dir", type=Path)
    args = ap.parse_args()
    root = args.store_dir or Path(tempfile.mkdtemp(prefix="bench-ranks-"))
    hosts = [f"gpu-{h:02d}" for h in range(args.ranks // args.per_host)]
    stores = {h: root / f"{h}.db" for h in hosts}
    if not all(p.exists() for p in stores.values()):
        t0 = time.perf_counter()
        make_job(stores, steps=args.steps, per_host=args.per_host)
        print(f"made {args.ranks} ranks x {args.steps} steps in {time.perf_counter() - t0:.0f} s")
    sources = [LocalSource(parse_spec(str(p))) for p in stores.values()]
    cache = SeriesCache()
    state = ViewState(page="ranks")
    size = (12.8, 7.2)

    t0 = time.perf_counter()
    for source in sources:
        source.poll(cache)
    page = RanksPage(Figure(figsize=size, dpi=100))
    FigureCanvasAgg(page.figure)
    rounds = until_complete(page, cache, state, sources, lambda: page.refresh(cache, state))
    first = (time.perf_counter() - t0) * 1000
    view = page.view
    assert view is not None and view.complete, "the view did not complete"
    refresh = median_ms(lambda: page.refresh(cache, state), args.repeat)
    draw = median_ms(page.figure.canvas.draw, args.repeat)
    zoom = RanksPage(Figure(figsize=size, dpi=100))
    FigureCanvasAgg(zoom.figure)
    zoom.refresh(cache, state)
    zoom.ax.set_xlim(args.steps // 2, args.steps // 2 + 200)
    until_complete(zoom, cache, state, sources, lambda: zoom.refresh(cache, state))
    zoomed = median_ms(lambda: zoom.refresh(cache, state), args.repeat)
    assert zoom.view.level == 0

    refs = [r.ref for r in cache.runs()]
    timing_state = ViewState(page="timing")
    timing_state.assign_looks(refs)
    chart = ChartPage("timing", Figure(figsize=size, dpi=100))
    FigureCanvasAgg(chart.figure)
    until_complete(
        chart, cache, timing_state, sources, lambda: chart.refresh(cache, timing_state, refs)
    )
    base_refresh = median_ms(lambda: chart.refresh(cache, timing_state, refs), args.repeat)
    base_draw = median_ms(chart.figure.canvas.draw, args.repeat)
    for source in sources:
        source.close()

    cells = view.matrices["step"].vmax.size
    print(
        f"\nRanks page: {args.ranks} ranks on {len(hosts)} hosts, {args.steps:,} steps, "
        f"{len(view.matrices)} phases; {cells:,} cells a phase ({view.cell_steps} steps a "
        f"cell, level {view.level}); first complete view in {rounds} rounds"
    )
    print(f"\n| {'what':<44} | {'Ranks page':>11} | {'Timing page':>11} | {'ratio':>6} |")
    print(f"|{'-' * 46}|{'-' * 13}|{'-' * 13}|{'-' * 8}|")
    rows = [
        ("first complete view, cold cache (ms)", first, None),
        ("refresh, warm cache (ms)", refresh, base_refresh),
        ("refresh zoomed to 200 steps, raw (ms)", zoomed, None),
        ("draw (Agg, 1280x720) (ms)", draw, base_draw),
    ]
    for what, ours, base in rows:
        b = f"{base:11.1f}" if base is not None else f"{'':>11}"
        r = f"{ours / base:6.2f}" if base else f"{'':>6}"
        print(f"| {what:<44} | {ours:11.1f} | {b} | {r} |")


if __name__ == "__main__":
    main()
