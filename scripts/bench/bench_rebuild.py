"""resplot: what a page built anew for other charts costs (a section of the All page folded and
unfolded), against the code of another revision in the same run.

    QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/bench/bench_rebuild.py \
        [--section train] [--size 1920x1080] [--steps 20000] [--folds 10] [--pairs 2] \
        [--before REV] [--store FILE]

The 12-run sweep of the viewer tests (tests/fixtures/sweep.py, `--steps` each) in a real
MainWindow (Qt offscreen) at `--size` on the All page. A fold is what a click on a section's
card does (the window's toggle_section, then its redraw over turns and the page's draw in
pieces); `--folds` of them, folding and unfolding `--section` in turn. Reported: the GUI
thread's CPU time a fold and an unfold until the page is drawn (medians), the cyclic garbage
each left for the collector (a `gc.collect()` after it, the collector off meanwhile), and the
longest turn of the event loop it took; with `--before REV`, that revision's code in child
processes alternated with this tree's, `--pairs` times, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import gc
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
CODE = Path(os.environ.get("REBUILD_TREE", ROOT))  # the code timed (a --before child: its tree)
sys.path.insert(0, str(CODE))
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # the fixtures


def measure(args) -> dict:
    """One window on the store: the folds' GUI CPU, garbage and longest turn (this code)."""
    from PyQt5.QtWidgets import QApplication

    from resplot.sources.polling import Loaded
    from resplot.sources.spec import parse_spec
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp, Loaded([parse_spec(str(args.store))]) as loaded:
        win = MainWindow(loaded.cache, settings_mod.Settings(), Path(tmp) / "settings.json")
        win.resize(*args.size)
        win.show()
        win.on_runs_changed()
        win.set_page("all")
        view = win.page_view()

        def settle() -> None:
            # Until the tiles the view asks for are in and no redraw or draw is due.
            for _ in range(2000):
                app.processEvents()
                if loaded.cache.wanted_count():
                    loaded.fetch()
                elif not win._redraw_timer.isActive() and not view.canvas.draw_due:
                    break
                time.sleep(0.002)
            app.processEvents()

        turns: list[float] = []

        def timed(call):
            def run(*a, **k):
                start = time.thread_time()
                try:
                    return call(*a, **k)
                finally:
                    turns.append(time.thread_time() - start)

            return run

        for _ in range(3):
            win.redraw_now()
            settle()
        # Each turn of the redraw and of the draw in pieces, timed.
        canvas = view.canvas
        canvas.draw = timed(canvas.draw)
        queued = getattr(canvas, "queued", None)
        if queued is not None:
            queued.timer.timeout.disconnect()
            queued.timer.timeout.connect(timed(queued.turn))
        win._redraw_timer.timeout.disconnect()
        win._redraw_timer.timeout.connect(timed(getattr(win, "_redraw_due", win.redraw_now)))
        for _ in range(2):  # folded and unfolded once: every tile of both layouts fetched
            win.toggle_section(args.section)
            settle()
        shown = len(view.page.specs)
        kinds: dict[str, dict[str, list[float]]] = {}
        for k in range(args.folds):
            kind = "fold" if k % 2 == 0 else "unfold"
            gc.collect()
            gc.disable()
            turns.clear()
            start = time.thread_time()
            win.toggle_section(args.section)
            settle()
            spent = time.thread_time() - start
            garbage = gc.collect()
            gc.enable()
            got = kinds.setdefault(kind, {"cpu": [], "garbage": [], "turn": []})
            got["cpu"].append(spent * 1000)
            got["garbage"].append(float(garbage))
            got["turn"].append(max(turns, default=0.0) * 1000)
        out = {
            f"{kind}_{what}": statistics.median(values)
            for kind, got in kinds.items()
            for what, values in got.items()
        }
        out["charts"] = shown
        win.close()
    return out


def child(args, tree: Path) -> dict:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--store", str(args.store)]
    argv += ["--section", args.section, "--size", f"{args.size[0]}x{args.size[1]}"]
    argv += ["--folds", str(args.folds)]
    env = {**os.environ, "REBUILD_TREE": str(tree), "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--section", default="train", help="the All page's section folded")
    ap.add_argument("--size", default="1920x1080", help="the window's size, WxH")
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--before", help="git revision to time beside this tree")
    ap.add_argument("--store", type=Path, help="the sweep's store (made if missing)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.size = tuple(int(v) for v in args.size.split("x"))
    if args.child:
        print(json.dumps(measure(args)))
        return
    from tests.fixtures.sweep import make_sweep

    with tempfile.TemporaryDirectory(prefix="bench-rebuild-") as tmp:
        if args.store is None:
            args.store = Path(tmp) / "sweep.db"
        if not args.store.exists():
            make_sweep(args.store, steps=args.steps)
        from trees import alternated

        before = Path(tmp) / "before"
        rows = alternated(args.before, before, args.pairs, lambda tree: child(args, tree))
    size = f"{args.size[0]}×{args.size[1]}"
    print(
        f"\nAll page at {size}, 12 runs × {args.steps:,} steps, the {args.section} section "
        f"folded and unfolded ({args.folds} in all a process), {args.pairs} processes a tree "
        f"alternated; medians of the processes' medians\n"
    )
    names = list(rows)
    print("| a page built anew | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for what, key, unit in (
        ("a fold: GUI CPU until drawn", "fold_cpu", "ms"),
        ("an unfold: GUI CPU until drawn", "unfold_cpu", "ms"),
        ("a fold: cyclic garbage left", "fold_garbage", "objects"),
        ("an unfold: cyclic garbage left", "unfold_garbage", "objects"),
        ("a fold: the longest turn of the event loop", "fold_turn", "ms"),
        ("an unfold: the longest turn of the event loop", "unfold_turn", "ms"),
    ):
        cells = [f"{statistics.median(r[key] for r in rows[n]):,.1f} {unit}" for n in names]
        print(f"| {what} | " + " | ".join(cells) + " |")
    if len(names) == 2:
        for kind in ("fold", "unfold"):
            a, b = (statistics.median(r[f"{kind}_cpu"] for r in rows[n]) for n in names)
            print(f"\nratio, {kind} CPU ({names[1]} / {names[0]}): {b / a:.3f}")


if __name__ == "__main__":
    main()
