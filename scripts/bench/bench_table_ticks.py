"""resplot's run table: what ticking costs with a big job in it (the real window, Qt offscreen).

    .venv/bin/python scripts/bench/bench_table_ticks.py [--tree DIR] [--runs 100] [--ranks 64]
        [--repeat 8]

The table holds `--runs` single runs and one job of `--ranks` ranks over hosts of 8 (no data:
what is timed is the table and the window's answer to a tick, each followed by Qt's event
processing, the repaint of the unfolded table included). Timed, median of `--repeat`: the job
row's tick box clicked (every rank ticked or unticked at once), the All / None buttons over
every run, and one run ticked from its menu (MainWindow.tick). `--tree` puts another checkout
first on sys.path (the code before a change), for a before/after in the same session.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", type=Path, default=ROOT)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--repeat", type=int, default=8)
    args = p.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PyQt5.QtCore import Qt
    from PyQt5.QtWidgets import QApplication

    from resplot.data.cache import SeriesCache
    from resplot.data.model import RunInfo, RunRef
    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    t0 = 1.7e9
    runs = []
    for n in range(args.runs):
        runs.append(
            RunInfo(
                RunRef("local", "/s.db", f"uid{n:04d}"),
                "sweep",
                f"run-{n}",
                "running",
                t0 + n,
                t0 + n,
                config={"lr": n},
            )
        )
    for r in range(args.ranks):
        host = f"gpu-{r // 8}"
        runs.append(
            RunInfo(
                RunRef(host, f"/{host}.db", f"rank{r:04d}"),
                "job",
                f"ddp-rank{r}",
                "running",
                t0 + r,
                t0 + r,
                host=host,
                rank=r,
                world_size=args.ranks,
                group="job-1",
            )
        )
    cache = SeriesCache()
    cache.set_runs(runs)
    win = MainWindow(cache, settings_mod.Settings(), None)
    win.resize(1280, 800)
    win.show()
    win.model.refresh({})
    win.table.view.expandAll()
    app.processEvents()
    model = win.model
    job = next(
        model.index(i, 0)
        for i in range(model.rowCount())
        if model.entry_at(model.index(i, 0)).kind == "job"
    )

    def timed(action) -> float:
        times = []
        for k in range(args.repeat):
            start = time.perf_counter()
            action(k % 2 == 0)
            app.processEvents()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    rows = [
        (
            "the job row's tick box",
            timed(
                lambda on: model.setData(job, Qt.Checked if on else Qt.Unchecked, Qt.CheckStateRole)
            ),
        ),
        (
            "All / None over every run",
            timed(lambda on: win.table.tick_visible("all" if on else "none")),
        ),
        ("one run from its menu", timed(lambda on: win.tick(runs[0].ref, on))),
    ]
    print(
        f"tree {args.tree}: {args.runs} runs and a job of {args.ranks} ranks, median of "
        f"{args.repeat}"
    )
    print("| action | ms |\n| --- | ---: |")
    for name, ms in rows:
        print(f"| {name} | {ms:.1f} |" if ms >= 0.1 else f"| {name} | < 0.1 |")
    win.close()


if __name__ == "__main__":
    main()
