"""resplot: what a zoom to cached data costs on a chart page, against the code of another
revision in the same run.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/bench/bench_zoom_page.py \
        [--page all] [--size 1920x1080] [--steps 200000] [--zooms 12] [--pairs 2] \
        [--before REV] [--store FILE] [--alive]

The 12-run sweep of the viewer tests (tests/fixtures/sweep.py: train and validation loss, lr,
grad norm, throughput, MFU, tokens, GPU telemetry and step timings; `--steps` each) in a real
MainWindow (Qt offscreen) at `--size` on `--page`. A zoom is what the toolbar's does on
release (the x limits set, then the window's refresh and the page's draw), between three
ranges whose tiles are cached (each zoomed to twice first). The sweep's runs that did not end
read as crashed (their heartbeats are as old as the store); with `--alive` the stalled and
live ones are alive, in a copy of the store. Reported: the GUI thread's CPU
time a zoom (median of `--zooms`), the parts of it in the page's refresh (all its turns where
it runs over turns, resplot/ui/redraw_turns.py) and in its draw, and the longest turn of the
event loop it took (a turn of the redraw, or one of the draw's pieces);
with `--before REV`, that revision's code in child processes alternated with this tree's,
`--pairs` times, and the ratio of the medians (issue 31: zoom from cached data ≤ 50 ms).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[2]
CODE = Path(os.environ.get("ZOOM_TREE", ROOT))  # the code timed (a --before child: its tree)
sys.path.insert(0, str(CODE))
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # the fixtures


def measure(args) -> dict:
    """One window on the store: the zooms' GUI CPU times (this process's code)."""
    from PyQt5.QtWidgets import QApplication

    from resplot.draw.charts import ChartPage
    from resplot.sources.polling import Loaded
    from resplot.sources.spec import parse_spec
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    parts = {"refresh": 0.0}
    refresh = ChartPage.refresh

    def timed_refresh(self, *a, **k):
        start = time.thread_time()
        try:
            return refresh(self, *a, **k)
        finally:
            parts["refresh"] += time.thread_time() - start

    def timed_steps(name: str):
        # A page's refresh over turns (warm, then refresh_steps): each step's time counted.
        steps = getattr(ChartPage, name)

        def run(self, *a, **k):
            it = steps(self, *a, **k)
            try:
                while True:
                    start = time.thread_time()
                    try:
                        next(it)
                    except StopIteration:
                        return
                    finally:
                        parts["refresh"] += time.thread_time() - start
                    yield
            finally:
                it.close()  # (dropped for a newer view)

        setattr(ChartPage, name, run)

    if hasattr(ChartPage, "refresh_steps"):
        for name in ("warm", "refresh_steps"):
            timed_steps(name)
    else:  # code before the redraw over turns: the refresh in one call
        ChartPage.refresh = timed_refresh
    with tempfile.TemporaryDirectory() as tmp, Loaded([parse_spec(str(args.store))]) as loaded:
        win = MainWindow(loaded.cache, settings_mod.Settings(), Path(tmp) / "settings.json")
        win.resize(*args.size)
        win.show()
        win.on_runs_changed()
        win.set_page(args.page)

        def settle() -> None:
            # Until the tiles the view asks for are in and no redraw is due.
            for _ in range(500):
                app.processEvents()
                if loaded.cache.wanted_count():
                    loaded.fetch()
                elif not win._redraw_timer.isActive() and not win.page_view().canvas.draw_due:
                    break  # (a draw in pieces: done)
                time.sleep(0.002)
            app.processEvents()

        for _ in range(3):
            win.redraw_now()
            settle()
        view = win.page_view()
        page = view.page
        ax = next(a for a, s in zip(page.axes, page.specs, strict=False) if s.kind != "section")
        x0, x1 = ax.get_xlim()
        spans = [(x0 + f * (x1 - x0), x0 + (f + 0.2) * (x1 - x0)) for f in (0.1, 0.4, 0.7)]

        def zoom(span) -> None:
            ax.set_xlim(*span)  # the toolbar's zoom on release, then its draw_idle
            view.canvas.draw_idle()
            settle()

        for span in spans * 2:  # their tiles fetched and cached
            zoom(span)
        cpu, refresh_s, draw_s, turn_s = [], [], [], []
        draw_cpu = [0.0]
        turns: list[float] = []  # each slot's GUI CPU (a turn of the event loop)
        canvas = view.canvas

        def timed(call, is_draw: bool):
            def run(*a, **k):
                start = time.thread_time()
                try:
                    return call(*a, **k)
                finally:
                    spent = time.thread_time() - start
                    turns.append(spent)
                    if is_draw:
                        draw_cpu[0] += spent

            return run

        # The page's draw: in pieces, a turn at a time (resplot/ui/pieces.py), or whole.
        canvas.draw = timed(canvas.draw, True)
        queued = getattr(canvas, "queued", None)
        if queued is not None:
            queued.timer.timeout.disconnect()
            queued.timer.timeout.connect(timed(queued.turn, True))
        win._redraw_timer.timeout.disconnect()
        # The timer's redraw: over turns of the event loop (or, in code before them, the
        # refresh at once).
        redraw_due = getattr(win, "_redraw_due", win.redraw_now)
        win._redraw_timer.timeout.connect(timed(redraw_due, False))
        win._posted_redraw = timed(win._posted_redraw, False)  # a zoom's refresh, posted
        for k in range(args.zooms):
            time.sleep(0.06)  # past the window's 50 ms between redraws: a fresh zoom
            parts["refresh"], draw_cpu[0] = 0.0, 0.0
            turns.clear()
            start = time.thread_time()
            zoom(spans[k % 3])
            cpu.append(time.thread_time() - start)
            refresh_s.append(parts["refresh"])
            draw_s.append(draw_cpu[0])
            turn_s.append(max(turns, default=0.0))
        out = {
            "zoom_ms": statistics.median(cpu) * 1000,
            "refresh_ms": statistics.median(refresh_s) * 1000,
            "draw_ms": statistics.median(draw_s) * 1000,
            "turn_ms": statistics.median(turn_s) * 1000,
            "charts": sum(1 for s in page.specs if s.kind != "section"),
            "in_view": sum(1 for i in view.layers.in_view() if page.specs[i].kind != "section"),
        }
        win.close()
    return out


def _alive_copy(store: Path, to: Path) -> Path:
    """A copy of the sweep whose stalled and live runs are alive (heartbeats ahead of now):
    the stored sweep's heartbeats are as old as its file, so that every run that did not end
    reads as crashed, and one crashed long ago is settled (resplot/draw/tiers.py)."""
    import sqlite3

    from tests.fixtures.sweep import LIVE, STALLED, sweep_name

    source, copy = sqlite3.connect(store), sqlite3.connect(to)
    with copy:
        source.backup(copy)
        names = (sweep_name(STALLED), sweep_name(LIVE))
        copy.execute(
            "UPDATE runs SET heartbeat_at = ? WHERE name IN (?, ?)", (time.time() + 1e6, *names)
        )
    source.close()
    copy.close()
    return to


def child(args, tree: Path) -> dict:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--store", str(args.store)]
    argv += ["--page", args.page, "--size", f"{args.size[0]}x{args.size[1]}"]
    argv += ["--zooms", str(args.zooms)]
    env = {**os.environ, "ZOOM_TREE": str(tree), "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--page", default="all")
    ap.add_argument("--size", default="1920x1080", help="the window's size, WxH")
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--zooms", type=int, default=12)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--before", help="git revision to time beside this tree")
    ap.add_argument("--store", type=Path, help="the sweep's store (made if missing)")
    ap.add_argument("--alive", action="store_true", help="the sweep's stalled and live runs alive")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.size = tuple(int(v) for v in args.size.split("x"))
    if args.child:
        print(json.dumps(measure(args)))
        return
    from tests.fixtures.sweep import make_sweep

    with tempfile.TemporaryDirectory(prefix="bench-zoom-") as tmp:
        if args.store is None:
            args.store = Path(tmp) / "sweep.db"
        if not args.store.exists():
            make_sweep(args.store, steps=args.steps)
        if args.alive:
            args.store = _alive_copy(args.store, Path(tmp) / "alive.db")
        from trees import alternated

        before = Path(tmp) / "before"
        rows = alternated(args.before, before, args.pairs, lambda tree: child(args, tree))
    first = next(iter(rows.values()))[0]
    size = f"{args.size[0]}×{args.size[1]}"
    print(
        f"\n{args.page} page at {size}, 12 runs × {args.steps:,} steps, {first['charts']} charts "
        f"({first['in_view']} in view), {args.zooms} zooms a process, {args.pairs} processes a "
        f"tree alternated; GUI-thread CPU, median of the processes' medians\n"
    )
    names = list(rows)
    print("| a zoom to cached data | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for what, key in (
        ("GUI CPU", "zoom_ms"),
        ("the refresh", "refresh_ms"),
        ("the draw", "draw_ms"),
        ("the longest turn of the event loop", "turn_ms"),
    ):
        cells = [f"{statistics.median(r[key] for r in rows[n]):.1f} ms" for n in names]
        print(f"| {what} | " + " | ".join(cells) + " |")
    if len(names) == 2:
        a, b = (statistics.median(r["zoom_ms"] for r in rows[n]) for n in names)
        print(f"\nratio ({names[1]} / {names[0]}): {b / a:.3f}")


if __name__ == "__main__":
    main()
