"""Scale: a week of 8-GPU pretraining (34M points) as quick to look at as a toy run.

    .venv/bin/python scripts/bench/scale.py                  # 3.4M and 34M points, ~15 min
    .venv/bin/python scripts/bench/scale.py --sizes 3.4M --markdown /tmp/scale.md
    .venv/bin/python scripts/bench/scale.py --parts first,history --no-before

Stores are built once through reslog's public API (scripts/bench/scale_store.py) under --dir
and reused. Every measurement runs in a fresh child process (its peak RSS is its own), one at
a time. Baselines are measured in the same run: "before" is this project's code before
rollups (commit BEFORE, unpacked with `git archive`) on a copy of the store it can read; the
raw-points path is the same agent reading every point by id, as the viewer did then.

Parts (--parts):
  first     the real window (Qt offscreen) and Poller over SSH to a local sshd through a
            byte-counting proxy: time and bytes until every series of the training page is
            drawn from tiles, then a zoom to 1 % of the steps until drawn at full resolution,
            idle-poll bytes, window peak RSS, agent peak RSS (VmHWM) on the host;
            "raw" beside it: every point of the store through the same agent and link
  snapshot  `resplot snapshot STORE --page training|system`: wall time, peak RSS; "before":
            the old code's snapshot of the same data
  history   reslog.open(store).history(run, "train/loss", samples=1000), best of 5; raw: the
            series' points read and cut into 1000 buckets with numpy
  latency   a point logged into the store is drawn in the window: delay over SSH, 20 points
  kill      a run logging into the store is killed with SIGKILL: points lost in flush
            intervals, then `reslog check` on a sample and every series of the killed run
  writer    writer-thread CPU per point with rollups and without (the same inserts, no fold),
            the store's shape (20 keys a step, 90 more every 4th), and a slow run's flush
  overhead  a training loop of 1 ms steps logging the store's shape: wall time with reslog
            against without (median of alternating blocks)
  sweep     50 runs on the training page: redraw time with every tile cached
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

BEFORE = "47f46fc"  # the last commit before rollups (issue 8)
SIZES = {"3.4M": 10_000, "34M": 100_000}  # steps per run, 8 runs
PARTS = ("first", "snapshot", "history", "latency", "kill", "writer", "overhead", "sweep")
TARGETS = {
    "first_s": 1.5,
    "zoom_s": 0.3,
    "window_rss_mb": 400,
    "agent_rss_mb": 150,
    "first_mb": 5.0,
    "idle_bytes": 1024,
    "snapshot_training_s": 3.0,
    "snapshot_training_rss_mb": 400,
    "snapshot_system_s": 5.0,
    "history_s": 0.1,
    "writer_ratio": 1.25,
    "overhead_pct": 1.0,
    "latency_s": 1.5,
    "kill_intervals": 1.0,
}


# -- helpers --------------------------------------------------------------------------------------


def child(part: str, *args: str, timeout: float = 900, stdin=None) -> dict[str, Any]:
    """Run `scale.py --child part args` and return the JSON it prints last."""
    cmd = [sys.executable, __file__, "--child", part, *args]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          input=stdin, env=env)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{part} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(cmd: list[str], env=None, cwd=ROOT) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit status) of a command, by wait4."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        print(proc.stderr.read().decode()[-2000:], file=sys.stderr)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def before_tree(work: Path) -> Path:
    """The code before rollups, unpacked once (git archive)."""
    tree = work / f"before-{BEFORE}"
    if not (tree / "resplot").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE], check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def before_store(store: Path) -> Path:
    """A copy of the store the old code reads: same points, its revision marked 0001 (the old
    code ignores the rollup tables)."""
    copy = store.with_name(store.stem + ".before.db")
    if not copy.exists() or copy.stat().st_mtime < store.stat().st_mtime:
        src = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        src.backup(dst)
        dst.execute("UPDATE alembic_version SET version_num = '0001'")
        dst.commit()
        dst.close()
        src.close()
    return copy


# -- children ----------------------------------------------------------------------------------


def child_first(store: str, port: int, cfg: str, agent_dir: str) -> dict[str, Any]:
    """First view and zoom in the real window over SSH; the byte counts come from a proxy in
    the parent process (phases are announced on stdout and acknowledged on stdin)."""
    import psutil
    from PyQt5.QtCore import QTimer
    from PyQt5.QtWidgets import QApplication

    from resplot import settings as settings_mod
    from resplot.cache import SeriesCache
    from resplot.poller import Poller
    from resplot.window import MainWindow

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

    def watch() -> None:
        if len(cache.runs()) and len(win.state.ticked) < len(cache.runs()):
            for run in cache.runs():  # every run, not only the newest five
                win.state.set_ticked(run.ref, True)
            win.schedule_redraw()

    def on_draw(_event) -> None:  # a draw of the canvas has finished: was it the whole page?
        if drawn():
            done_at.append(time.perf_counter())
            app.quit()

    win.pages["training"].canvas.mpl_connect("draw_event", on_draw)
    timer = QTimer()
    timer.timeout.connect(watch)
    timer.start(5)
    phase("first")
    t0 = time.perf_counter()
    label = poller.add_source(spec, ssh_config=cfg, python=sys.executable, agent_dir=agent_dir)
    win.source_labels[spec] = label
    QTimer.singleShot(300_000, app.quit)
    run_loop("first")
    out["first_s"] = done_at[-1] - t0 if done_at else None
    out["series"] = sum(len(s.items) for s in win.current_page().specs)
    out["levels"] = sorted({t.view.level for ts in win.current_page().tracks for t in ts.values()
                            if t.view is not None})  # fmt: skip
    phase("zoom")
    page = win.current_page()
    hi = max(s.agg[10] for r in cache.runs() for s in cache.summaries(r.ref).values())
    mid, half = hi / 2, hi * 0.005
    done_at.clear()
    t0 = time.perf_counter()
    page.axes[0].set_xlim(mid - half, mid + half)  # what the zoom tool does (x: steps)
    run_loop("zoom")
    out["zoom_s"] = done_at[-1] - t0 if done_at else None
    out["zoom_levels"] = sorted({t.view.level for ts in page.tracks for t in ts.values()
                                 if t.view is not None})  # fmt: skip
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
    agents = [p for p in psutil.process_iter(["cmdline"])
              if any(".pyz" in a for a in (p.info["cmdline"] or []))]  # fmt: skip
    hwm = []
    for p in agents:
        for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm.append(int(line.split()[1]) / 1024)
    out["agent_rss_mb"] = max(hwm) if hwm else None
    poller.stop()
    win.close()
    return out


def child_raw(store: str, cfg: str, agent_dir: str) -> dict[str, Any]:
    """Every point of the store through the agent by id (the viewer's path before rollups)."""
    import numpy as np

    from resplot.sources.ssh import SSHSource

    src = SSHSource(f"target:{store}", ssh_config=cfg, python=sys.executable, agent_dir=agent_dir)
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


def child_history(store: str) -> dict[str, Any]:
    import numpy as np
    import pandas  # noqa: F401 - imported before the clock starts

    import reslog
    from schema.store import open_store
    from schema.store_reader import StoreReader

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


def child_latency(store: str, cfg: str, agent_dir: str, n: int) -> dict[str, Any]:
    """Delay from a point's commit to its arrival in the window's cache over SSH."""
    from PyQt5.QtCore import QTimer
    from PyQt5.QtWidgets import QApplication

    from resplot.cache import SeriesCache
    from resplot.poller import Poller

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
    poller.add_source(f"target:{store}", ssh_config=cfg, python=sys.executable,
                      agent_dir=agent_dir)  # fmt: skip
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
    writer = subprocess.Popen([sys.executable, "-c", writer_code, store, str(n)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    writer.stdout.readline()
    QTimer.singleShot(int((n * 1.2 + 30) * 1000), app.quit)
    app.exec_()
    poller.stop()
    writer.kill()
    writer.wait()
    return {"latency_p50_s": statistics.median(delays), "latency_max_s": max(delays),
            "n": len(delays)}  # fmt: skip


def drop_runs(store: str, names: list[str]) -> None:
    """Delete the runs a part added to the benchmark store (latency, kill), so the next part
    and the next invocation see the store as built."""
    con = sqlite3.connect(store, timeout=60)
    with con:
        marks = ",".join("?" * len(names))
        ids = [r[0] for r in con.execute(f"SELECT id FROM runs WHERE name IN ({marks})", names)]
        for table in ("points", "rollups", "series", "takes", "events", "runs"):
            column = "id" if table == "runs" else "run_id"
            con.executemany(f"DELETE FROM {table} WHERE {column} = ?", [(i,) for i in ids])
    con.close()


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

    from reslog.maintenance import check_store
    from schema.rollup_repair import check_series
    from schema.store import open_store

    counter = Path(tempfile.mkstemp()[1])
    counter.write_bytes(b"\0" * 8)
    proc = subprocess.Popen([sys.executable, "-c", KILLED, store, str(flush), str(counter)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    uid = proc.stdout.readline().strip()
    time.sleep(3.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    logged = struct.unpack("<q", counter.read_bytes())[0]
    engine = open_store(store, readonly=True)
    with engine.connect() as conn:
        run_id = conn.exec_driver_sql("SELECT id FROM runs WHERE uid = ?", (uid,)).scalar()
        stored = conn.exec_driver_sql(
            "SELECT count(*) FROM points WHERE run_id = ?", (run_id,)
        ).scalar()
        keys = [r[0] for r in conn.exec_driver_sql(
            "SELECT key_id FROM series WHERE run_id = ?", (run_id,)).all()]  # fmt: skip
        problems = [p for k in keys for p in check_series(conn, run_id, k)]
    engine.dispose()
    report = check_store(store, sample=24)
    rate = 20 / 0.0021  # points a second (the loop's sleep plus its own time)
    return {
        "logged": logged, "stored": stored,
        "lost_intervals": max(0, logged - stored) / rate / flush,
        "killed_run_problems": len(problems),
        # The killed run is "running" with a stale heartbeat: check reports that, as it should;
        # what this measures is whether any rollups disagree with their points.
        "check_rollups": "; ".join([p for p in report.problems if "rollups" in p][:3]) or "OK",
    }  # fmt: skip


def child_writer(rollups: str, steps: int) -> dict[str, Any]:
    """Writer-thread CPU per point logging the store's shape into a fresh store."""
    from scale_store import SYSTEM, TRAIN

    import reslog
    import reslog.writer as writer_mod
    from schema import rollup_writer

    if rollups == "off":

        class PointsOnly(rollup_writer.RollupWriter):
            def insert(self, conn, rows, groups=None):
                conn.exec_driver_sql(self._points_sql, rows)
                return rollup_writer.Pending()

        def rows_only(self, held):  # the writer's rows before rollups: no grouping by key set
            rid, ids = self.run_id, self._ids
            return [(rid, ids[k], s, w, v) for s, w, m in held for k, v in m.items()], None

        writer_mod.RollupWriter = PointsOnly
        writer_mod.Writer._rows = rows_only
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
    slow = reslog.init(project="w", store=Path(tempfile.mkdtemp()) / "s.db", system=False,
                       flush_interval=0.02)  # fmt: skip
    spent_fast = spent[0]
    spent[0] = 0.0
    flushes0 = slow._writer.flushes
    for s in range(200):
        slow.log({k: float(s) for k in [*TRAIN, *SYSTEM]}, step=s * 4)
        time.sleep(0.03)
    slow.finish()
    flushes = max(1, slow._writer.flushes - flushes0)
    return {"us_per_point": spent_fast / n * 1e6, "points": n,
            "slow_ms_per_flush": spent[0] / flushes * 1e3}  # fmt: skip


def child_overhead(blocks: int, steps: int) -> dict[str, Any]:
    """A training loop of ~1 ms CPU steps: wall time with reslog logging the store's shape
    against the same loop without, blocks alternating."""
    from scale_store import SYSTEM, TRAIN

    import reslog

    def busy(k: int) -> int:
        x = 0
        for i in range(k):
            x += i * i
        return x

    k = 1000
    while True:  # calibrate to ~1 ms
        t0 = time.perf_counter()
        busy(k)
        if time.perf_counter() - t0 >= 1e-3:
            break
        k = int(k * 1.2) + 1
    work = Path(tempfile.mkdtemp())
    run = reslog.init(project="o", store=work / "o.db", system=False)
    without, with_ = [], []
    step = 0
    for b in range(2 * blocks):
        log = b % 2 == 1
        t0 = time.perf_counter()
        for _ in range(steps):
            busy(k)
            if log:
                m = {key: 0.5 for key in TRAIN}
                if step % 4 == 0:
                    m.update({key: 70.0 for key in SYSTEM})
                run.log(m, step=step)
                step += 1
        (with_ if log else without).append(time.perf_counter() - t0)
    run.finish()
    shutil.rmtree(work)
    ratio = [w / o for w, o in zip(with_, without, strict=True)]
    return {"overhead_pct": (statistics.median(ratio) - 1) * 100, "step_ms":
            statistics.median(without) / steps * 1e3}  # fmt: skip


def child_sweep(store: str) -> dict[str, Any]:
    """Redraw time of the training page showing 50 runs, every tile cached."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from resplot.charts import render
    from resplot.headless import Loaded
    from resplot.state import ViewState

    with Loaded([store]) as loaded:
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


def build_sweep(path: Path) -> None:
    """50 runs × 4,000 steps × the 20 training keys (4M points)."""
    from scale_store import TRAIN

    import reslog

    marker = path.with_name(path.name + ".built.json")
    if marker.exists():
        return
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    for r in range(50):
        run = reslog.init(project="sweep", name=f"lr{r}", store=path, system=False,
                          config={"lr": 1e-4 * (r + 1)})  # fmt: skip
        for s in range(4000):
            run.log({k: 2 + r / 50 + 1 / (s + 10) for k in TRAIN}, step=s)
        run.finish(timeout=600)
    marker.write_text("{}")


# -- the parent ----------------------------------------------------------------------------------


def measure_first(store: Path, env, work: Path) -> dict[str, Any]:
    from tests.fixtures.tcpproxy import TCPProxy

    proxy = TCPProxy(env.target.port)
    cfg = env.make_ssh_config(work / f"ssh-{store.stem}", target_port=proxy.port)
    agent_dir = str(work / "agent")
    # The agent is on the host already (a second look at a host), uploaded by a first connect.
    child("raw", str(store), str(cfg), agent_dir, timeout=1800)
    proxy.reset_counters()
    raw = child("raw", str(store), str(cfg), agent_dir, timeout=1800)
    raw["raw_mb"] = (proxy.bytes_up + proxy.bytes_down) / 2**20
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", "first", str(store), str(proxy.port), str(cfg),
         agent_dir], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )  # fmt: skip
    marks: dict[str, int] = {}
    result: dict[str, Any] = {}
    for line in proc.stdout:
        if line.startswith("phase "):
            name = line.split()[1]
            marks[name] = proxy.bytes_up + proxy.bytes_down
            proc.stdin.write("go\n")
            proc.stdin.flush()
        elif line.startswith("{"):
            result = json.loads(line)
    proc.wait()
    proxy.close()
    result["first_mb"] = (marks["zoom"] - marks["first"]) / 2**20
    result["zoom_mb"] = (marks["idle"] - marks["zoom"]) / 2**20
    result["idle_bytes"] = (marks["idle-end"] - marks["idle-start"]) / 10
    return {**result, **raw}


def measure_snapshot(store: Path, work: Path, before: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    resplot = [sys.executable, "-m", "resplot.cli", "snapshot", str(store), "--timeout", "900"]
    for page in ("training", "system"):
        png = work / f"{store.stem}-{page}.png"
        wall, rss, rc = timed([*resplot, "-o", str(png), "--page", page])
        out[f"snapshot_{page}_s"], out[f"snapshot_{page}_rss_mb"] = wall, rss
        out[f"snapshot_{page}_ok"] = rc == 0 and png.exists()
    if before:
        tree = before_tree(work)
        copy = before_store(store)
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, "-c", "import sys; from resplot.cli import main; sys.exit(main())",
               "snapshot", str(copy), "--timeout", "900", "-o", str(work / "before.png"),
               "--page", "training"]  # fmt: skip
        wall, rss, rc = timed(cmd, env=env, cwd=tree)
        out["before_snapshot_training_s"], out["before_snapshot_training_rss_mb"] = wall, rss
    return out


def environment() -> str:
    import platform

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    cpu = platform.processor() or platform.machine()
    return (f"{cpu}, {os.cpu_count()} cores, load average {load}; Python "
            f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}")  # fmt: skip


def fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}{unit}" if abs(v) < 10 else f"{v:,.1f}{unit}"
    return f"{v:,}{unit}" if isinstance(v, int) else f"{v}{unit}"


ROWS = [
    ("first view, training page, over SSH", "first_s", "s", "raw_s"),
    ("  bytes over SSH for it", "first_mb", " MB", "raw_mb"),
    ("zoom to 1 % at full resolution", "zoom_s", "s", None),
    ("window peak RSS", "window_rss_mb", " MB", "raw_rss_mb"),
    ("agent peak RSS on the host", "agent_rss_mb", " MB", None),
    ("idle poll, bytes both ways", "idle_bytes", " B", None),
    ("snapshot --page training", "snapshot_training_s", "s", "before_snapshot_training_s"),
    ("  its peak RSS", "snapshot_training_rss_mb", " MB", "before_snapshot_training_rss_mb"),
    ("snapshot --page system", "snapshot_system_s", "s", None),
    ("history(samples=1000), 100k-step key", "history_s", "s", "history_raw_s"),
    ("log → drawn over SSH, p50", "latency_p50_s", "s", None),
    ("log → drawn over SSH, max", "latency_max_s", "s", None),
    ("SIGKILL: points lost", "lost_intervals", " flush intervals", None),
    ("writer CPU per point, with rollups", "writer_us", " µs", "writer_off_us"),
    ("  ratio with / without rollups", "writer_ratio", "×", None),
    ("  a slow run's flush (110 keys)", "slow_ms_per_flush", " ms", "slow_off_ms_per_flush"),
    ("logging overhead on a 1 ms step", "overhead_pct", " %", None),
]
TARGET_OF = {"latency_p50_s": "latency_s", "latency_max_s": "latency_s",
             "lost_intervals": "kill_intervals"}  # fmt: skip


def report(results: dict[str, dict[str, Any]], seconds: float) -> str:
    sizes = list(results)
    lines = [f"{environment()}; {seconds / 60:.1f} min", ""]
    head = ["what"]
    for size in sizes:
        head += [f"{size}", f"{size} baseline"]
    head += ["target", "met (largest)"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("| " + " | ".join(["---"] + ["---:"] * (len(head) - 1)) + " |")
    for label, key, unit, base in ROWS:
        row = [label]
        for size in sizes:
            r = results[size]
            row += [fmt(r.get(key), unit), fmt(r.get(base), unit) if base else ""]
        target = TARGETS.get(TARGET_OF.get(key, key))
        largest = results[sizes[-1]].get(key)
        met = "" if target is None or largest is None else ("met" if largest <= target
                                                             else "NOT met")  # fmt: skip
        row += [fmt(target, unit) if target is not None else "", met]
        lines.append("| " + " | ".join(row) + " |")
    if len(sizes) >= 2:
        a, b = results[sizes[0]], results[sizes[-1]]
        grow = {k: b[k] / a[k] for k in ("first_s", "snapshot_training_s", "history_s", "zoom_s")
                if a.get(k) and b.get(k)}  # fmt: skip
        lines += ["", f"10× the points ({sizes[0]} → {sizes[-1]}): " + ", ".join(
            f"{k} ×{v:.2f}" for k, v in grow.items()) + " (target: first view ≤ ×1.3)"]  # fmt: skip
    extra = {size: {k: v for k, v in r.items() if k in ("levels", "zoom_levels", "series",
             "tile_mb", "rows", "spike", "check_rollups", "killed_run_problems", "sweep_redraw_s",
             "sweep_runs", "points", "build_s")} for size, r in results.items()}  # fmt: skip
    lines += ["", "Details: " + json.dumps(extra)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="3.4M,34M", help="comma list of 3.4M, 34M")
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "reslog-scale")
    p.add_argument("--no-before", action="store_true", help="skip the old code's baselines")
    p.add_argument("--markdown", type=Path)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args(argv)
    if args.child:
        fn = {"first": lambda: child_first(rest[0], int(rest[1]), rest[2], rest[3]),
              "raw": lambda: child_raw(*rest), "history": lambda: child_history(rest[0]),
              "latency": lambda: child_latency(rest[0], rest[1], rest[2], int(rest[3])),
              "kill": lambda: child_kill(rest[0], float(rest[1])),
              "writer": lambda: child_writer(rest[0], int(rest[1])),
              "overhead": lambda: child_overhead(int(rest[0]), int(rest[1])),
              "sweep": lambda: child_sweep(rest[0])}[args.child]  # fmt: skip
        print(json.dumps(fn()), flush=True)
        return 0
    from scale_store import build

    parts = args.parts.split(",")
    work = args.dir
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    env = None
    if {"first", "latency"} & set(parts):
        from tests.fixtures.sshd import start_env

        os.environ.pop("SSH_AUTH_SOCK", None)
        env = start_env(Path(tempfile.mkdtemp(prefix="scale-sshd-")))
    results: dict[str, dict[str, Any]] = {}
    try:
        for size in args.sizes.split(","):
            store = work / f"{size}.db"
            built = build(store, 8, SIZES[size])
            r: dict[str, Any] = {"points": built["points"], "build_s": built["seconds"]}
            print(f"{size}: {built['points']:,} points, {built['bytes'] / 2**30:.2f} GiB",
                  file=sys.stderr)  # fmt: skip
            if "first" in parts:
                r.update(measure_first(store, env, work))
            if "snapshot" in parts:
                r.update(measure_snapshot(store, work, before=not args.no_before))
            if "history" in parts:
                h = child("history", str(store))
                r.update({"history_s": h["history_s"], "history_raw_s": h["raw_s"],
                          "rows": h["rows"], "spike": h["spike"]})  # fmt: skip
            if "latency" in parts:
                from tests.fixtures.tcpproxy import TCPProxy

                proxy = TCPProxy(env.target.port)
                cfg = env.make_ssh_config(work / f"ssh-lat-{size}", target_port=proxy.port)
                r.update(child("latency", str(store), str(cfg), str(work / "agent"), "20"))
                proxy.close()
                drop_runs(str(store), ["latency"])
            results[size] = r
            print(json.dumps({size: r}), file=sys.stderr)
        largest = results[list(results)[-1]]
        store = work / f"{list(results)[-1]}.db"
        if "writer" in parts:
            # Interleaved and the best of four each: the machine's drift hits both alike.
            runs = [child("writer", mode, "20000") for _ in range(4) for mode in ("on", "off")]
            on, off = runs[0::2], runs[1::2]
            won = min(x["us_per_point"] for x in on)
            woff = min(x["us_per_point"] for x in off)
            slow_on = min(x["slow_ms_per_flush"] for x in on)
            slow_off = min(x["slow_ms_per_flush"] for x in off)
            largest.update({"writer_us": won, "writer_off_us": woff, "writer_ratio": won / woff,
                            "slow_ms_per_flush": slow_on,
                            "slow_off_ms_per_flush": slow_off})  # fmt: skip
        if "overhead" in parts:
            largest.update(child("overhead", "16", "500"))
        if "kill" in parts:
            largest.update(child("kill", str(store), "1.0"))
            drop_runs(str(store), ["killed"])
        if "sweep" in parts:
            sweep = work / "sweep50.db"
            build_sweep(sweep)
            s = child("sweep", str(sweep))
            largest.update({"sweep_redraw_s": s["redraw_s"], "sweep_runs": s["runs"]})
    finally:
        if env is not None:
            env.target.stop()
            env.jump.stop()
    text = report(results, time.perf_counter() - t_start)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
