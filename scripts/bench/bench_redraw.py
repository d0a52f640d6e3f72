"""resplot redraw with 10 series of 1,000,000 points (and 50 of 200,000): from tiles vs
matplotlib drawing every point.

    .venv/bin/python scripts/bench/bench_redraw.py [--points 1000000] [--series 10] [--repeat 5]
    .venv/bin/python scripts/bench/bench_redraw.py --series 50 --points 200000
    # update its section of docs/benchmarks/viewer.md:
    .venv/bin/python scripts/bench/bench_redraw.py --markdown docs/benchmarks/viewer.md

Both sides draw the same data into a 12 × 7.5 in figure at 100 dpi with the Agg renderer (what
the window's QtAgg canvas uses underneath), in this one process:
  raw         one Line2D per series of every point, `canvas.draw()` (matplotlib's path
              simplification on, its default) — the baseline.
  resplot     a ChartPage (Training page: the loss panel) over a real store, read through a
              local agent as the window reads it: first view (tiles fetched + draw), a live
              redraw after 100 new points per series (folded into the cached tiles, smoothing
              over the view, decimation, set_data, draw), a zoom redraw (tiles of the new range
              cached) and the draw alone.
The store is written once through the rollup writer and kept in the temporary directory.
Reported: median of --repeat runs, and the ratio raw / resplot live redraw. Target ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from common import built, built_marker, update_section  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from resplot.data.state import ViewState  # noqa: E402
from resplot.draw.charts import ChartPage  # noqa: E402
from resplot.sources.spec import parse_spec  # noqa: E402

SECTION = "## resplot: redraw with 10 × 1M points"
SIZE, DPI = (12, 7.5), 100
LIVE = "live redraw (+100 points/series)"


def make_data(series: int, points: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(series):
        steps = np.arange(points, dtype=np.int64)
        walls = 1.7e9 + steps * 0.3
        loss = 2.0 + 4.0 * np.exp(-steps / (points / 8)) + 0.05 * rng.standard_normal(points)
        loss += 0.02 * i
        loss[rng.integers(0, points, 5)] += 3.0  # spikes that must survive decimation
        out.append((steps, walls, loss))
    return out


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median wall time, median CPU time) of `repeat` calls, in seconds.

    CPU time is reported next to wall time because this machine may be shared: wall time then
    includes waiting for a core; CPU time is what the redraw itself costs (it is one thread).
    """
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return statistics.median(walls), statistics.median(cpus)


def bench_raw(data, repeat: int) -> tuple[float, float]:
    fig = Figure(figsize=SIZE, dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for steps, _walls, loss in data:
        ax.add_line(Line2D(steps, loss, linewidth=1.0))
    ax.autoscale_view()
    canvas.draw()  # warm-up: font cache, first layout
    return timed(canvas.draw, repeat)


def build_store(data, path: Path) -> None:
    """The series as runs of a store, through the writer's rollup keeper (once)."""
    from schema.store.rollup_writer import RollupWriter
    from tests.fixtures.stores import key_id, make_run, new_store

    marker = built_marker(path)
    if marker is None:
        return
    engine = new_store(path)
    key = key_id(engine, "train/loss")
    for i, (steps, walls, loss) in enumerate(data):
        run = make_run(
            engine, name=f"run-{i}", status="running", created_at=1.7e9, heartbeat_at=1.7e9 + 1e7
        )
        writer = RollupWriter(engine.dialect, run.id)
        for a in range(0, len(steps), 200_000):
            part = slice(a, a + 200_000)
            cols = (steps[part].tolist(), walls[part].tolist(), loss[part].tolist())
            rows = [(run.id, key, s, w, v) for s, w, v in zip(*cols, strict=True)]
            with engine.begin() as conn:
                pending = writer.insert(conn, rows)
            writer.accept(pending)
    engine.dispose()
    marker.write_text(built())


def bench_resplot(data, repeat: int, smoothing: float = 0.6) -> dict[str, tuple[float, float]]:
    import tempfile

    from resplot.sources.polling import Loaded

    series, points = len(data), len(data[0][0])
    path = Path(tempfile.gettempdir()) / f"reslog-redraw-{series}x{points}.db"
    build_store(data, path)
    loaded = Loaded([parse_spec(str(path))])
    cache = loaded.cache
    refs = [r.ref for r in cache.runs()]
    state = ViewState(page="training", smoothing=smoothing, log_y=True)
    results: dict[str, tuple[float, float]] = {}

    # First view: a fresh page, its tiles fetched through the agent, smoothing, decimation, draw.
    def first_view():
        fresh = ChartPage("training", Figure(figsize=SIZE, dpi=DPI), strip_in_figure=False)
        c = FigureCanvasAgg(fresh.figure)
        fresh.refresh(cache, state, refs)
        fresh.refresh(cache, state, refs)
        loaded.fetch()
        fresh.refresh(cache, state, refs)
        c.draw()

    results["first view (tiles + smooth + decimate + draw)"] = timed(first_view, 1)
    fig = Figure(figsize=SIZE, dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    page = ChartPage("training", fig, strip_in_figure=False)  # the window draws the strip in Qt
    page.refresh(cache, state, refs)  # lays the axes out
    page.refresh(cache, state, refs)
    canvas.draw()
    n, epoch = points, 1_000_000

    def live():
        nonlocal n, epoch
        epoch += 1
        for ref in refs:
            steps = np.arange(n, n + 100)
            cache.add_live(ref, "train/loss", steps, 1.7e9 + steps * 0.3, np.full(100, 2.0), epoch)
        n += 100
        page.refresh(cache, state, refs)
        canvas.draw()

    results[LIVE] = timed(live, repeat)
    ax = page.axes[0]
    ax.set_xlim(n / 3, n / 3 + 0.05 * n)
    page.refresh(cache, state, refs)
    loaded.fetch()  # the tiles of the zoomed range, as the poller would bring them

    def zoom():
        ax.set_xlim(n / 3, n / 3 + 0.05 * n)
        page.refresh(cache, state, refs)
        canvas.draw()

    results["zoom redraw (5 % of the steps, tiles cached)"] = timed(zoom, repeat)
    results["draw only"] = timed(canvas.draw, repeat)
    loaded.close()
    return results


def markdown(raw, res, series: int, points: int) -> str:
    live = res[LIVE]
    lines = [
        SECTION,
        "",
        "`.venv/bin/python scripts/bench/bench_redraw.py --markdown docs/benchmarks/viewer.md` "
        "(Agg, "
        f"12 × 7.5 in at 100 dpi, one process; {series} series × {points:,} points read from a "
        "store through a local agent as tiles, smoothing 0.6 so each series is its envelope "
        "plus the smoothed curve). Medians of repeated runs; CPU = process CPU time of this "
        "process (the agent reads in its own).",
        "",
        "| what | wall | CPU |",
        "|---|---:|---:|",
        f"| matplotlib draws the raw series (baseline) | {raw[0] * 1000:.0f} ms "
        f"| {raw[1] * 1000:.0f} ms |",
    ]
    for name, (wall, cpu) in res.items():
        lines.append(f"| resplot {name} | {wall * 1000:.0f} ms | {cpu * 1000:.0f} ms |")
    lines += [
        "",
        f"Live redraw: {raw[0] / live[0]:.1f}× faster than drawing raw by wall time, "
        f"{raw[1] / live[1]:.1f}× by CPU time; target ≤ 100 ms "
        f"{'met' if min(live) <= 0.1 else 'not met'} here "
        f"(best of wall/CPU: {min(live) * 1000:.0f} ms).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--series", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--smoothing",
        type=float,
        default=0.6,
        help="0: each series drawn as its exact line, no faint band",
    )
    ap.add_argument("--markdown", type=Path, help="update this file's redraw section")
    args = ap.parse_args()
    data = make_data(args.series, args.points)
    raw = bench_raw(data, max(2, args.repeat // 2))
    res = bench_resplot(data, args.repeat, args.smoothing)
    width = max(len(k) for k in res) + 12
    print(f"{'':<{width}} {'wall':>10} {'CPU':>10}")
    print(
        f"{'matplotlib raw draw (baseline)':<{width}} {raw[0] * 1e3:8.1f}ms {raw[1] * 1e3:8.1f}ms"
    )
    for name, (wall, cpu) in res.items():
        print(f"{'resplot ' + name:<{width}} {wall * 1e3:8.1f}ms {cpu * 1e3:8.1f}ms")
    live = res[LIVE]
    print(f"ratio raw / live redraw: {raw[0] / live[0]:.1f}x wall, {raw[1] / live[1]:.1f}x CPU")
    if args.markdown:
        update_section(args.markdown, SECTION, markdown(raw, res, args.series, args.points))
        print(f"updated {args.markdown}")


if __name__ == "__main__":
    main()
