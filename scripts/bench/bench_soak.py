"""resplot soak: the real window for `--minutes` with two live runs writing and random actions,
reporting RSS and event-loop stalls over time.

    .venv/bin/python scripts/bench/bench_soak.py [--minutes 60] [--every 30] [--counts]
        [--trace] [--stacks] [--before REV]
    xvfb-run -a -s "-screen 0 1920x1080x24" env QT_QPA_PLATFORM=xcb \\
        .venv/bin/python scripts/bench/bench_soak.py --minutes 10

A 12-run sweep (tests/fixtures/sweep.py, `--steps` a run) and two processes logging one live run
each (tests/fixtures/live_logger.py: loss every step at ~100 steps/s, validation, telemetry,
checkpoints) into one SQLite store, polled every `--poll` s. Actions, chosen at random (seeded):
hover a chart, click a chart, rubber-band zoom, drag-pan, follow the data again, switch page,
click a table row, resize 1280×800 / 1920×1080, scroll the page (`--actions resize=4,page=1`:
only those kinds, at those weights, to stress one of them). Qt offscreen unless
QT_QPA_PLATFORM says otherwise.

Every `--every` seconds one row: minutes, RSS (MB), the tile cache's bytes, actions done, the
longest event-loop stall in the interval (a 10 ms timer's lateness) and how many passed 250 ms;
`--counts` adds live matplotlib artists and numpy arrays (a gc walk, ~50 ms) and ends with the
kinds of object a full pass of the collector traverses, the most numerous; `--trace` ends
with tracemalloc's largest growths between minute 5 (or half time) and the end; `--holders
Path,QStaticText` with what holds the objects of those types made since then (holders.py);
`--stacks` with where the GUI thread was while the tick was over 250 ms late, sampled every 50 ms
(stall_stacks.py). At the end: the cyclic garbage collector's passes on the GUI thread by
generation (how many, their time, the longest; resplot/ui/collector.py). Targets
(issue 31): RSS growth ≤ 100 MB after the first 5 minutes; no stall over 250 ms on an idle
machine.

`--before REV` runs the same soak first on the code of a git revision (`git archive`), in a
child process, then on this tree, and prints both tables.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import math
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from holders import Mark, report
from stall_stacks import StallSampler
from trees import tree_of

ROOT = Path(__file__).resolve().parents[2]
# The code soaked: this tree, or the baseline's (--before runs this script again on it).
CODE = Path(os.environ.get("SOAK_TREE", ROOT))
if str(CODE) not in sys.path:
    sys.path.insert(0, str(CODE))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

STALL_MS = 250.0
TICK_MS = 10


class CollectorPasses:
    """The cyclic garbage collector's passes on the GUI thread, timed by generation: a full
    pass traverses every object the collector sees, a stall of its own."""

    def __init__(self) -> None:
        self.times: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.collected: dict[int, list[int]] = {0: [], 1: [], 2: []}  # garbage found, per pass
        self.full_ends: list[float] = []  # perf_counter() at the end of each full pass
        # The GUI thread's CPU time in each full pass: against its wall time, what the other
        # processes (the loggers, the poller's SQLite reads) took of the cores meanwhile.
        self.full_cpu: list[float] = []
        self._start = 0.0
        self._start_cpu = 0.0
        self._thread = threading.get_ident()
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict) -> None:
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._start = time.perf_counter()
            self._start_cpu = time.thread_time()
        else:
            self.times[info["generation"]].append((time.perf_counter() - self._start) * 1000)
            self.collected[info["generation"]].append(info["collected"])
            if info["generation"] == 2:
                self.full_ends.append(time.perf_counter())
                self.full_cpu.append((time.thread_time() - self._start_cpu) * 1000)

    def in_stalls(self, stalls: list[tuple[float, float]]) -> str:
        """How many of the stalls (perf_counter() spans) had a full pass end inside them."""
        ends = self.full_ends
        hit = sum(any(a < t <= b for t in ends) for a, b in stalls)
        return (
            f"stalls over {STALL_MS:.0f} ms with a full collector pass in them: "
            f"{hit} of {len(stalls)}"
        )

    def stop(self) -> None:
        gc.callbacks.remove(self._note)

    def collect(self) -> None:
        """A full collection of the soak's own (a count of what is alive), not one of the
        passes it reports."""
        counting = self._note in gc.callbacks  # (not after stop())
        if counting:
            gc.callbacks.remove(self._note)
        try:
            gc.collect()
        finally:
            if counting:
                gc.callbacks.append(self._note)

    def report(self) -> str:
        parts = []
        for generation, times in self.times.items():
            if times:
                times = sorted(times)
                parts.append(
                    f"generation {generation}: {len(times)} passes, {sum(times):.0f} ms in all, "
                    f"median {times[len(times) // 2]:.1f} ms, longest {times[-1]:.0f} ms, "
                    f"{sum(t > STALL_MS for t in times)} over {STALL_MS:.0f} ms"
                )
        frozen = gc.get_freeze_count()
        out = f"collector passes ({frozen} objects frozen): " + "; ".join(parts)
        # A full pass's time is its traversal and the freeing of the cycles it found: split by
        # the garbage each found, the quiet half against the rest.
        full = sorted(zip(self.collected[2], self.times[2], strict=True))
        if self.full_cpu:
            cpu, wall = sorted(self.full_cpu), sorted(self.times[2])
            mid = len(cpu) // 2
            out += (
                f"\nfull passes' CPU time on the GUI thread: median {cpu[mid]:.0f} ms, "
                f"longest {cpu[-1]:.0f} ms (wall: median {wall[mid]:.0f} ms)"
            )
        if len(full) >= 4:
            half = len(full) // 2
            for name, part in (("least", full[:half]), ("most", full[half:])):
                found = [c for c, _t in part]
                ms = sorted(t for _c, t in part)
                out += (
                    f"\nfull passes that found the {name} garbage ({found[0]}-{found[-1]} "
                    f"objects): median {ms[len(ms) // 2]:.0f} ms, "
                    f"{sum(t > STALL_MS for t in ms)} over {STALL_MS:.0f} ms"
                )
        return out


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def malloc_mb() -> float:
    """Bytes glibc's malloc has handed out and not had back (what RSS would be without
    fragmentation and freed pages kept), in MB; NaN where mallinfo2 is missing."""

    class Info(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = Info
    except (OSError, AttributeError):
        return float("nan")
    info = libc.mallinfo2()
    return (info.uordblks + info.hblkhd) / 2**20


def counts() -> dict[str, int]:
    """Live objects of the kinds a redraw makes, Python's heap blocks, malloc's bytes in use."""
    from matplotlib.artist import Artist
    from matplotlib.axis import Tick
    from matplotlib.lines import Line2D
    from matplotlib.text import Text

    out: dict[str, int] = {"artists": 0, "Line2D": 0, "Text": 0, "Tick": 0, "gc objects": 0}
    for obj in gc.get_objects():
        out["gc objects"] += 1
        if isinstance(obj, Artist):
            out["artists"] += 1
            out["Line2D"] += isinstance(obj, Line2D)
            out["Text"] += isinstance(obj, Text)
            out["Tick"] += isinstance(obj, Tick)
    out["py blocks k"] = sys.getallocatedblocks() // 1000
    out["malloc MB"] = round(malloc_mb())
    return out


def type_counts(passes: CollectorPasses) -> Counter:
    """The objects alive by type, garbage collected first: counted without a collection, the
    growth since minute 5 held cycles that no full pass had reached yet (stop 66: `method`,
    `FontProperties`, `MarkerStyle`, `Event` +1,500-2,000 each, while RSS did not grow)."""
    passes.collect()
    return Counter(type(obj).__qualname__ for obj in gc.get_objects())


class Actions:
    """Random things a person does to the window, as real mouse and key events (QTest)."""

    KINDS = ("hover", "click", "zoom", "pan", "follow", "page", "row", "resize", "scroll")
    WEIGHTS = (40, 6, 6, 6, 5, 6, 6, 2, 4)  # how often a person does each, roughly

    def __init__(
        self, app, win, rng: random.Random, weights: dict[str, float] | None = None
    ) -> None:
        self.app, self.win, self.rng = app, win, rng
        self.weights = [
            (weights or {}).get(kind, 0.0) if weights else w
            for kind, w in zip(self.KINDS, self.WEIGHTS, strict=True)
        ]
        self.done: dict[str, int] = {}
        self.last = ""  # the kind of the last action done

    def wait(self, ms: float) -> None:
        end = time.monotonic() + ms / 1000
        while True:
            self.app.processEvents()
            if time.monotonic() >= end:
                return
            time.sleep(0.002)

    def _point(self, canvas, ax, fx: float, fy: float):
        from PyQt5.QtCore import QPoint

        box = ax.bbox
        ratio = canvas.device_pixel_ratio or 1.0
        x, y = box.x0 + fx * box.width, box.y0 + fy * box.height
        return QPoint(int(x / ratio), int((canvas.figure.bbox.height - y) / ratio))

    def _chart(self):
        view = self.win.page_view()
        page = view.page
        axes = getattr(page, "axes", [])
        if not axes:
            return None
        ax = self.rng.choice(axes)
        if hasattr(view, "scroll"):
            box = ax.bbox
            view.scroll.ensureVisible(int(box.x0), int(view.canvas.figure.bbox.height - box.y1))
        return view, ax

    def one(self) -> None:
        from PyQt5.QtCore import Qt
        from PyQt5.QtTest import QTest

        from resplot.data.state import PAGES

        kind = self.rng.choices(self.KINDS, weights=self.weights)[0]
        r = self.rng.random
        if kind == "page":
            bar = self.win.tabs.tabBar()
            i = self.rng.randrange(len(PAGES))
            QTest.mouseClick(bar, Qt.LeftButton, Qt.NoModifier, bar.tabRect(i).center())
        elif kind == "row":
            view = self.win.table.view
            rows = view.model().rowCount()
            if rows:
                index = view.model().index(self.rng.randrange(rows), 1)
                view.scrollTo(index)
                QTest.mouseClick(
                    view.viewport(), Qt.LeftButton, Qt.NoModifier, view.visualRect(index).center()
                )
        elif kind == "resize":
            self.win.resize(*self.rng.choice([(1280, 800), (1920, 1080)]))
        elif kind == "follow":
            self.win.reset_view()
        elif kind == "scroll":
            view = self.win.page_view()
            if hasattr(view, "scroll"):
                bar = view.scroll.verticalScrollBar()
                bar.setValue(int(r() * bar.maximum()))
        else:
            got = self._chart()
            if got is None:
                return
            view, ax = got
            canvas = view.canvas
            if kind == "hover":
                for _ in range(5):
                    QTest.mouseMove(canvas, self._point(canvas, ax, r(), r()))
                    self.wait(5)
            elif kind == "click":
                QTest.mouseClick(
                    canvas, Qt.LeftButton, Qt.NoModifier, self._point(canvas, ax, r(), r())
                )
            elif kind in ("zoom", "pan"):
                tool = view.toolbar.zoom if kind == "zoom" else view.toolbar.pan
                a = self._point(canvas, ax, 0.2 + 0.3 * r(), 0.2 + 0.6 * r())
                b = self._point(canvas, ax, 0.55 + 0.4 * r(), 0.2 + 0.6 * r())
                tool()
                QTest.mousePress(canvas, Qt.LeftButton, Qt.NoModifier, a)
                steps = 1 if kind == "zoom" else 8
                for k in range(1, steps + 1):
                    from PyQt5.QtCore import QPoint

                    at = QPoint(a.x() + (b.x() - a.x()) * k // steps, a.y())
                    QTest.mouseMove(canvas, at if kind == "pan" else b)
                    self.wait(16)
                QTest.mouseRelease(
                    canvas, Qt.LeftButton, Qt.NoModifier, b if kind == "zoom" else at
                )
                tool()  # off again
        self.done[kind] = self.done.get(kind, 0) + 1
        self.last = kind


def print_stalls_by_action(after: dict[str, list[float]]) -> None:
    """The event loop's longest lateness between each action and the next, by kind."""
    print("| action | done | median ms | 90th pct ms | longest ms | over 250 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for kind, late in sorted(after.items(), key=lambda kv: -sum(x > STALL_MS for x in kv[1])):
        late = sorted(late)
        p90 = late[min(len(late) - 1, int(0.9 * len(late)))]
        over = sum(x > STALL_MS for x in late)
        print(
            f"| {kind} | {len(late)} | {late[len(late) // 2]:.0f} | {p90:.0f} | {late[-1]:.0f}"
            f" | {over} |"
        )


def soak(args) -> None:
    """One soak in this process (this tree or the one on PYTHONPATH), rows on stdout."""
    import tracemalloc

    from PyQt5.QtCore import QElapsedTimer, QTimer
    from PyQt5.QtWidgets import QApplication

    from resplot.data.cache import SeriesCache
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow, make_poller

    try:
        from resplot.ui.collector import freeze_startup
    except ImportError:  # a tree from before it: nothing frozen, as `resplot open` was then

        def freeze_startup() -> int:
            return 0

    from tests.fixtures.sweep import PROJECT, make_sweep

    if args.trace:
        tracemalloc.start(12)
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        store = Path(tmp) / "runs.db"
        make_sweep(store, steps=args.steps)
        loggers = []
        env = {**os.environ, "PYTHONPATH": str(CODE)}
        for _ in range(2):  # two live runs, each its own training process
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.fixtures.live_logger",
                    str(store),
                    "--project",
                    PROJECT,
                    "--every",
                    str(args.minutes * 60 + 600),
                ],
                cwd=str(CODE),
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            loggers.append(proc)
            if not proc.stdout.readline().startswith("ok"):
                raise SystemExit("a logging process did not start")
        try:
            cache = SeriesCache()
            freeze_startup()  # as `resplot open` does
            win = MainWindow(cache, settings_mod.Settings(), Path(tmp) / "settings.json")
            win.resize(1920, 1080)
            win.show()
            win.state.set_poll_interval(args.poll)
            win.attach_poller(make_poller(cache, args.poll, win.ask_host_key))
            win.add_source(str(store))
            acts = Actions(app, win, random.Random(args.seed), weights(args.actions))
            acts.wait(3000)
            # The event loop's lateness: a 10 ms timer that notes how late it fires.
            worst = [0.0, 0]  # longest gap over the tick in this interval (ms), gaps > 250 ms
            # The longest gap from an action to the next one, by the action's kind: which of
            # them the stalls follow.
            after: dict[str, list[float]] = {}
            since_action = [0.0]
            clock = QElapsedTimer()
            clock.start()
            last = [clock.elapsed()]
            stalls: list[tuple[float, float]] = []  # perf_counter() spans of the stalls

            sampler = None
            if args.stacks:
                sampler = StallSampler(CODE, lambda: acts.last or "")
                sampler.start()

            def tick() -> None:
                if sampler is not None:
                    sampler.tick()
                now = clock.elapsed()
                late = now - last[0] - TICK_MS
                if late > STALL_MS:
                    end = time.perf_counter()
                    stalls.append((end - (now - last[0]) / 1000, end))
                last[0] = now
                worst[0] = max(worst[0], late)
                worst[1] += late > STALL_MS
                since_action[0] = max(since_action[0], late)

            passes = CollectorPasses()
            timer = QTimer()
            timer.setInterval(TICK_MS)
            timer.timeout.connect(tick)
            timer.start()
            start = time.monotonic()
            end = start + args.minutes * 60
            next_row = start
            base_snap = None
            base_types = None
            mark = None
            head = "| min | RSS MB | tiles MB | actions | longest stall ms | stalls > 250 ms |"
            if args.counts:
                head += " artists | Line2D | Text | Tick | gc objects | py blocks k | malloc MB |"
            print(head)
            print("|" + "---:|" * (head.count("|") - 1))
            rows = []
            while True:
                now = time.monotonic()
                if now >= next_row:
                    actions = sum(acts.done.values())
                    row = [
                        f"{(now - start) / 60:.1f}",
                        f"{rss_mb():.0f}",
                        f"{cache.tile_bytes / 2**20:.0f}",
                        str(actions),
                        f"{worst[0]:.0f}",
                        str(worst[1]),
                    ]
                    if args.counts:
                        row += [str(v) for v in counts().values()]
                    rows.append(row)
                    print("| " + " | ".join(row) + " |", flush=True)
                    worst[0], worst[1] = 0.0, 0
                    next_row += args.every
                    if base_types is None and now - start >= min(300, end - now):
                        base_types = type_counts(passes)
                        if args.holders:
                            mark = Mark(args.holders.split(","))
                        if args.trace:
                            base_snap = tracemalloc.take_snapshot()
                    last[0] = clock.elapsed()  # the row's own time is not the window's stall
                    if sampler is not None:
                        sampler.tick()
                if now >= end:
                    break
                since_action[0] = 0.0
                acts.one()
                acts.wait(args.pause_ms)
                after.setdefault(acts.last, []).append(since_action[0])
            timer.stop()
            passes.stop()
            if sampler is not None:
                sampler.stop()
            print(passes.report())
            print(passes.in_stalls(stalls))
            print(f"actions: {acts.done}; runs: {len(cache.runs())}; redraws: {win.redraw_count}")
            print_stalls_by_action(after)
            if sampler is not None:
                print(sampler.report())
            # What of the RSS is freed heap that malloc kept (fragmentation), not memory held.
            rss = rss_mb()
            trim = getattr(ctypes.CDLL("libc.so.6"), "malloc_trim", None)
            if trim is not None:
                trim(0)
                print(f"RSS at the end {rss:.0f} MB; after malloc_trim(0) {rss_mb():.0f} MB")
            if args.counts:
                # What a full pass of the collector traverses (the frozen imports left out).
                held = type_counts(passes)
                print(
                    f"objects the collector traverses: {sum(held.values())}; most: "
                    + ", ".join(f"{name} {n}" for name, n in held.most_common(16))
                )
            if base_types is not None:
                grown = (type_counts(passes) - base_types).most_common(12)
                print(
                    "objects that grew most since minute 5 (or half time): "
                    + ", ".join(f"{name} +{n}" for name, n in grown)
                )
            if mark is not None:
                made = mark.new()
                print(f"what holds the {len(made)} {args.holders} objects made since then:")
                for line in report(made):
                    print(line)
            if args.trace and base_snap is not None:
                snap = tracemalloc.take_snapshot()
                print("tracemalloc, largest growth since the base snapshot:")
                for stat in snap.compare_to(base_snap, "traceback")[:12]:
                    print(f"  {stat.size_diff / 2**20:+.1f} MB ({stat.count_diff:+d} blocks)")
                    for line in stat.traceback.format()[-8:]:
                        print("     ", line)
            win.close()
        finally:
            for proc in loggers:
                proc.kill()
                proc.wait()


def weights(spec: str | None) -> dict[str, float] | None:
    """`--actions resize=2,page=1` as {kind: weight}; None: every kind, a person's mix."""
    if not spec:
        return None
    out: dict[str, float] = {}
    for part in spec.split(","):
        kind, _, w = part.partition("=")
        if kind not in Actions.KINDS:
            raise SystemExit(f"--actions: no action {kind!r} (one of {', '.join(Actions.KINDS)})")
        try:
            weight = float(w or 1)
        except ValueError:
            weight = math.nan
        if not (weight > 0 and math.isfinite(weight)):
            raise SystemExit(f"--actions: {part!r} is not kind=weight, a weight above 0")
        out[kind] = weight
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between rows")
    ap.add_argument("--steps", type=int, default=20_000, help="steps of each sweep run")
    ap.add_argument("--poll", type=float, default=1.0, help="poll interval (s)")
    ap.add_argument("--pause-ms", type=float, default=150.0, help="between actions")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--counts", action="store_true")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--stacks", action="store_true", help="where the GUI thread was in stalls")
    ap.add_argument("--holders", help="types whose new objects' holders to report, e.g. Path")
    ap.add_argument("--before", help="git revision to soak first, for comparison")
    ap.add_argument(
        "--actions",
        help="only these kinds, with weights: e.g. resize=2,page=1 (default: a person's mix)",
    )
    args = ap.parse_args()
    weights(args.actions)  # a bad --actions fails here, not in the child of --before
    if args.before:
        with tempfile.TemporaryDirectory(prefix="bench-soak-before-") as tmp:
            tree = tree_of(args.before, Path(tmp) / "before")
            argv = [a for a in sys.argv[1:] if a != "--before" and a != args.before]
            env = {**os.environ, "PYTHONPATH": str(tree), "SOAK_TREE": str(tree)}
            print(f"before ({args.before}):", flush=True)
            subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), *argv], env=env, check=True
            )
        print("after (this tree):", flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    platform = os.environ.get("QT_QPA_PLATFORM")
    print(f"soak {args.minutes:g} min, Qt {platform}, load average at start {load}")
    soak(args)


if __name__ == "__main__":
    main()
