"""The agent through a local subprocess: idle poll cost and first view of a big store.

    .venv/bin/python scripts/bench/bench_agent.py                    # ~1-2 min (store build ~30 s)
    .venv/bin/python scripts/bench/bench_agent.py --points 20000     # smaller store
    .venv/bin/python scripts/bench/bench_agent.py --store /tmp/big.db --keep   # reuse a store

Measures, on a store of --runs × --keys × --points points (default 10 × 8 × 100,000):
  first   a cold LocalSource (agent subprocess, pipes) reading the store to the end into a
          SeriesCache: time until the first points show, until every series of the store
          shows (the overview, docs/protocol.md), and until all of it is in the cache at full
          resolution; overview first with read_jobs = 1 and 4 (helper interpreters on the
          host), and without the overview (the path before it). Baseline: the cheapest stdlib
          read of the same rows, one `SELECT step, wall, value` through sqlite3 in this
          process, building nothing (the floor any stdlib agent pays at one core).
  idle    --polls polls with nothing new: bytes both ways per poll (the client's counters, frame
          prefixes included), agent CPU per poll (psutil user+sys of the agent process), and
          round-trip time.
The SSH numbers (the same through a loopback sshd) are scripts/bench/bench_remote.py's.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from resplot.cache import SeriesCache  # noqa: E402
from resplot.sources.local import LocalSource  # noqa: E402
from schema.store import open_store  # noqa: E402

TARGETS = {"idle_bytes": 2048, "idle_cpu_ms": 5.0, "first_view_s": 2.0}


def build_store(path: Path, runs: int, keys: int, points: int) -> None:
    open_store(path, create=True).dispose()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("BEGIN")
    key_ids = []
    for k in range(keys):
        key_ids.append(
            conn.execute("INSERT INTO keys(name) VALUES (?)", (f"train/k{k}",)).lastrowid
        )
    rng = random.Random(0)
    for r in range(runs):
        run_id = conn.execute(
            "INSERT INTO runs(uid, project, name, status, created_at, heartbeat_at) "
            "VALUES (?, 'bench', ?, 'finished', ?, ?)",
            (f"{r:032x}", f"run{r}", 1.7e9 + r, 1.7e9 + r + 1e4),
        ).lastrowid

        def rows(run_id=run_id):
            for step in range(points):
                wall = 1.7e9 + step * 0.1
                for k in key_ids:  # one flush per step, keys interleaved as reslog writes them
                    yield run_id, k, step, wall, math.exp(-step / 3e4) + rng.random() * 0.01

        conn.executemany(
            "INSERT INTO points(run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)", rows()
        )
    conn.execute("COMMIT")
    conn.close()


def floor_read(path: Path) -> tuple[float, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    t0 = time.perf_counter()
    n = 0
    cur = conn.execute("SELECT step, wall, value FROM points ORDER BY id")
    while rows := cur.fetchmany(100_000):
        n += len(rows)
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed, n


def first_view(path: Path, jobs: int, overview: bool) -> dict[str, float]:
    """Times from a cold source: until some points show, until every series of the store shows
    (an overview or its first points), and until all of it is in the cache at full resolution."""
    source = LocalSource(str(path))
    source.read_jobs = jobs
    if not overview:
        source.overview_points = 0
    cache = SeriesCache()
    t0 = time.perf_counter()
    shown: list[tuple[float, int]] = []  # (time, series in the cache) after each visible change

    def progress(step) -> None:
        if step.refs:
            series = sum(len(cache.keys(r.ref)) for r in cache.runs())
            shown.append((time.perf_counter() - t0, series))

    result = source.poll(cache, progress)
    total = time.perf_counter() - t0
    received = source.client.bytes_received
    source.close()
    every = sum(len(cache.keys(r.ref)) for r in cache.runs())
    assert not cache.partial_refs()
    return {
        "rows": result.rows,
        "first_s": shown[0][0],
        "every_s": next(t for t, n in shown if n == every),
        "all_s": total,
        "mb": received / 1e6,
        "series": every,
    }


def idle(path: Path, polls: int) -> dict[str, float]:
    source = LocalSource(str(path))
    cache = SeriesCache()
    source.poll(cache)
    client = source.client
    agent = psutil.Process(source.agent_pid)
    for _ in range(5):  # warm: caches, first fingerprint
        source.poll(cache)
    b0 = client.bytes_sent + client.bytes_received
    c0 = agent.cpu_times()
    rtts = []
    for _ in range(polls):
        t = time.perf_counter()
        source.poll(cache)
        rtts.append((time.perf_counter() - t) * 1000)
    c1 = agent.cpu_times()
    moved = client.bytes_sent + client.bytes_received - b0
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    source.close()
    return {
        "bytes": moved / polls,
        "cpu_ms": cpu * 1000 / polls,
        "rtt_ms": statistics.median(rtts),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--keys", type=int, default=8)
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--polls", type=int, default=200)
    ap.add_argument("--store", type=Path, help="reuse (or build once) a store at this path")
    ap.add_argument("--keep", action="store_true", help="keep the store built in a temp dir")
    args = ap.parse_args()

    tmp = None
    path = args.store
    if path is None:
        tmp = tempfile.mkdtemp(prefix="bench-agent-")
        path = Path(tmp) / "big.db"
    if not path.exists():
        t = time.perf_counter()
        build_store(path, args.runs, args.keys, args.points)
        print(f"built {path} in {time.perf_counter() - t:.1f} s", flush=True)
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)

    floor_s, n = floor_read(path)
    views = {
        "overview first, read_jobs=1": first_view(path, 1, True),
        "overview first, read_jobs=4": first_view(path, 4, True),
        "no overview (before), read_jobs=1": first_view(path, 1, False),
    }
    still = idle(path, args.polls)

    print(f"\nfirst view of {n:,} points (agent subprocess, pipes)")
    head = f"{'':36} {'first s':>8} {'every series s':>15} {'all s':>7} {'MB':>6} {'all/floor':>10}"
    print(head)
    floor_label = "floor: sqlite3 fetch in-process"
    print(f"{floor_label:36} {'':>8} {'':>15} {floor_s:7.2f} {'':>6} {1.0:9.2f}x")
    for label, v in views.items():
        assert v["rows"] == n, (v["rows"], n)
        print(
            f"{label:36} {v['first_s']:8.2f} {v['every_s']:15.2f} {v['all_s']:7.2f} "
            f"{v['mb']:6.1f} {v['all_s'] / floor_s:9.2f}x"
        )
    series = views["overview first, read_jobs=1"]["series"]
    best = min(v["every_s"] for k, v in views.items() if k.startswith("overview"))
    before = views["no overview (before), read_jobs=1"]["every_s"]
    print(
        f"every one of {series} series on screen: {best:.2f} s with the overview, "
        f"{before:.2f} s without ({before / best:.1f}x); target <= {TARGETS['first_view_s']} s"
    )
    print(f"\nidle poll ({args.polls} polls, nothing new)")
    print(f"  bytes both ways per poll {still['bytes']:8.0f}   (target <= {TARGETS['idle_bytes']})")
    print(
        f"  agent CPU per poll       {still['cpu_ms']:8.3f} ms (target <= {TARGETS['idle_cpu_ms']})"
    )
    print(f"  round trip (median)      {still['rtt_ms']:8.3f} ms")
    if tmp is not None and not args.keep:
        for p in Path(tmp).iterdir():
            p.unlink()
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
