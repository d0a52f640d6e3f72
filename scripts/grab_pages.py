"""Grab the real window's pages (Qt offscreen) on the 12-run sweep of tests/fixtures/sweep.py
(one spike, one NaN run, one crashed, one stalled, one live), at laptop and full-HD size, with
the hover readout shown on the first chart: what to look at before calling a viewer change done.

    .venv/bin/python scripts/grab_pages.py OUT_DIR [--steps 20000] [--sizes 1280x800 1920x1080]
        [--pages training system timing all] [--store /tmp/sweep.db]

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

from resplot import settings as settings_mod  # noqa: E402
from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.ui.window import MainWindow, make_poller  # noqa: E402
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
        ):
            break
    for _ in range(20):
        app.processEvents()
        time.sleep(0.01)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--sizes", nargs="+", default=["1280x800", "1920x1080"])
    ap.add_argument("--pages", nargs="+", default=["training", "system", "timing", "all"])
    ap.add_argument("--store", type=Path, help="the sweep's store (made when missing)")
    ap.add_argument("--hover-at", type=float, default=0.62, help="x of the hover, chart fraction")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    store = args.store or args.out / "sweep.db"
    if not store.exists():
        make_sweep(store, steps=args.steps)
    app = QApplication([])
    for size in args.sizes:
        w, h = (int(v) for v in size.split("x"))
        cache = SeriesCache()
        win = MainWindow(cache, settings_mod.Settings(), args.out / "settings.json")
        win.resize(w, h)
        win.show()
        win.attach_poller(make_poller(cache, 1.0, win.ask_host_key))
        win.add_source(str(store))
        deadline = time.monotonic() + 60
        while len(cache.runs()) < 12 and time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.02)
        for page in args.pages:
            win.set_page(page)
            settle(app, win)
            win.schedule_redraw()
            settle(app, win)
            win.grab().save(str(args.out / f"{page}-{size}.png"))
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
