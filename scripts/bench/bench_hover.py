"""resplot hover: what a pointer move costs (the crosshair blitted and the readout of every
run's value) against a full draw of the page (what a move would cost without blitting).

    .venv/bin/python scripts/bench/bench_hover.py [--runs 20] [--steps 3000] [--repeat 50]

The real window (Qt offscreen, 1280×800) on a real store of `--runs` runs with train/valid loss,
lr, grad norm, tokens/s and MFU, training page. Reported: the time from creating the window to
the first chart drawn with data (issue 10's target: ≤ 1 s), the median wall time of `--repeat`
calls of each, and the ratio. Target: a move well under a frame (16 ms) at 20 runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from PyQt5.QtWidgets import QApplication  # noqa: E402

from resplot import settings as settings_mod  # noqa: E402
from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.ui.window import MainWindow, make_poller  # noqa: E402
from tests.fixtures.stores import BASE_TIME, make_run, new_store  # noqa: E402


def make_store(path: Path, runs: int, steps: int) -> None:
    engine = new_store(path)
    s = np.arange(steps)
    for i in range(runs):
        loss = 2.5 + 0.05 * i + 2 * np.exp(-s / 300) + 0.02 * np.sin(s * (i + 1))
        points = {
            "train/loss": list(zip(s.tolist(), loss.tolist(), strict=True)),
            "valid/loss": [(int(k), float(loss[k]) + 0.1) for k in s[::250]],
            "train/lr": [(int(k), 3e-4) for k in s],
            "train/grad_norm": [(int(k), 1.0 + 0.1 * np.sin(k / 10)) for k in s],
            "train/tokens_per_s": [(int(k), 40000.0 + i) for k in s],
            "train/mfu": [(int(k), 0.4) for k in s],
        }
        make_run(engine, name=f"run-{i:02d}", created_at=BASE_TIME + i, points=points)
    engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--store", type=Path, help="an existing store instead (e.g. runs/reslog.db)")
    args = ap.parse_args()
    app = QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        if args.store is not None:
            import sqlite3

            from schema.sqlite_file import readonly_uri

            store = args.store.resolve()
            with sqlite3.connect(readonly_uri(store), uri=True) as conn:
                args.runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        else:
            store = Path(tmp) / "hover.db"
            make_store(store, args.runs, args.steps)
        start = time.perf_counter()
        cache = SeriesCache()
        win = MainWindow(cache, settings_mod.Settings(), Path(tmp) / "settings.json")
        win.resize(1280, 800)
        win.show()
        win.attach_poller(make_poller(cache, 0.2, win.ask_host_key))
        win.add_source(str(store))
        first_s = None
        deadline = time.monotonic() + 60
        while first_s is None and time.monotonic() < deadline:
            app.processEvents()
            view = win.pages["training"]
            if view.page.shows_data() and not win._redraw_timer.isActive():
                view.canvas.draw()  # what draw_idle does at the next paint
                first_s = time.perf_counter() - start
            time.sleep(0.001)
        while time.monotonic() < deadline and (
            len(win.state.ticked) < args.runs
            or cache.wanted_count()
            or win._redraw_timer.isActive()
        ):
            app.processEvents()
            time.sleep(0.01)
        win.redraw_now()
        view = win.pages["training"]
        if not view.page.axes:
            raise SystemExit(
                f"nothing drawn: {len(cache.runs())} runs, {len(win.state.ticked)} ticked"
            )
        view.canvas.draw()
        app.processEvents()
        ax = view.page.axes[0]
        xs = np.linspace(*ax.get_xlim(), args.repeat)

        def timed(fn) -> float:
            out = []
            for x in xs:
                t = time.perf_counter()
                fn(x)
                out.append(time.perf_counter() - t)
            return statistics.median(out) * 1000

        draw_ms = timed(lambda _x: view.canvas.draw())
        view.canvas.draw()
        hover_ms = timed(lambda x: view.crosshair.show_at(0, float(x)))
        readings = len(view.crosshair.found)
        win.close()
    print(f"{args.runs} runs × {args.steps} steps, training page at 1280×800, Qt offscreen")
    print("| what | median |")
    print("|---|---:|")
    print(f"| window start to first chart drawn (this local store) | {first_s * 1000:.0f} ms |")
    print(f"| full page draw (baseline: a move without blitting) | {draw_ms:.1f} ms |")
    print(f"| hover move: crosshair blit + readout of {readings} series | {hover_ms:.1f} ms |")
    print(f"ratio: {draw_ms / hover_ms:.0f}× cheaper than a full draw")


if __name__ == "__main__":
    main()
