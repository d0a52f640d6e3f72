"""resplot hover, zoom and drag-pan: what a pointer move costs (the crosshair blitted and the
readout of every run's value), a zoom to cached data, and the frames a drag-pan draws a second,
against a full draw of the page (what a move would cost without blitting).

    .venv/bin/python scripts/bench/bench_hover.py [--runs 12,100] [--steps 3000] [--repeat 50]
        [--before REV] [--size 1280x800] [--pan-moves 30] [--store FILE]

The real window (Qt offscreen unless QT_QPA_PLATFORM says otherwise, 1280×800) on a real store
of `--runs` runs with train/valid loss, lr, grad norm, tokens/s and MFU, training page.
Reported per run count: the time from creating the window to the first chart drawn with data
(issue 10's target: ≤ 1 s), the median of `--repeat` calls of each (wall time, and the GUI
thread's CPU time, the steadier number on a loaded machine): a full page draw, the
crosshair's `show_at`, a real mouse move (QTest, its events processed: blit and readout painted);
a zoom to a range whose tiles are cached (the x limits set as the toolbar sets them, until the
refreshed page is drawn); a drag-pan with the toolbar's pan tool (`--pan-moves` real mouse
moves, each processed with what it draws): frames drawn a second and ms a move. Targets (issue
31): hover ≤ 10 ms a move at 12 runs, ≤ 16 ms at 100; zoom from cached data ≤ 50 ms; drag-pan
≥ 30 frames a second.

`--before REV` measures the code of a git revision (`git archive`) in a child process first,
then this tree, alternately per run count, and prints them side by side (the same machine, the
same minutes).
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

ROOT = Path(__file__).resolve().parents[2]
# The code measured: this tree, or a baseline's (--before runs this script again on it).
CODE = Path(os.environ.get("BENCH_TREE", ROOT))
if str(CODE) not in sys.path:
    sys.path.insert(0, str(CODE))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from PyQt5.QtWidgets import QApplication  # noqa: E402

from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.ui import settings as settings_mod  # noqa: E402
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


def settle(app, win, deadline: float) -> None:
    """Until the view's tiles are in and no redraw is due."""
    while time.monotonic() < deadline and (
        win.cache.wanted_count()
        or win._redraw_timer.isActive()
        or getattr(win.page_view().canvas, "draw_due", False)  # a draw in pieces
    ):
        app.processEvents()
        time.sleep(0.005)
    app.processEvents()


def measure(args) -> dict:
    """One window on one store: every number of one row (this process's code)."""
    from PyQt5.QtCore import QEvent, QPoint, QPointF, Qt
    from PyQt5.QtGui import QMouseEvent
    from PyQt5.QtTest import QTest

    app = QApplication.instance() or QApplication([])
    out: dict = {"runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            store = Path(tmp) / "hover.db"
            make_store(store, args.runs, args.steps)
        start = time.perf_counter()
        cache = SeriesCache()
        win = MainWindow(cache, settings_mod.Settings(), Path(tmp) / "settings.json")
        win.resize(*args.size)
        win.show()
        win.attach_poller(make_poller(cache, 0.2, win.ask_host_key))
        win.add_source(str(store))
        first_s = None
        deadline = time.monotonic() + 120
        view = win.pages["training"]
        while first_s is None and time.monotonic() < deadline:
            app.processEvents()
            if view.page.shows_data() and not win._redraw_timer.isActive():
                view.canvas.draw()  # what draw_idle does at the next paint
                first_s = time.perf_counter() - start
            time.sleep(0.001)
        while time.monotonic() < deadline and len(cache.runs()) < args.runs:
            app.processEvents()
            time.sleep(0.01)
        win.model.set_ticked_many([r.ref for r in cache.runs()], True)  # every run plotted
        settle(app, win, deadline)
        win.redraw_now()
        settle(app, win, deadline)
        if not view.page.axes:
            raise SystemExit(f"nothing drawn: {len(cache.runs())} runs")
        out["ticked"] = len(win.state.ticked)
        view.canvas.draw()
        app.processEvents()
        draws = [0, 0]  # draws, the redraw_count at the last one

        def on_draw(_e) -> None:
            draws[0] += 1
            draws[1] = win.redraw_count

        view.canvas.mpl_connect("draw_event", on_draw)
        ax = view.page.axes[0]
        xs = np.linspace(*ax.get_xlim(), args.repeat)

        cpu: list[float] = []  # the GUI thread's CPU time of each call of the last timed()

        def timed(fn, values) -> list[float]:
            got = []
            cpu.clear()
            for v in values:
                t, c = time.perf_counter(), time.thread_time()
                fn(v)
                got.append((time.perf_counter() - t) * 1000)
                cpu.append((time.thread_time() - c) * 1000)
            return got

        out["first_ms"] = first_s * 1000 if first_s else float("nan")
        out["draw_ms"] = statistics.median(timed(lambda _x: view.canvas.draw(), xs[:10]))
        view.canvas.draw()
        out["show_at_ms"] = statistics.median(
            timed(lambda x: view.crosshair.show_at(0, float(x)), xs)
        )
        out["readings"] = len(view.crosshair.found)
        canvas = view.canvas
        ratio = canvas.device_pixel_ratio or 1.0
        height = canvas.figure.bbox.height
        box = ax.bbox
        view.scroll.ensureVisible(0, 0)
        app.processEvents()

        def at(fx: float, fy: float = 0.5) -> QPoint:
            x, y = box.x0 + fx * box.width, box.y0 + fy * box.height
            return QPoint(int(x / ratio), int((height - y) / ratio))

        held = [Qt.NoButton]

        def move(fx: float) -> None:
            # A real QMouseEvent (QTest.mouseMove carries no held button under offscreen Qt).
            p = at(fx, 0.3 + 0.4 * fx) if held[0] == Qt.NoButton else at(fx)
            event = QMouseEvent(QEvent.MouseMove, QPointF(p), Qt.NoButton, held[0], Qt.NoModifier)
            QApplication.sendEvent(canvas, event)
            app.processEvents()

        sections: dict[str, float] = {}
        if args.sections:
            _time_sections(view, sections)
        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        moves = timed(move, np.linspace(0.05, 0.95, args.repeat))
        if profile is not None:
            import pstats

            profile.disable()
            stats = pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative")
            stats.print_stats(40)
            stats.print_callees("show_at|readings|values_at|_draw_overlay|_blit|_axis|_batch")
        out["move_ms"] = statistics.median(moves)
        out["move_p95_ms"] = float(np.percentile(moves, 95))
        out["move_cpu_ms"] = statistics.median(cpu)
        if args.sections:
            per_move = {k: round(v / args.repeat, 2) for k, v in sections.items()}
            print(f"GUI-thread ms a move, by section: {per_move}", file=sys.stderr)
        if view.crosshair.readout is None or not view.crosshair.label.isVisible():
            raise SystemExit("the mouse moves showed no readout")
        QTest.mouseMove(canvas, QPoint(2, 2))
        app.processEvents()
        if args.hover_only:
            win.close()
            return out

        # Zoom to ranges whose tiles are cached: each range once to load them, then timed.
        x0, x1 = ax.get_xlim()
        spans = [(x0 + f * (x1 - x0), x0 + (f + 0.2) * (x1 - x0)) for f in (0.1, 0.4, 0.7)]

        def zoom(span, pause: bool = True) -> None:
            if pause:
                time.sleep(0.06)  # past the window's 50 ms between redraws: a fresh zoom
            before = win.redraw_count
            ax.set_xlim(*span)  # what the toolbar's zoom does on release, then draw_idle
            canvas.draw_idle()
            end = time.monotonic() + 30
            while draws[1] <= before and time.monotonic() < end:
                app.processEvents()

        for span in spans:
            zoom(span)
            settle(app, win, deadline + 60)
        times, cpus = [], []
        profile = None
        if args.profile:
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        for _ in range(max(1, args.repeat // 10)):
            for span in spans:
                time.sleep(0.06)
                t, c = time.perf_counter(), time.thread_time()
                zoom(span, pause=False)
                times.append((time.perf_counter() - t) * 1000)
                cpus.append((time.thread_time() - c) * 1000)
        if profile is not None:
            import pstats

            profile.disable()
            print("-- the zooms --", file=sys.stderr)
            pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
        out["zoom_ms"] = statistics.median(times)
        out["zoom_cpu_ms"] = statistics.median(cpus)
        settle(app, win, deadline + 60)

        # A drag-pan from the middle of a zoomed range, with the toolbar's pan tool.
        zoom((x0 + 0.4 * (x1 - x0), x0 + 0.6 * (x1 - x0)))
        settle(app, win, deadline + 60)
        view.toolbar.pan()
        QTest.mousePress(canvas, Qt.LeftButton, Qt.NoModifier, at(0.5))
        held[0] = Qt.LeftButton
        app.processEvents()
        # Frames shown: page draws, and a drag's previews (resplot/ui/drag_pan.py, where the
        # code has them: the last exact frame moved as a bitmap).
        drag = getattr(view, "drag", None)
        n0, p0, t0 = draws[0], drag.frames if drag else 0, time.perf_counter()
        step = 0.5 / args.pan_moves
        frames = timed(move, [0.5 + step * k for k in range(1, args.pan_moves + 1)])
        elapsed = time.perf_counter() - t0
        previews = (drag.frames if drag else 0) - p0
        out["pan_fps"] = (draws[0] - n0 + previews) / elapsed
        out["pan_move_ms"] = statistics.median(frames)
        out["pan_move_cpu_ms"] = statistics.median(cpu)
        out["pan_draws_per_move"] = (draws[0] - n0) / args.pan_moves
        out["pan_previews_per_move"] = previews / args.pan_moves
        t = time.perf_counter()
        QTest.mouseRelease(canvas, Qt.LeftButton, Qt.NoModifier, at(1.0))
        held[0] = Qt.NoButton
        end = time.monotonic() + 60
        app.processEvents()
        while time.monotonic() < end and (
            win._redraw_timer.isActive() or win._view_redraw_posted or canvas.draw_due
        ):
            app.processEvents()  # the exact frame: refreshed, then drawn
        out["pan_release_ms"] = (time.perf_counter() - t) * 1000
        out["pan_y_refit"] = ax.get_ylim()
        settle(app, win, deadline + 60)
        shown = np.asarray(canvas.buffer_rgba()).copy()
        canvas.draw()
        out["pan_end_exact"] = bool(np.array_equal(shown, np.asarray(canvas.buffer_rgba())))
        view.toolbar.pan()
        app.processEvents()
        win.close()
    return out


def _time_sections(view, into: dict[str, float]) -> None:
    """Wrap the parts of a hover move to sum the GUI thread's CPU ms of each into `into`."""
    from resplot.ui import crosshair as crosshair_mod

    def wrap(owner, name: str, label: str) -> None:
        fn = getattr(owner, name)

        def timed(*a, **k):
            c = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                into[label] = into.get(label, 0.0) + (time.thread_time() - c) * 1000

        setattr(owner, name, timed)

    ch = view.crosshair
    wrap(ch, "show_at", "show_at (all)")
    wrap(crosshair_mod, "readings", "readings")
    wrap(crosshair_mod.readout_mod, "layout", "readout layout")
    wrap(ch, "_hovered", "hovered run")
    wrap(ch, "_set_dots", "set dots")
    wrap(ch, "_draw_overlay", "draw line, dots")
    wrap(ch, "_blit", "blit (repaints)")
    wrap(ch.label, "show_readout", "readout fit")
    wrap(ch.label, "paintEvent", "readout paint")
    wrap(view.canvas, "paintEvent", "canvas paint")


def _cell(result: dict, key: str, unit: str, pairs: int) -> str:
    value = f"{result.get(key, float('nan')):.1f} {unit}".strip()
    if pairs > 1 and key in result:
        lo, hi = result["range"][key]
        value += f" ({lo:.1f}-{hi:.1f})"
    return value


ROWS = (
    ("window start to first chart drawn", "first_ms", "ms", ""),
    ("full page draw (a move without blitting)", "draw_ms", "ms", ""),
    ("crosshair show_at (line, dots, readout)", "show_at_ms", "ms", ""),
    ("hover: a real mouse move, processed (median)", "move_ms", "ms", "≤ 10 (12), ≤ 16 (100)"),
    ("hover: a real mouse move (95th percentile)", "move_p95_ms", "ms", ""),
    ("zoom to cached data, until drawn", "zoom_ms", "ms", "≤ 50"),
    ("drag-pan: frames drawn a second", "pan_fps", "fps", "≥ 30"),
    ("drag-pan: a move, processed (median)", "pan_move_ms", "ms", "≤ 33"),
    ("GUI-thread CPU: a hover move", "move_cpu_ms", "ms", ""),
    ("GUI-thread CPU: a zoom to cached data", "zoom_cpu_ms", "ms", ""),
    ("GUI-thread CPU: a drag-pan move", "pan_move_cpu_ms", "ms", ""),
    ("drag-pan: page draws a move", "pan_draws_per_move", "", ""),
    ("drag-pan: previews a move", "pan_previews_per_move", "", ""),
    ("drag-pan: release to the exact frame drawn", "pan_release_ms", "ms", ""),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="12,100", help="run counts, comma separated")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--pan-moves", type=int, default=30)
    ap.add_argument("--before", help="git revision (or a tree's folder) measured first")
    ap.add_argument("--size", default="1280x800", help="the window's size, WxH")
    ap.add_argument(
        "--pairs",
        type=int,
        default=1,
        help="measure each variant this many times, alternately: the table gives the median "
        "of the runs and their range (this machine's noise)",
    )
    ap.add_argument("--hover-only", action="store_true", help="skip the zoom and the pan")
    ap.add_argument("--sections", action="store_true", help="CPU ms a move by part (stderr)")
    ap.add_argument(
        "--profile", action="store_true", help="cProfile the hover moves and the zooms (stderr)"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--store", type=Path, help="a store made by make_store, for one --runs")
    args = ap.parse_args()
    args.size = tuple(int(v) for v in str(args.size).lower().split("x"))
    if args.child:
        args.runs = int(args.runs)
        print("RESULT " + json.dumps(measure(args)), flush=True)
        return
    variants = [("before", args.before), ("after", None)] if args.before else [("after", None)]
    got: dict[tuple[str, int], dict] = {}
    spread: dict[tuple[str, int], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-hover-") as tmp:
        trees = {}
        for name, rev in variants:
            trees[name] = str(ROOT)
            if rev is not None:
                into = Path(tmp) / name
                into.mkdir()
                archive = subprocess.run(
                    ["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True
                ).stdout
                subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
                trees[name] = str(into)
        for runs in [int(r) for r in args.runs.split(",")]:
            store = Path(tmp) / f"runs-{runs}.db"  # one store, read by every variant
            if args.store is not None:  # made before by make_store (12 × 200k takes minutes)
                store = args.store
            else:
                make_store(store, runs, args.steps)
            for _pair, (name, _rev) in [(k, v) for k in range(args.pairs) for v in variants]:
                env = {**os.environ, "BENCH_TREE": trees[name], "PYTHONPATH": trees[name]}
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--child",
                    "--runs",
                    str(runs),
                    "--steps",
                    str(args.steps),
                    "--repeat",
                    str(args.repeat),
                    "--pan-moves",
                    str(args.pan_moves),
                    "--store",
                    str(store),
                    "--size",
                    "x".join(map(str, args.size)),
                    *(["--hover-only"] if args.hover_only else []),
                    *(["--sections"] if args.sections else []),
                    *(["--profile"] if args.profile else []),
                ]
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if args.sections or args.profile:  # what the child printed of its parts
                    print(proc.stderr, file=sys.stderr, flush=True)
                line = next(
                    (ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None
                )
                if line is None:
                    raise SystemExit(f"{name}, {runs} runs failed:\n{proc.stderr[-3000:]}")
                result = json.loads(line[7:])
                spread.setdefault((name, runs), []).append(result)
                print(f"{name}, {runs} runs: {result}", file=sys.stderr, flush=True)
    for col, results in spread.items():
        got[col] = {
            k: statistics.median(r[k] for r in results)
            for k in results[0]
            if isinstance(results[0][k], (int, float))
        }
        got[col]["range"] = {
            k: (min(r[k] for r in results), max(r[k] for r in results)) for k in got[col]
        }
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    platform = os.environ.get("QT_QPA_PLATFORM")
    size = "×".join(map(str, args.size))
    print(
        f"training page at {size}, Qt {platform}, {args.steps:,} steps a run; "
        f"before = {args.before or '-'}; load average {load}"
        + (f"; median of {args.pairs} runs each (range)" if args.pairs > 1 else "")
    )
    cols = [(name, runs) for runs in [int(r) for r in args.runs.split(",")] for name, _ in variants]
    print("| what | " + " | ".join(f"{n}, {r} runs" for n, r in cols) + " | target |")
    print("|---|" + "---:|" * len(cols) + "---|")
    for label, key, unit, target in ROWS:
        if all(key not in got[c] for c in cols):
            continue  # not measured (--hover-only)
        cells = [_cell(got[c], key, unit, args.pairs) for c in cols]
        print(f"| {label} | " + " | ".join(cells) + f" | {target} |")
    for c in cols:
        r = got[c]
        exact = r.get("pan_end_exact")
        said = "" if exact is None else f"; after the drag, canvas = a full draw: {exact}"
        print(f"{c[0]}, {c[1]} runs: {r['ticked']} runs plotted, {r['readings']} series read{said}")


if __name__ == "__main__":
    main()
