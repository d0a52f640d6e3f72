"""The measurements of scripts/bench/scale.py, one per process: `scale_children.py PART ARGS`
prints one JSON line (the process's own peak RSS is part of what some parts report).
scale.py says what each part measures and runs them.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reslog.agent.bundle import boot_code
from resplot.sources.spec import parse_spec
from resplot.ssh.options import SSHOptions

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


ZOOMS = (0.5, 0.3, 0.7)  # where the zooms to 1 % of the steps go (fractions of the range)


def child_first(store: str, port: int, cfg: str) -> dict[str, Any]:
    """First view and zooms (their median) in the real window over SSH; the byte counts come
    from a proxy in the parent process (phases are announced on stdout and acknowledged on
    stdin)."""
    import psutil
    from PyQt5.QtCore import QTimer
    from PyQt5.QtWidgets import QApplication

    from resplot.data.cache import SeriesCache
    from resplot.ui import settings as settings_mod
    from resplot.ui.poller import Poller
    from resplot.ui.window import MainWindow

    def phase(name: str) -> None:
        print(f"phase {name}", flush=True)
        sys.stdin.readline()

    def run_loop(name: str) -> None:
        """app.exec_(); with SCALE_PROFILE=PREFIX set, under cProfile into PREFIX.NAME."""
        prefix = os.environ.get("SCALE_PROFILE")
        if not prefix:
            app.exec_()
            return
        import cProfile

        with cProfile.Profile() as prof:
            app.exec_()
        prof.dump_stats(f"{prefix}.{name}")

    app = QApplication.instance() or QApplication([])
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), Path(tempfile.mkdtemp()) / "s.json")
    win.resize(1400, 900)
    win.show()
    poller = Poller(cache, interval=1.0)
    win.attach_poller(poller)
    spec = f"target:{store}"
    out: dict[str, Any] = {}
    done_at: list[float] = []

    def drawn() -> bool:
        page = win.current_page()
        if cache.wanted_count() or not page.specs:
            return False
        items = [it for spec_ in page.specs for it in spec_.items]
        tracks = {it: t for ts in page.tracks for it, t in ts.items()}
        return bool(items) and all(
            it in tracks and tracks[it].view is not None and tracks[it].view.complete
            for it in items
        )

    def watch() -> None:  # after the window's own handler, in the same turn of the loop
        if len(cache.runs()) and len(win.state.ticked) < len(cache.runs()):
            for run in cache.runs():  # every run, not only the newest five
                win.state.set_ticked(run.ref, True)
            win.schedule_redraw()

    draw_at: list[float] = []  # each draw's end
    pictured: list[float] = []  # the ends of draws that showed data (the first: a first paint)

    def on_draw(_event) -> None:  # a draw of the canvas has finished: was it the whole page?
        draw_at.append(time.perf_counter())
        if win.current_page().shows_data():
            pictured.append(draw_at[-1])
        if drawn():
            done_at.append(time.perf_counter())
            app.quit()

    win.pages["training"].canvas.mpl_connect("draw_event", on_draw)
    poller.runsChanged.connect(watch)
    phase("first")
    t0 = time.perf_counter()
    label = poller.add_source(parse_spec(spec), SSHOptions(ssh_config=cfg), python=sys.executable)
    win.source_labels[spec] = label
    QTimer.singleShot(300_000, app.quit)
    run_loop("first")
    out["first_s"] = done_at[-1] - t0 if done_at else None
    out["first_draws"] = len(draw_at)
    out["first_draws_at"] = [round(t - t0, 3) for t in draw_at]  # from the start
    out["first_picture_s"] = pictured[0] - t0 if pictured else None
    out["series"] = sum(len(s.items) for s in win.current_page().specs)
    out["levels"] = sorted(
        {
            t.view.level
            for ts in win.current_page().tracks
            for t in ts.values()
            if t.view is not None
        }
    )
    phase("zoom")
    page = win.current_page()
    hi = max(s.agg[10] for r in cache.runs() for s in cache.summaries(r.ref).values())
    zooms = []
    for where in ZOOMS:  # each a range no earlier view read: its raw tiles are fetched
        mid, half = hi * where, hi * 0.005
        done_at.clear()
        t0 = time.perf_counter()
        page.axes[0].set_xlim(mid - half, mid + half)  # what the zoom tool does (x: steps)
        run_loop("zoom")
        zooms.append(done_at[-1] - t0 if done_at else None)
    out["zoom_s"] = None if None in zooms else statistics.median(zooms)
    out["zooms_s"] = zooms
    out["zoom_levels"] = sorted(
        {t.view.level for ts in page.tracks for t in ts.values() if t.view is not None}
    )
    out["tile_mb"] = cache.tile_bytes / 2**20
    phase("idle")
    source = poller.source(label)
    poller.set_paused(True)
    time.sleep(1.5)
    phase("idle-start")
    for _ in range(10):
        source.poll(cache)
    phase("idle-end")
    out["window_rss_mb"] = peak_rss_mb()
    agents = [
        p for p in psutil.process_iter(["cmdline"]) if boot_code() in (p.info["cmdline"] or [])
    ]
    hwm = []
    for p in agents:
        for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm.append(int(line.split()[1]) / 1024)
    out["agent_rss_mb"] = max(hwm) if hwm else None
    poller.stop()
    win.close()
    return out


def child_raw(store: str, cfg: str) -> dict[str, Any]:
    """Every point of the store through the agent by id (the viewer's path before rollups)."""
    import numpy as np

    from resplot.sources.ssh import SSHSource

    spec, ssh = parse_spec(f"target:{store}"), SSHOptions(ssh_config=cfg)
    src = SSHSource(spec, ssh, python=sys.executable)
    t0 = time.perf_counter()
    client = src.connect()
    path = client.discover([store])[0][0]
    after, n, kept = 0, 0, []
    while True:
        batch, after, more = client.points(path, after, limit=1_000_000)
        n += len(batch)
        kept.append((batch.steps, batch.values))  # held, as the cache held every point
        if not more:
            break
    seconds = time.perf_counter() - t0
    src.close()
    held = sum(a.nbytes + b.nbytes for a, b in kept) / 2**20
    assert np.isfinite(held)
    return {"raw_s": seconds, "raw_points": n, "raw_rss_mb": peak_rss_mb(), "held_mb": held}


def child_connect(store: str, cfg: str) -> dict[str, Any]:
    """Connect once (the agent is uploaded to the host), read nothing."""
    from resplot.sources.ssh import SSHSource

    spec, ssh = parse_spec(f"target:{store}"), SSHOptions(ssh_config=cfg)
    src = SSHSource(spec, ssh, python=sys.executable)
    src.connect().discover([store])
    src.close()
    return {}


def child_history(store: str) -> dict[str, Any]:
    import numpy as np
    import pandas  # noqa: F401 - imported before the clock starts

    import reslog
    from schema.store.connect import open_store
    from schema.store.reader import StoreReader

    with reslog.open(store) as st:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            df = st.history("run3", "train/loss", samples=1000)
            times.append(time.perf_counter() - t0)
        spike = float(df["max"].max())
    engine = open_store(store, readonly=True)
    reader = StoreReader(engine)
    run_id = next(i for i, r in reader.runs() if r.name == "run3")
    key_id = next(k for k, n in reader.key_names().items() if n == "train/loss")
    raw = []
    for _ in range(3):
        t0 = time.perf_counter()
        pts = [p for chunk in reader.scan(run_id, key_id) for p in chunk]
        steps = np.fromiter((p[0] for p in pts), np.int64, len(pts))
        values = np.fromiter((p[2] for p in pts), np.float64, len(pts))
        edges = np.linspace(steps[0], steps[-1] + 1, 1001)
        idx = np.searchsorted(steps, edges[:-1])
        np.maximum.reduceat(values, idx)
        raw.append(time.perf_counter() - t0)
    engine.dispose()
    return {"history_s": min(times), "rows": len(df), "spike": spike, "raw_s": min(raw)}


def child_latency(store: str, cfg: str, n: int) -> dict[str, Any]:
    """Delay from a point's commit to its arrival in the window's cache over SSH."""
    from PyQt5.QtCore import QTimer
    from PyQt5.QtWidgets import QApplication

    from resplot.data.cache import SeriesCache
    from resplot.ui.poller import Poller

    writer_code = (
        "import random, sys, time\n"
        "from tests.fixtures.stores import add_points, make_run, new_store\n"
        "engine = new_store(sys.argv[1])\n"
        "run = make_run(engine, name='latency', status='running', heartbeat_at=time.time())\n"
        "print('ready', flush=True)\n"
        "for step in range(int(sys.argv[2])):\n"
        "    time.sleep(random.uniform(0.3, 0.9))\n"
        "    add_points(engine, run.id, {'bench/t': [(step, time.time(), time.time())]})\n"
    )
    app = QApplication.instance() or QApplication([])
    cache = SeriesCache()
    poller = Poller(cache, interval=1.0)
    poller.add_source(
        parse_spec(f"target:{store}"), SSHOptions(ssh_config=cfg), python=sys.executable
    )
    delays: list[float] = []

    def arrived(refs) -> None:
        now = time.time()
        for ref in refs:
            got = cache.live(ref, "bench/t")
            if got is not None:
                for value in got[2][len(delays) :].tolist():
                    delays.append(now - value)
        if len(delays) >= n:
            app.quit()

    poller.dataArrived.connect(arrived)
    poller.start()
    time.sleep(2)  # connected and caught up before the writer starts
    writer = subprocess.Popen(
        [sys.executable, "-c", writer_code, store, str(n)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    writer.stdout.readline()
    QTimer.singleShot(int((n * 1.2 + 30) * 1000), app.quit)
    app.exec_()
    poller.stop()
    writer.kill()
    writer.wait()
    return {
        "latency_p50_s": statistics.median(delays),
        "latency_max_s": max(delays),
        "n": len(delays),
    }


KILLED = r"""
import mmap, struct, sys, time, reslog
store, flush = sys.argv[1], float(sys.argv[2])
run = reslog.init(project="scale", name="killed", store=store, system=False,
                  flush_interval=flush)
print(run.uid, flush=True)
counter = open(sys.argv[3], "r+b")
mem = mmap.mmap(counter.fileno(), 8)
step = 0
while True:
    run.log({f"k{i}": float(step) for i in range(20)}, step=step)
    step += 1
    mem[:8] = struct.pack("<q", step * 20)
    time.sleep(0.002)
"""


def child_kill(store: str, flush: float) -> dict[str, Any]:
    import struct

    from reslog.tools.maintenance import check_store
    from schema.store import points_by_id, read
    from schema.store.connect import open_store
    from schema.store.rollup_repair import check_series

    counter = Path(tempfile.mkstemp()[1])
    counter.write_bytes(b"\0" * 8)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, store, str(flush), str(counter)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    uid = proc.stdout.readline().strip()
    time.sleep(3.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    logged = struct.unpack("<q", counter.read_bytes())[0]
    engine = open_store(store, readonly=True)
    with engine.connect() as conn:
        run_id = conn.exec_driver_sql("SELECT id FROM runs WHERE uid = ?", (uid,)).scalar()
        stored = points_by_id.point_count(*read.dbapi_cursor(conn), run_id)
        keys = [
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT key_id FROM series WHERE run_id = ?", (run_id,)
            ).all()
        ]
        problems = [p for k in keys for p in check_series(conn, run_id, k)]
    engine.dispose()
    report = check_store(store, sample=24)
    rate = 20 / 0.0021  # points a second (the loop's sleep plus its own time)
    return {
        "logged": logged,
        "stored": stored,
        "lost_intervals": max(0, logged - stored) / rate / flush,
        "killed_run_problems": len(problems),
        # The killed run is "running" with a stale heartbeat: check reports that, as it should;
        # what this measures is whether any rollups disagree with their points.
        "check_rollups": "; ".join([p for p in report.problems if "rollups" in p][:3]) or "OK",
    }


def points_only() -> None:
    """Make every writer of this process insert points without rollups: the same rows, built
    the same way (from the records grouped by key set, series by series), inserted the same
    way; only the rollups' fold and upserts are left out."""
    import reslog.training.writer as writer_mod
    from schema.store import rollup_writer

    class PointsOnly(rollup_writer.RollupWriter):
        def insert(self, conn, rows, groups=None):
            self._points.run(conn, rows)
            return rollup_writer.Pending()

    writer_mod.RollupWriter = PointsOnly


def child_writer(rollups: str, steps: int, first_shift: int | None = None) -> dict[str, Any]:
    """Writer-thread CPU per point logging the store's shape into a fresh store; with
    `first_shift`, rollups whose first level is 2**first_shift steps wide instead of
    schema.store.buckets' (what storing finer levels would cost the writer: docs/store.md)."""
    from scale_store import SYSTEM, TRAIN

    import reslog
    import reslog.training.writer as writer_mod
    from schema.store import buckets

    if first_shift is not None:
        buckets.FIRST_SHIFT = first_shift

    if rollups == "off":
        points_only()
    spent = [0.0]
    flush = writer_mod.Writer._flush

    def timed_flush(self):
        t0 = time.thread_time()
        try:
            return flush(self)
        finally:
            spent[0] += time.thread_time() - t0

    writer_mod.Writer._flush = timed_flush
    work = Path(tempfile.mkdtemp())
    run = reslog.init(project="w", store=work / "w.db", system=False)
    n = 0
    for s in range(steps):
        m = {k: 0.5 + (s % 97) * 1e-3 for k in TRAIN}
        if s % 4 == 0:
            m.update({k: 70.0 + (s % 13) for k in SYSTEM})
        run.log(m, step=s)
        n += len(m)
        if s % 256 == 0:
            while run._writer.pending_points() > 400_000:
                time.sleep(0.005)
    run.finish(timeout=600)
    shutil.rmtree(work)
    # A slow run: one step a flush, 110 keys.
    slow = reslog.init(
        project="w", store=Path(tempfile.mkdtemp()) / "s.db", system=False, flush_interval=0.02
    )
    spent_fast = spent[0]
    spent[0] = 0.0
    flushes0 = slow._writer.flushes
    for s in range(200):
        slow.log({k: float(s) for k in [*TRAIN, *SYSTEM]}, step=s * 4)
        time.sleep(0.03)
    slow.finish()
    flushes = max(1, slow._writer.flushes - flushes0)
    return {
        "us_per_point": spent_fast / n * 1e6,
        "points": n,
        "slow_ms_per_flush": spent[0] / flushes * 1e3,
    }


def child_overhead(blocks: int, steps: int, kind: str, rollups: str) -> dict[str, Any]:
    """A training loop of ~1 ms steps logging the store's shape: wall time with reslog against
    the same loop without.

    `kind` is what the step is made of. "torch": torch ops on CPU, one intra-op thread, which
    run outside the GIL as a GPU step's kernels and waits do; "python": a pure-Python loop that
    holds the GIL throughout, the worst case for a writer thread, which needs the GIL for its
    own Python work.

    The writer writes a block's last points during the block after it, so blocks go in fours,
    with, with, without, without, and each pair compares the second of each kind: a logging
    block that pays for the one before it, as every block of a long run does, against one
    with nothing left to write. The result is the median of the pairs' ratios, with the
    quartiles (this machine's step times drift by tens of percent over seconds). With
    `rollups` "off" the writer inserts the points alone: the baseline that shows what the
    rollups add to the overhead."""
    from scale_store import SYSTEM, TRAIN

    import reslog

    if rollups == "off":
        points_only()
    if kind == "torch":
        import torch

        torch.set_num_threads(1)
        # ~0.1 ms an op: the calibrated step lands within ~10 % of 1 ms in every process
        a = torch.randn(128, 128) * 0.1

        def work(k: int) -> None:
            x = a
            for _ in range(k):
                x = torch.tanh(x @ a)

    else:

        def work(k: int) -> None:
            x = 0
            for i in range(k):
                x += i * i

    work(4)  # warm up (torch's first call allocates)
    k = 1
    while True:  # calibrate to ~1 ms a step, as the median of 20
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            work(k)
            times.append(time.perf_counter() - t0)
        if statistics.median(times) >= 1e-3:
            break
        k = k + 1 if kind == "torch" else int(k * 1.2) + 1
    work_dir = Path(tempfile.mkdtemp())
    run = reslog.init(project="o", store=work_dir / "o.db", system=False)
    writer = run._writer
    without, with_ = [], []
    backlog = 0
    step = 0
    for b in range(4 * blocks):
        log = b % 4 < 2
        t0 = time.perf_counter()
        for _ in range(steps):
            work(k)
            if log:
                m = {key: 0.5 for key in TRAIN}
                if step % 4 == 0:
                    m.update({key: 70.0 for key in SYSTEM})
                run.log(m, step=step)
                step += 1
        spent = time.perf_counter() - t0
        if b % 4 == 1:
            with_.append(spent)
            backlog = max(backlog, writer.pending_points())
        elif b % 4 == 3:
            without.append(spent)
    logged = writer.logged
    run.finish()
    shutil.rmtree(work_dir)
    ratios = [(w / o - 1) * 100 for w, o in zip(with_, without, strict=True)]
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return {
        f"overhead_{kind}_pct": median,
        f"overhead_{kind}_q1": q1,
        f"overhead_{kind}_q3": q3,
        f"overhead_{kind}_step_ms": statistics.median(without) / steps * 1e3,
        # the most points a logging block left to the writer, against what it logged
        f"overhead_{kind}_backlog": backlog / (logged / (2 * blocks)),
    }


def child_sweep(store: str) -> dict[str, Any]:
    """Redraw time of the training page showing 50 runs, every tile cached."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from resplot.data.state import ViewState
    from resplot.draw.charts import render
    from resplot.sources.polling import Loaded

    with Loaded([parse_spec(store)]) as loaded:
        refs = [r.ref for r in loaded.cache.runs()]
        state = ViewState(page="training")
        page = render(loaded.cache, state, refs, size=(14, 9), fetch=loaded.fetch)
        FigureCanvasAgg(page.figure)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            page.refresh(loaded.cache, state, refs)
            page.figure.canvas.draw()
            times.append(time.perf_counter() - t0)
    return {"runs": len(refs), "redraw_s": statistics.median(times)}


def main(argv: list[str]) -> int:
    part, rest = argv[0], argv[1:]
    fn = {
        "first": lambda: child_first(rest[0], int(rest[1]), rest[2]),
        "raw": lambda: child_raw(*rest),
        "connect": lambda: child_connect(*rest),
        "history": lambda: child_history(rest[0]),
        "latency": lambda: child_latency(rest[0], rest[1], int(rest[2])),
        "kill": lambda: child_kill(rest[0], float(rest[1])),
        "writer": lambda: child_writer(
            rest[0], int(rest[1]), int(rest[2]) if len(rest) > 2 else None
        ),
        "overhead": lambda: child_overhead(int(rest[0]), int(rest[1]), rest[2], rest[3]),
        "sweep": lambda: child_sweep(rest[0]),
    }[part]
    print(json.dumps(fn()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
