"""A full draw of a chart page with its text from cached glyphs (resplot/draw/text_cache.py)
against matplotlib's own renderer, in the real window, alternated in one process.

    .venv/bin/python scripts/bench/bench_text_cache.py [--repeat 9] [--size 1400x900]

The store: 12 runs x 20,000 steps of the training keys (a sweep in the fine range), built once
under --dir through the writer's rollup keeper. The window (Qt offscreen) opens it, every run
ticked, and waits until each page's view is complete; then each page is drawn --repeat times
with each renderer in turn (a fresh renderer of each kind per page, so the first cached draw
pays for its glyphs). Reported: the median and best draw of each, their ratio, and whether the
two renderers gave the same pixels (they must: the run fails otherwise).
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
KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "time/step",
        "valid/loss")  # fmt: skip
RUNS, STEPS = 12, 20_000


def build(path: Path) -> None:
    import numpy as np
    from scale_store import cached

    from tests.fixtures.stores import make_run, new_store

    def make(path: Path) -> None:
        engine = new_store(path)
        rng = np.random.default_rng(1)
        steps = np.arange(STEPS)
        for r in range(RUNS):
            base = 2.0 + 8.0 / (1.0 + steps / (500.0 * (r + 1)))
            points = {k: list(zip(steps.tolist(), (base * (i + 1) + rng.standard_normal(STEPS)
                                                   * 0.05).tolist(), strict=True))
                      for i, k in enumerate(KEYS[:-1])}  # fmt: skip
            points["valid/loss"] = [(s, float(base[s]) + 0.1) for s in range(0, STEPS, 1000)]
            make_run(engine, name=f"lr{r}", points=points)
        engine.dispose()

    cached(path, {"runs": RUNS, "steps": STEPS, "keys": list(KEYS)}, make)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--size", default="1400x900")
    p.add_argument("--dir", type=Path, default=Path("/tmp/reslog-text-cache"))
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    args.dir.mkdir(parents=True, exist_ok=True)
    store = args.dir / "sweep.db"
    build(store)

    import numpy as np
    from matplotlib.backends.backend_agg import RendererAgg
    from PyQt5.QtWidgets import QApplication

    from resplot import settings as settings_mod
    from resplot.data.cache import SeriesCache
    from resplot.draw.text_cache import TextCachingRenderer
    from resplot.ui.window import MainWindow, make_poller

    app = QApplication.instance() or QApplication([])
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), Path(tempfile.mkdtemp()) / "s.json")
    win.resize(*map(int, args.size.split("x")))
    win.show()
    poller = make_poller(cache, 1.0, win.ask_host_key)
    win.attach_poller(poller)
    win.add_source(str(store))

    def settle(timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            app.processEvents()
            time.sleep(0.01)
            if len(cache.runs()) == RUNS and len(win.state.ticked) < RUNS:
                for run in cache.runs():
                    win.state.set_ticked(run.ref, True)
                win.schedule_redraw()
            page = win.current_page()
            if (len(win.state.ticked) == RUNS and not cache.wanted_count() and any(page.tracks)
                    and page.incomplete() == 0):  # fmt: skip
                for _ in range(20):
                    app.processEvents()
                    time.sleep(0.01)
                return
        raise SystemExit("the page did not complete")

    rows, same = [], True
    for page in ("training", "all"):
        win.set_page(page)
        settle()
        canvas = win.page_view().canvas
        fig = canvas.figure
        size = (*canvas.get_width_height(physical=True), fig.dpi)
        renderers = {"matplotlib": RendererAgg(*size), "cached glyphs": TextCachingRenderer(*size)}
        times: dict[str, list[float]] = {name: [] for name in renderers}
        pixels = {}
        for _ in range(args.repeat):
            for name, renderer in renderers.items():
                t0 = time.perf_counter()
                fig.draw(renderer)
                times[name].append(time.perf_counter() - t0)
                pixels[name] = np.asarray(renderer.buffer_rgba()).copy()
        same &= np.array_equal(pixels["matplotlib"], pixels["cached glyphs"])
        rows.append((page, f"{size[0]}x{size[1]}", times))
    poller.stop()

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{RUNS} runs x {STEPS:,} steps; median (best) of {args.repeat}; load average {load}\n")
    print("| page | canvas | matplotlib | cached glyphs | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for page, size, times in rows:
        a, b = (statistics.median(times[n]) for n in ("matplotlib", "cached glyphs"))
        cell = {n: f"{statistics.median(t) * 1000:.0f} ms ({min(t) * 1000:.0f})"
                for n, t in times.items()}  # fmt: skip
        print(f"| {page} | {size} | {cell['matplotlib']} | {cell['cached glyphs']} | "
              f"{a / b:.2f}x |")  # fmt: skip
    print(f"\nthe same pixels: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
