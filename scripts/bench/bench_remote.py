"""Remote viewing over a real loopback sshd: the issue's targets, with the local source as baseline.

    .venv/bin/python scripts/bench/bench_remote.py               # everything, ~1-2 min
    .venv/bin/python scripts/bench/bench_remote.py --parts idle,latency --points 20
    .venv/bin/python scripts/bench/bench_remote.py --markdown out.md

Starts an OpenSSH server on 127.0.0.1 like the test fixture (tests/fixtures/sshd.py) with a
byte-counting TCP proxy in front of it (tests/fixtures/tcpproxy.py), then measures:
  latency  a writer process commits one point at a time carrying its own wall time as the value;
           resplot's real Poller (1 s interval, Qt event loop) fetches it over SSH; the delay
           is taken when dataArrived reaches the GUI thread. p50 / max over --points points.
           (reslog's own flush interval comes on top; the writer here commits at once.)
  idle     polls with nothing new: bytes both ways through the proxy per poll, and host CPU per
           poll (user+sys of the agent and the sshd session processes, from /proc via psutil).
  first    a cold source (new connection, agent already on the host) reading a store of
           10 runs × 8 keys × 100,000 points: the time until every series of the store shows
           (the overview, docs/protocol.md) and until all of it is in the cache at full
           resolution. Baselines in the same run: the local source (same agent, subprocess
           pipes) on the same store, and SSH without the overview (the path before it).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import psutil  # noqa: E402

from resplot.cache import SeriesCache  # noqa: E402
from resplot.sources.local import LocalSource  # noqa: E402
from resplot.sources.ssh import SSHSource  # noqa: E402
from tests.fixtures.sshd import SSHEnv, bulk_store, start_env  # noqa: E402
from tests.fixtures.stores import make_run, new_store  # noqa: E402
from tests.fixtures.tcpproxy import TCPProxy  # noqa: E402

TARGETS = {
    "latency_p50": 1.5,
    "latency_max": 1.5,
    "idle_bytes": 2048,
    "idle_cpu_ms": 5.0,
    "first_view_s": 2.0,
}

WRITER = textwrap.dedent(
    """
    import random, sqlite3, sys, time
    path, run_id, key_id, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA busy_timeout=30000")
    time.sleep(1.5)
    for step in range(n):
        now = time.time()
        con.execute(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)",
            (run_id, key_id, step, now, now),
        )
        time.sleep(random.uniform(0.3, 0.9))  # log at random phases of the 1 s poll
    """
)


class Bench:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.env: SSHEnv = start_env(root / "sshd")
        self.proxy = TCPProxy(self.env.target.port)
        self.cfg = self.env.make_ssh_config(root / "ssh", target_port=self.proxy.port)
        os.environ.pop("SSH_AUTH_SOCK", None)

    def source(self, spec: str, *, overview: bool = True) -> SSHSource:
        src = SSHSource(
            f"target:{spec}",
            python=sys.executable,
            ssh_config=self.cfg,
            agent_dir=str(self.root / "agent"),
        )
        if not overview:
            src.overview_points = 0
        return src

    def close(self) -> None:
        self.proxy.close()
        self.env.target.stop()
        self.env.jump.stop()

    # -- log → visible ------------------------------------------------------------------------
    def latency(self, n: int) -> list[float]:
        from PyQt5.QtCore import QCoreApplication, QTimer

        from resplot.poller import Poller

        db = self.root / "live" / "reslog.db"
        engine = new_store(db)
        run = make_run(engine, name="live", status="running", heartbeat_at=time.time(),
                       points={"bench/t": [(0, 0.0)]})  # fmt: skip
        engine.dispose()
        con = sqlite3.connect(db)
        key_id = con.execute("SELECT id FROM keys WHERE name = 'bench/t'").fetchone()[0]
        con.close()
        app = QCoreApplication.instance() or QCoreApplication([])
        cache = SeriesCache()
        poller = Poller(cache)
        poller.interval = 1.0
        label = poller.add_source(
            f"target:{db}",
            python=sys.executable,
            ssh_config=self.cfg,
            agent_dir=str(self.root / "agent"),
        )
        delays: list[float] = []
        seen = 0

        def arrived(refs) -> None:
            nonlocal seen
            now = time.time()
            for ref in refs:
                got = cache.series(ref, "bench/t")
                if got is None:
                    continue
                _steps, _walls, values = got
                for value in values[max(seen, 1) :].tolist():  # step 0 is the seed point
                    delays.append(now - value)
                seen = max(seen, len(values))
            if len(delays) >= n:
                app.quit()

        poller.dataArrived.connect(arrived)
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(run.id), str(key_id), str(n)]
        )
        poller.start()
        QTimer.singleShot(int((n * 1.2 + 15) * 1000), app.quit)  # a safety net, not a target
        app.exec_()
        poller.stop()
        writer.kill()
        writer.wait()
        del label
        return delays[:n]

    # -- idle polls ---------------------------------------------------------------------------
    def idle(self, polls: int) -> tuple[float, float, float]:
        db = self.root / "idle" / "reslog.db"
        bulk_store(db, runs=3, keys=8, points=2_000)
        src = self.source(str(db))
        cache = SeriesCache()
        try:
            src.poll(cache)
            src.poll(cache)
            procs = host_processes(self.env.target.proc.pid)
            cpu0 = sum(cpu_s(p) for p in procs)
            self.proxy.reset_counters()
            t0 = time.perf_counter()
            for _ in range(polls):
                src.poll(cache)
            elapsed = time.perf_counter() - t0
            moved = self.proxy.bytes_up + self.proxy.bytes_down
            cpu = sum(cpu_s(p) for p in procs) - cpu0
        finally:
            src.close()
        return moved / polls, cpu * 1000 / polls, elapsed * 1000 / polls

    # -- first view ---------------------------------------------------------------------------
    def first_view(self, runs: int, keys: int, points: int) -> dict[str, float]:
        db = self.root / "big" / "reslog.db"
        t0 = time.perf_counter()
        total = bulk_store(db, runs=runs, keys=keys, points=points)
        print(f"  built {total:,} points in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        warm = self.source(str(db))  # uploads the agent once, so the timed run finds it there
        warm.ping()
        warm.close()
        out = {}
        for name, make in (
            ("ssh", lambda: self.source(str(db))),
            ("local", lambda: LocalSource(str(db))),
            ("ssh_before", lambda: self.source(str(db), overview=False)),
        ):
            shown: list[tuple[float, int]] = []  # (time, series in the cache) per change
            cache = SeriesCache()
            src = make()
            t0 = time.perf_counter()

            def progress(step, shown=shown, t0=t0, cache=cache) -> None:
                if step.refs:
                    series = sum(len(cache.keys(r.ref)) for r in cache.runs())
                    shown.append((time.perf_counter() - t0, series))

            try:
                src.poll(cache, progress)
                out[f"{name}_all"] = time.perf_counter() - t0
            finally:
                src.close()
            n = sum(len(cache.series(r.ref, k)[0]) for r in cache.runs() for k in cache.keys(r.ref))
            assert n == total, f"{name}: got {n} of {total} points"
            assert not cache.partial_refs()
            every = sum(len(cache.keys(r.ref)) for r in cache.runs())
            out[f"{name}_first"] = shown[0][0]
            out[f"{name}_every"] = next(t for t, k in shown if k == every)
        return out


def host_processes(sshd_pid: int) -> list[psutil.Process]:
    """The sshd session processes and the agent under them (the host's cost of a poll)."""
    return psutil.Process(sshd_pid).children(recursive=True)


def cpu_s(proc: psutil.Process) -> float:
    with contextlib.suppress(psutil.Error):
        t = proc.cpu_times()
        return t.user + t.system
    return 0.0


def row(name: str, value: str, target: str, ok: bool | None) -> str:
    mark = "" if ok is None else ("yes" if ok else "NO")
    return f"| {name} | {value} | {target} | {mark} |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="latency,idle,first")
    ap.add_argument("--points", type=int, default=20, help="latency samples")
    ap.add_argument("--idle-polls", type=int, default=50)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--per-key", type=int, default=100_000)
    ap.add_argument("--markdown", type=Path, help="also write the table here")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    random.seed(0)
    lines = ["| measure | value | target | met |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        bench = Bench(Path(tmp))
        try:
            if "latency" in parts:
                d = bench.latency(args.points)
                p50, mx = statistics.median(d), max(d)
                lines.append(row(f"log → visible p50 ({len(d)} points, 1 s poll)", f"{p50:.2f} s",
                                 "≤ 1.5 s", p50 <= TARGETS["latency_p50"]))  # fmt: skip
                lines.append(row("log → visible max", f"{mx:.2f} s", "≤ 1.5 s",
                                 mx <= TARGETS["latency_max"]))  # fmt: skip
            if "idle" in parts:
                nbytes, cpu_ms, wall_ms = bench.idle(args.idle_polls)
                lines.append(row("idle poll: bytes on the wire (both ways)", f"{nbytes:.0f} B",
                                 "≤ 2 KB", nbytes <= TARGETS["idle_bytes"]))  # fmt: skip
                lines.append(row("idle poll: host CPU (agent + sshd session)", f"{cpu_ms:.2f} ms",
                                 "≤ 5 ms", cpu_ms <= TARGETS["idle_cpu_ms"]))  # fmt: skip
                lines.append(row("idle poll: round trip", f"{wall_ms:.1f} ms", "", None))
            if "first" in parts:
                f = bench.first_view(args.runs, args.keys, args.per_key)
                size = f"{args.runs} × {args.keys} × {args.per_key:,}"
                lines.append(row(f"first view over SSH: every series of {size} shown "
                                 "(overview)", f"{f['ssh_every']:.2f} s", "≤ 2 s",
                                 f["ssh_every"] <= TARGETS["first_view_s"]))  # fmt: skip
                lines.append(row("… then all of it at full resolution (swapped in)",
                                 f"{f['ssh_all']:.2f} s", "", None))  # fmt: skip
                lines.append(row("baseline: local source, every series shown / all",
                                 f"{f['local_every']:.2f} s / {f['local_all']:.2f} s", "",
                                 None))  # fmt: skip
                lines.append(row("before (no overview) over SSH: every series shown / all",
                                 f"{f['ssh_before_every']:.2f} s / {f['ssh_before_all']:.2f} s",
                                 "", None))  # fmt: skip
                ratio = f["ssh_every"] / f["local_every"]
                lines.append(row("ratio SSH / local (every series shown)", f"{ratio:.2f}×", "",
                                 None))  # fmt: skip
        finally:
            bench.close()
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
