"""Grab the real window's pages (Qt offscreen) on the 12-run sweep of tests/fixtures/sweep.py
(one spike, one NaN run, one crashed, one stalled, one live) and a 4-rank job over two hosts
(tests/fixtures/job.py: a store per host, a source each), at laptop and full-HD size, with the
hover shown on the first chart (on the Ranks page: a cell of the straggler): what to look at
before calling a viewer change done.

    .venv/bin/python scripts/grab_pages.py OUT_DIR [--steps 20000] [--sizes 1280x800 1920x1080]
        [--pages training system timing all ranks] [--store /tmp/sweep.db] [--no-job]
        [--expand-job]

Writes OUT_DIR/<page>-<W>x<H>.png and OUT_DIR/<page>-<W>x<H>-hover.png.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PyQt5.QtCore import QPoint  # noqa: E402
from PyQt5.QtTest import QTest  # noqa: E402
from PyQt5.QtWidgets import QApplication  # noqa: E402

from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.ui import settings as settings_mod  # noqa: E402
from resplot.ui.window import MainWindow, make_poller  # noqa: E402
from tests.fixtures.job import make_job  # noqa: E402
from tests.fixtures.sweep import make_sweep  # noqa: E402


def settle(app: QApplication, win: MainWindow, seconds: float = 30.0) -> None:
    """Until a redraw has run, nothing is waiting and no tile is wanted."""
    before = win.redraw_count
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
        if (
            win.redraw_count > before
            and not win._redraw_timer.isActive()
            and win.cache.wanted_count() == 0
            and not getattr(win.page_view().canvas, "draw_due", False)  # a draw in pieces
        ):
            break
    for _ in range(20):
        app.processEvents()
        time.sleep(0.01)


def grab_ranks_hover(app: QApplication, win: MainWindow, path: Path) -> None:
    """The Ranks page's hover on the first marked cell (else the middle of the map)."""
    page = win.ranks.page
    if page.view is None:
        return
    view = page.view
    marks = view.marks
    row = marks[0].rows[0] if marks and marks[0].rows else len(view.rows) // 2
    step = (marks[0].first + (marks[0].last or marks[0].first)) / 2 if marks else None
    x = step if step is not None else (view.edges[0] + view.edges[-1]) / 2
    fx, fy = page.ax.transData.transform((x, row + 0.5))
    ratio = win.ranks.canvas.device_pixel_ratio or 1.0
    qy = (page.figure.bbox.height - fy) / ratio
    QTest.mouseMove(win.ranks.canvas, QPoint(int(fx / ratio), int(qy)))
    for _ in range(10):
        app.processEvents()
        time.sleep(0.01)
    win.grab().save(str(path))
    win.ranks.hover.hide()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--sizes", nargs="+", default=["1280x800", "1920x1080"])
    ap.add_argument("--pages", nargs="+", default=["training", "system", "timing", "all", "ranks"])
    ap.add_argument(
        "--no-job", dest="job", action="store_false", help="the sweep alone, without the 4-rank job"
    )
    ap.add_argument(
        "--expand-job",
        action="store_true",
        help="unfold the job's row in the run table (hosts and ranks)",
    )
    ap.add_argument("--store", type=Path, help="the sweep's store (made when missing)")
    ap.add_argument("--hover-at", type=float, default=0.62, help="x of the hover, chart fraction")
    ap.add_argument("--x-axis", help="the x axis (default: the window's, auto): wall, tokens, ...")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.store or args.out / "sweep.db"
    if not store.exists():
        make_sweep(store, steps=args.steps)
    hosts = {h: args.out / f"job-{h}.db" for h in ("gpu-a", "gpu-b")}
    if args.job and not all(p.exists() for p in hosts.values()):
        make_job(hosts, steps=2000)
    app = QApplication([])
    for size in args.sizes:
        w, h = (int(v) for v in size.split("x"))
        cache = SeriesCache()
        settings = settings_mod.Settings()
        if args.x_axis:
            settings.state.x_axis = args.x_axis
        win = MainWindow(cache, settings, args.out / "settings.json")
        win.resize(w, h)
        win.show()
        win.attach_poller(make_poller(cache, 1.0, win.ask_host_key))
        win.add_source(str(store))
        for path in hosts.values() if args.job else ():
            win.add_source(str(path))
        deadline = time.monotonic() + 60
        while len(cache.runs()) < 12 + 4 * args.job and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.02)
        for page in args.pages:
            win.set_page(page)
            settle(app, win)
            win.schedule_redraw()
            settle(app, win)
            if args.expand_job:  # the job's row unfolded, scrolled into view
                win.table.unfold_jobs()
                jobs = [i for i in win.table._all_rows() if win.table.ref_at(i) is None]
                if jobs:
                    win.table.view.scrollTo(jobs[0], win.table.view.PositionAtTop)
                settle(app, win, 0.5)
            win.grab().save(str(args.out / f"{page}-{size}.png"))
            if page == "ranks":
                grab_ranks_hover(app, win, args.out / f"{page}-{size}-hover.png")
                continue
            view = win.pages[page]
            chart = view.page
            if chart.axes:
                box = chart.axes[0].bbox
                ratio = view.canvas.device_pixel_ratio or 1.0
                fx = box.x0 + args.hover_at * box.width
                fy = box.y0 + 0.5 * box.height
                qy = (chart.figure.bbox.height - fy) / ratio
                QTest.mouseMove(view.canvas, QPoint(int(fx / ratio), int(qy)))
                for _ in range(10):
                    app.processEvents()
                    time.sleep(0.01)
                win.grab().save(str(args.out / f"{page}-{size}-hover.png"))
                view.crosshair.hide()
        win.close()
        print(f"{size}: {', '.join(args.pages)} grabbed into {args.out}")


if __name__ == "__main__":
    main()
