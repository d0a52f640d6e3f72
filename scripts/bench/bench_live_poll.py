"""resplot following a live sweep: what one poll that adds points costs the GUI thread, with
the page drawn in layers (resplot/ui/layers.py: the series over the saved axes, follow mode
with headroom) against a full draw every poll (the code before issue 31), in one process.

    .venv/bin/python scripts/bench/bench_live_poll.py [--runs 12] [--steps 200000] [--polls 30]
        [--live K] [--smoothing W]
    .venv/bin/python scripts/bench/bench_live_poll.py --markdown docs/benchmarks/viewer.md
    .venv/bin/python scripts/bench/bench_live_poll.py --tree BEFORE --pairs 4  # alternated

The real MainWindow (Qt offscreen) on the Training page of a real SQLite store of `--runs` runs
× `--steps` steps (train/loss, train/lr, train/grad_norm, train/tokens_per_s at every step,
valid/loss every 500), read through a local agent by the headless poll (Loaded). With `--live
K` only the K oldest runs get points (the others are marked finished: a run followed beside
finished ones). Each poll appends `--add` steps to every series of every (live) run in the
store, reads them on a thread of its own as the window's poller worker does (`worker_fetch`:
the read, then the new points' views worked out ahead of the redraw; not GUI time),
then times on the GUI thread the window's redraw (as its timer runs it: over turns of the event
loop where the code has them) and the draw it queues (`processEvents`). Per size (1280×800,
1920×1080) and mode, alternating: `full` (layers off, limits refitted every poll: every poll a
full draw) and `layers`. Reported: median GUI-thread CPU and wall time of a poll, full draws,
the share of one core at the default 1 s poll (GUI thread + the worker's read and apply),
whether the last blitted frame is pixel-equal to a full draw of the same state (the window's
own), and in how many pixels that full draw differs from matplotlib drawing every series whole
(where live series' bodies meet their tails, resplot/ui/tails.py). `--smoothing 0` draws raw
lines (the System page's telemetry, keys that are not smoothed) instead of the default's
smoothed curves. `--x-axis tokens` draws the page on the tokens axis, of a store whose runs
also log the tokens they have seen (each run's points placed by its tokens series).
`--events N` gives each live run N checkpoint events spread over its steps (a run that logs
one a second: 3,600 an hour) and selects the first live run in the table, so its
events are drawn on every chart (with more than five runs plotted only the highlighted or
selected runs' are). `--page timing` follows the Timing page instead, of a store whose runs
also log each step's timed parts (data, forward, backward, optimizer, step: its step-time
stacks, resplot/draw/composites.py); `--page system` the System page, of a store whose runs
also log two GPUs' utilisation, temperature, power and throttle reasons (a power cap over a
quarter of the steps: its throttle bars).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# --tree runs this file again under another checkout (the code before): its modules first.
ROOT = Path(os.environ.get("BENCH_TREE") or Path(__file__).resolve().parents[2])
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from common import update_section  # noqa: E402
from PyQt5.QtWidgets import QApplication  # noqa: E402

SECTION = "## resplot: a live poll drawn in layers (issue 31)"
from live_sweep import PAGE_KEYS, Sweep, build_store, store_path  # noqa: E402


def redraw(win) -> None:
    """A poll's redraw as the window runs it: its timer's, over turns of the event loop where
    the code has them (resplot/ui/redraw_turns.py), else redraw_now."""
    due = getattr(win, "_redraw_due", None)
    if due is None:
        win.redraw_now()
        return
    due()
    while win._redraw_timer.isActive():  # the turns after the first
        QApplication.processEvents()


def events_done(win) -> None:
    """Run the event loop until the page's queued draw is done (in pieces, a turn each:
    resplot/ui/pieces.py) and painted."""
    QApplication.processEvents()
    canvas = win.page_view().canvas
    for _ in range(1000):
        if not getattr(canvas, "draw_due", False):
            return
        QApplication.processEvents()


def worker_fetch(win, loaded) -> None:
    """A poll as the window's poller worker runs it, on a thread of its own: the sources read
    into the cache, then the new points' views worked out ahead of the redraw (the window's
    work_ahead, where the code has it)."""
    failed: list[BaseException] = []

    def work() -> None:
        try:
            refs = loaded.fetch()
            ahead = getattr(win, "work_ahead", None)
            if ahead is not None:
                ahead(refs)
        except BaseException as exc:  # raised again on the calling thread
            failed.append(exc)

    thread = threading.Thread(target=work, name="poller worker")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def drawn(win, loaded) -> None:
    """Redraw until the page shows its view complete (first views, after a mode switch)."""
    for _ in range(8):
        QApplication.processEvents()
        win.redraw_now()
        events_done(win)
        if not win.cache.wanted_count():
            break
        loaded.fetch()
    win.redraw_now()
    events_done(win)


def set_mode(win, layers: bool) -> None:
    view = win.page_view()
    if not hasattr(view, "layers"):
        return  # the code before: every poll a full draw
    view.layers.enabled = layers
    view.page.headroom = layers
    view.page.reset_view()  # a fresh fit, as a new window makes
    view.layers.mark()


def run_polls(win, loaded, sweep: Sweep, polls: int, add: int, profile=None) -> dict:
    """`profile`: a cProfile.Profile, on while the GUI thread works (not the fetches)."""
    view = win.page_view()
    gui_cpu, gui_wall, proc_cpu = [], [], []
    layers = getattr(view, "layers", None)
    blits0 = layers.blits if layers is not None else 0
    plain_draws = [0]
    cid = view.canvas.mpl_connect(
        "draw_event", lambda _e: plain_draws.__setitem__(0, plain_draws[0] + 1)
    )
    for _ in range(polls):
        sweep.add(add)
        p0 = time.process_time()
        worker_fetch(win, loaded)
        fetch_cpu = time.process_time() - p0
        t0, c0 = time.perf_counter(), time.thread_time()
        if profile is not None:
            profile.enable()
        redraw(win)
        events_done(win)  # the queued full draw, its paint
        if profile is not None:
            profile.disable()
        gui_cpu.append(time.thread_time() - c0)
        gui_wall.append(time.perf_counter() - t0)
        proc_cpu.append(fetch_cpu + gui_cpu[-1])
        extra = 0
        while win.cache.wanted_count() and extra < 3:  # a level's tiles (rare): drawn too
            extra += 1
            worker_fetch(win, loaded)
            t0, c0 = time.perf_counter(), time.thread_time()
            redraw(win)
            events_done(win)
            gui_cpu[-1] += time.thread_time() - c0
            gui_wall[-1] += time.perf_counter() - t0
    view.canvas.mpl_disconnect(cid)
    return {
        "gui_cpu": statistics.median(gui_cpu),
        "gui_wall": statistics.median(gui_wall),
        "gui_p90": sorted(gui_wall)[int(0.9 * (len(gui_wall) - 1))],
        "proc_cpu": statistics.median(proc_cpu),
        "full": plain_draws[0],
        "blits": (layers.blits if layers is not None else 0) - blits0,
        "polls": polls,
    }


def pixel_equal(win, loaded, sweep: Sweep, add: int) -> tuple[bool, float]:
    """One more poll drawn in layers, then the same state drawn anew as the window draws a
    page it holds no picture of: the same pixels? And the share of the pixels in which that
    full draw differs from matplotlib's drawing every series whole (resplot/ui/tails.py)."""
    view = win.page_view()
    blits = view.layers.blits
    sweep.add(add)
    worker_fetch(win, loaded)
    win.redraw_now()
    QApplication.processEvents()
    if view.layers.blits == blits:
        return False, float("nan")  # not blitted: nothing to compare
    blitted = np.asarray(view.canvas.buffer_rgba()).copy()
    view.layers.release()
    view.canvas.draw()
    full = np.asarray(view.canvas.buffer_rgba()).copy()
    view.layers.enabled = False
    view.layers.mark()
    view.canvas.draw()
    whole = np.asarray(view.canvas.buffer_rgba()).copy()
    view.layers.enabled = True
    view.layers.mark()
    view.canvas.draw()
    rows = view.layers.view_rows()
    if rows is not None:
        cut = slice(int(rows[0]), int(rows[1]))
        blitted, full, whole = blitted[cut], full[cut], whole[cut]
    equal = blitted.shape == full.shape and bool((blitted == full).all())
    return equal, float((full != whole).any(axis=2).mean())


def timed_ms(fn, repeat: int) -> float:
    """Median CPU time of `repeat` calls of fn, in ms (CPU: this machine is shared)."""
    out = []
    for _ in range(repeat):
        c0 = time.thread_time()
        fn()
        out.append(time.thread_time() - c0)
    return statistics.median(out) * 1e3


def bench_legends(repeat: int = 15) -> dict[str, float]:
    """One chart legend of 4 series drawn on a 1280×800 canvas by the window's renderer (its
    text from stamps: resplot/draw/text_stamps.py): matplotlib's own Legend, the bitmap legend
    with the same text (a zoom or resize redraw), and with new text (a live poll: a series'
    latest value changes, a string never drawn before). On plain Agg every string is shaped
    again at each draw, which hid what the bitmap saves (stop 59)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend
    from matplotlib.lines import Line2D

    from resplot.data.layout import LEGEND_PT
    from resplot.draw.legend_bitmap import add_legend
    from resplot.draw.text_stamps import StampRenderer

    fig = Figure(figsize=(12.8, 8), dpi=100)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot(2, 2, 1)
    handles = [Line2D([], [], color=f"C{i}", linewidth=1.4) for i in range(4)]
    labels = [f"sweep-lr{i + 1}e-4-bs512  2.{i}31" for i in range(4)]
    canvas.draw()
    renderer = StampRenderer(1280, 800, fig.dpi)
    kw = {"loc": "upper right", "fontsize": LEGEND_PT, "framealpha": 0.6}
    plain = Legend(ax, handles, labels, **kw)
    plain.draw(renderer)
    out = {"matplotlib Legend": timed_ms(lambda: plain.draw(renderer), repeat)}
    bitmap = add_legend(ax, handles, labels, **kw)
    bitmap.draw(renderer)
    out["bitmap, same text"] = timed_ms(lambda: bitmap.draw(renderer), repeat)
    n = [0]

    def new_text() -> None:
        n[0] += 1
        bitmap.get_texts()[0].set_text(f"sweep-lr1e-4-bs512  2.{n[0]:03d}")
        bitmap.draw(renderer)

    out["bitmap, new text"] = timed_ms(new_text, repeat)

    def plain_new_text() -> None:
        n[0] += 1
        plain.get_texts()[0].set_text(f"sweep-lr1e-4-bs512  2.{n[0]:03d}")
        plain.draw(renderer)

    out["matplotlib Legend, new text"] = timed_ms(plain_new_text, repeat)
    return out


def full_draw_ms(win, repeat: int = 5) -> float:
    """A full draw of the page in view, as matplotlib draws it (what a resize draw or a
    stand-in draw costs)."""
    view = win.page_view()
    view.layers.enabled = False
    view.layers.mark()
    ms = timed_ms(view.canvas.draw, repeat)
    view.layers.enabled = True
    view.layers.mark()
    view.canvas.draw()  # the saved axes again
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--polls", type=int, default=30)
    ap.add_argument("--add", type=int, default=10, help="steps each poll adds to every series")
    ap.add_argument(
        "--live", type=int, help="runs that get points each poll, the others finished (all)"
    )
    ap.add_argument(
        "--smoothing", type=float, help="the window's smoothing (its default: 0.6; 0: raw lines)"
    )
    ap.add_argument(
        "--events", type=int, default=0, help="checkpoint events of each live run (its own drawn)"
    )
    ap.add_argument(
        "--profile", action="store_true", help="cProfile the layered polls' GUI work (stderr)"
    )
    ap.add_argument("--profile-out", type=Path, help="with --profile: also dump the stats here")
    ap.add_argument("--sizes", default="1280x800,1920x1080")
    ap.add_argument("--markdown", type=Path, help="update this file's section")
    ap.add_argument("--tree", type=Path, help="also time this checkout (the code before)")
    ap.add_argument(
        "--pairs",
        type=int,
        default=0,
        help="with --tree: time both trees in this many alternated pairs of child processes",
    )
    ap.add_argument(
        "--page",
        choices=tuple(PAGE_KEYS),
        default="training",
        help="the page followed (its store logs what it draws: PAGE_KEYS)",
    )
    ap.add_argument(
        "--x-axis",
        choices=("auto", "tokens"),
        default="auto",
        help="tokens: the runs also log train/tokens and the page is drawn on the tokens axis",
    )
    ap.add_argument("--modes", default="full,layers", help=argparse.SUPPRESS)
    args = ap.parse_args()
    child = args.modes == "before"

    from resplot.sources.polling import Loaded
    from resplot.sources.spec import parse_spec
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    path = store_path(args)
    t0 = time.perf_counter()
    tokens = args.x_axis == "tokens"
    build_store(path, args.runs, args.steps, args.page, tokens)
    print(f"store {path} ready in {time.perf_counter() - t0:.1f} s", flush=True)
    # A copy per run of the bench: the polls append to it.
    with tempfile.TemporaryDirectory() as tmp:
        live = Path(tmp) / "live.db"
        shutil.copyfile(path, live)  # written whole and closed: no WAL beside it
        sweep = Sweep(live, args.runs, args.steps, args.live, args.events, args.page, tokens)
        results = []
        with Loaded([parse_spec(str(live))]) as loaded:
            for size in args.sizes.split(","):
                w, h = (int(v) for v in size.split("x"))
                win = MainWindow(loaded.cache, settings_mod.Settings(), Path(tmp) / "s.json")
                win.resize(w, h)
                win.show()
                if args.smoothing is not None:
                    win.set_smoothing(args.smoothing)
                win.on_runs_changed()
                if args.x_axis != "auto":
                    win.set_x_axis(args.x_axis)
                if args.page != "training":
                    win.set_page(args.page)
                drawn(win, loaded)
                if args.events:
                    first = min(loaded.cache.runs(), key=lambda r: r.created_at)
                    win.table.select(first.ref)
                    drawn(win, loaded)
                canvas = win.page_view().canvas
                modes = args.modes.split(",")
                for mode in modes + modes:
                    # `before`: the code before as it ships (in layers where it has them).
                    set_mode(win, mode in ("layers", "before"))
                    drawn(win, loaded)
                    profile = None
                    if args.profile and mode == "layers":
                        import cProfile

                        profile = cProfile.Profile()
                    r = run_polls(win, loaded, sweep, args.polls // 2, args.add, profile)
                    if profile is not None:
                        import pstats

                        print(f"-- {size}, polls drawn in layers --", file=sys.stderr)
                        if args.profile_out:
                            profile.dump_stats(args.profile_out)
                        pstats.Stats(profile, stream=sys.stderr).sort_stats(
                            "cumulative"
                        ).print_stats(50)
                    results.append((size, f"{canvas.width()}x{canvas.height()}", mode, r))
                    print(
                        size,
                        mode,
                        {k: round(v * 1e3, 1) if isinstance(v, float) else v for k, v in r.items()},
                        flush=True,
                    )
                if not child:
                    set_mode(win, True)
                    drawn(win, loaded)
                    equal, apart = pixel_equal(win, loaded, sweep, args.add)
                    results.append((size, "", "pixel-equal", equal))
                    results.append((size, "", "whole apart", apart))
                    results.append((size, "", "full draw", full_draw_ms(win)))
                    print(size, "blitted frame pixel-equal to a full draw:", equal, flush=True)
                    print(size, f"full draw vs every series whole: {apart:.2%} of pixels")
                win.close()
                app.processEvents()
    if child:
        print("RESULTS " + json.dumps(results))
        return
    if args.tree is not None:
        results += pairs(args) if args.pairs else before(args)
    legends = bench_legends()
    print(legends)
    table = summarize(results, args, legends)
    print(table)
    if args.markdown:
        update_section(args.markdown, SECTION, table)
        print(f"updated {args.markdown}")


def before(args, tree: Path | None = None, label: str = "before") -> list:
    """The same polls drawn in layers under the checkout `tree` (default `args.tree`, the code
    before), in a child process; its rows' mode is `label`."""
    tree = (tree or args.tree).resolve()
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--modes",
        "before",
        "--runs",
        str(args.runs),
        "--steps",
        str(args.steps),
        "--polls",
        str(args.polls),
        "--add",
        str(args.add),
        *(["--live", str(args.live)] if args.live is not None else []),
        *(["--smoothing", str(args.smoothing)] if args.smoothing is not None else []),
        *(["--events", str(args.events)] if args.events else []),
        "--sizes",
        args.sizes,
        "--page",
        args.page,
        "--x-axis",
        args.x_axis,
    ]
    env = {**os.environ, "BENCH_TREE": str(tree), "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    print(out)
    line = next(ln for ln in out.splitlines() if ln.startswith("RESULTS "))
    return [(size, canvas, label, r) for size, canvas, _mode, r in json.loads(line[8:])]


def pairs(args) -> list:
    """`args.pairs` child processes of this tree and as many of `args.tree`, alternated (the
    first of each pair changes sides): this machine drifts by ±20 % between runs a minute
    apart, more than one change to a poll is worth."""
    out = []
    for k in range(args.pairs):
        sides = [(ROOT, "after"), (args.tree, "before")]
        for tree, label in sides if k % 2 == 0 else sides[::-1]:
            out += before(args, tree, f"{label}, alternated")
    return out


def summarize(results, args, legends: dict[str, float]) -> str:
    merged: dict[tuple[str, str], list] = {}
    canvases, equal, full_ms, apart = {}, {}, {}, {}
    for size, canvas, mode, r in results:
        if mode == "pixel-equal":
            equal[size] = r
            continue
        if mode == "whole apart":
            apart[size] = r
            continue
        if mode == "full draw":
            full_ms[size] = r
            continue
        canvases[size] = canvas
        merged.setdefault((size, mode), []).append(r)
    tree = " --tree BEFORE" if args.tree else ""
    if args.tree and args.pairs:
        tree += f" --pairs {args.pairs}"
    live = f" --live {args.live}" if args.live is not None else ""
    if args.smoothing is not None:
        live += f" --smoothing {args.smoothing:g}"
    fed = (
        "every series"
        if args.live is None
        else f"the series of {args.live} runs (the others finished)"
    )
    if args.page != "training":
        live += f" --page {args.page}"
    if args.x_axis != "auto":
        live += f" --x-axis {args.x_axis}"
    keys = {
        "training": "4 keys",
        "timing": "4 keys and 5 timed parts",
        "system": "4 keys and 2 GPUs' utilisation, temperature, power and throttle reasons",
    }[args.page]
    if args.x_axis == "tokens":
        keys += " and train/tokens (drawn on the tokens axis)"
    lines = [
        SECTION,
        "",
        f"`.venv/bin/python scripts/bench/bench_live_poll.py --polls {args.polls} --add "
        f"{args.add}{live}{tree}` ({args.runs} runs × {args.steps:,} steps, {keys} at every "
        f"step, {args.page.capitalize()} page, Qt offscreen, smoothing "
        f"{0.6 if args.smoothing is None else args.smoothing:g}; "
        f"each poll adds {args.add} steps to {fed}; the "
        "two modes "
        "alternated twice per size in one process; `before`: the same polls under the code "
        "before (`--tree`, a checkout of it), in a child process right after; with `--pairs "
        "K`, `after, alternated` and `before, alternated`: this tree's and that checkout's "
        "layered polls in K pairs of child processes, the order swapped each pair; "
        "medians):",
        "",
        "| size (canvas) | mode | GUI thread CPU / poll | GUI wall / poll (p90) | full draws "
        "| share of a core at 1 s polls | blitted = full draw |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for (size, mode), rs in merged.items():
        cpu = statistics.median(r["gui_cpu"] for r in rs)
        wall = statistics.median(r["gui_wall"] for r in rs)
        p90 = max(r["gui_p90"] for r in rs)
        proc = statistics.median(r["proc_cpu"] for r in rs)
        full = sum(r["full"] for r in rs)
        polls = sum(r["polls"] for r in rs)
        eq = ("yes" if equal.get(size) else "NO") if mode == "layers" else ""
        lines.append(
            f"| {size} ({canvases[size]}) | {mode} | {cpu * 1e3:.1f} ms | {wall * 1e3:.1f} ms "
            f"({p90 * 1e3:.0f}) | {full}/{polls} | {proc * 100:.1f} % | {eq} |"
        )
    lines += [
        "",
        "A full draw of the page (CPU, median of 5): "
        + ", ".join(f"{size} {ms:.0f} ms" for size, ms in full_ms.items())
        + ". Pixels in which it differs from matplotlib drawing every series whole (where "
        "live series' bodies meet their tails): "
        + ", ".join(f"{size} {share:.2%}" for size, share in apart.items())
        + ".",
        "",
        "| a chart legend of 4 series, one draw (CPU, median of 15) | ms |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {ms:.2f} |" for name, ms in legends.items()]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
