"""Many writers into one PostgreSQL: what is committed while they log, the lag, finish(), losses
and false hangs, for the code before (a git revision, default `main`) and this tree, in one run
(issue 36, finding 2). Also where the time of an insert goes: executemany, multi-row VALUES and
COPY into the store's points table, and COPY into copies of it without its foreign keys and
indexes (what the schema itself costs).

    .venv/bin/python scripts/bench/bench_pg_writers.py                       # 16 x 10,000/s, 60 s
    .venv/bin/python scripts/bench/bench_pg_writers.py --writers 8 --rate 4000 --seconds 20
    .venv/bin/python scripts/bench/bench_pg_writers.py --parts methods
    .venv/bin/python scripts/bench/bench_pg_writers.py --parts ingest --before b57fe1f

Each writer is its own process: `reslog.init(store=URL, system=False)`, then `--keys` scalars a
step, paced to `--rate` points a second for `--seconds`, then `finish(timeout=--finish-timeout)`.
A monitor counts the stored points every second. "Lost" is logged minus stored once every process
has exited (a finish() that gave up leaves its backlog unstored). The server is a fresh one on
loopback (tests/fixtures/postgres.py: fsync off), shared by both variants, a database each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from itertools import chain
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from common import start_writers  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402
from trees import tree_of  # noqa: E402

from tests.fixtures.postgres import postgres_server  # noqa: E402

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("always")
import reslog
url, index, rate, seconds, keys, finish_timeout = sys.argv[1:7]
index, rate, seconds, keys = int(index), int(rate), float(seconds), int(keys)
names = [f"train/k{j}" for j in range(keys)]
run = reslog.init(project="bench", name=f"w{index}", store=url, system=False)
writer = run._writer
steps = int(rate * seconds) // keys
t0, start = time.monotonic(), time.time()
for step in range(steps):
    run.log({k: step + j / 100 for j, k in enumerate(names)}, step=step)
    ahead = t0 + (step + 1) * keys / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
end = time.time()
during = writer.committed
t1 = time.monotonic()
ok = run.finish(timeout=float(finish_timeout))
print(json.dumps({"logged": writer.logged, "during": during, "start": start, "end": end,
                  "finish_s": time.monotonic() - t1, "ok": ok, "failures": writer.failures,
                  "dropped": writer.dropped}), flush=True)
"""

# One writer as fast as it goes (issue 30: "ingest"): the loop logs `steps` steps of `keys`
# scalars with no pacing, then finish(); points/s is logged points over the time from the first
# log() to finish() returning, so it counts what the store took, not what the loop offered.
INGEST_CHILD = r"""
import json, sys, time
import reslog
url, steps, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = [f"train/k{j}" for j in range(keys)]
run = reslog.init(project="bench", name="ingest", store=url, system=False)
writer = run._writer
c0, t0 = time.process_time(), time.monotonic()
for step in range(steps):
    run.log({k: step + j / 100 for j, k in enumerate(names)}, step=step)
logged_s = time.monotonic() - t0
ok = run.finish(timeout=3600)
took = time.monotonic() - t0
print(json.dumps({"logged": writer.logged, "committed": writer.committed, "ok": ok,
                  "loop_s": logged_s, "total_s": took, "cpu_s": time.process_time() - c0}))
"""


def fresh_database(admin_url: str) -> str:
    name = "bench_" + uuid.uuid4().hex[:10]
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name


# Points held in chunks (revision 0006 on): rows times the keyset's keys, heads and sealed alike
# (a sealing deletes the heads it replaces in its own transaction).
CHUNK_POINTS = (
    "SELECT coalesce(sum(c.n * (length(k.key_ids) - length(replace(k.key_ids, ',', '')) + 1)), 0)"
    " FROM chunks c JOIN keysets k ON k.id = c.keyset_id"
)


def count_points(engine) -> int:
    with engine.connect() as conn:
        rows = int(conn.exec_driver_sql("SELECT count(*) FROM points").scalar() or 0)
        try:
            with conn.begin_nested():
                chunked = int(conn.exec_driver_sql(CHUNK_POINTS).scalar() or 0)
        except Exception:  # the code before: no chunks table
            chunked = 0
        return rows + chunked


def writers(tree: Path, admin_url: str, args) -> dict:
    url = fresh_database(admin_url)
    if args.write_timeout:
        url += f"?write_timeout={args.write_timeout}"
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONWARNINGS": "always"}
    argv = [str(args.rate), str(args.seconds), str(args.keys), str(args.finish_timeout)]
    # The store's tables first (one process), so the writers do not race to create them.
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import reslog,sys; reslog.init(store=sys.argv[1], system=False).finish()",
            url,
        ],
        check=True,
        env=env,
        cwd=tree,
    )
    engine = create_engine(url.split("?")[0])
    base = count_points(engine)
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def monitor() -> None:
        while not stop.wait(1.0):
            samples.append((time.time(), count_points(engine) - base))

    procs = start_writers(CHILD, url, argv, args.writers, tree, env)
    watcher = threading.Thread(target=monitor, daemon=True)
    watcher.start()
    results, hung, cannot = [], 0, 0
    for proc in procs:
        out, err = proc.communicate()
        hung += "hung for" in err
        cannot += "cannot write" in err
        lines = out.strip().splitlines()
        results.append(json.loads(lines[-1]) if lines else {"error": err[-300:]})
    stop.set()
    watcher.join()
    stored = count_points(engine) - base
    engine.dispose()
    done = [r for r in results if "logged" in r]
    logged = sum(r["logged"] for r in done)
    began = min((r["start"] for r in done), default=0.0)
    ended = max((r["end"] for r in done), default=0.0)
    during = [n for t, n in samples if t <= ended]
    at_end = during[-1] if during else 0
    complete = next((t - began for t, n in samples if n >= logged), None)
    return {
        "logged": logged,
        "rate_during": at_end / max(1e-9, ended - began),
        "lag": logged - at_end,
        # The lag in seconds: points not yet committed when logging ended over the rate offered.
        "lag_s": (logged - at_end) / max(1.0, args.writers * args.rate),
        "caught_up_s": None if complete is None else complete - (ended - began),
        "finish_max": max((r["finish_s"] for r in done), default=float("nan")),
        "finish_ok": sum(bool(r["ok"]) for r in done),
        "complete_s": complete,
        "stored": stored,
        "lost": logged - stored,
        "hung": hung,
        "cannot": cannot,
        "failures": sum(r["failures"] for r in done),
        "errors": len(results) - len(done),
    }


def ingest(tree: Path, admin_url: str, steps: int, keys: int) -> dict:
    """One writer logging `steps` x `keys` points unpaced into a fresh database; its points/s."""
    url = fresh_database(admin_url)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", INGEST_CHILD, url, str(steps), str(keys)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{tree}: {out.stderr[-2000:]}")
    r = json.loads(lines[-1])
    engine = create_engine(url)
    r["stored"] = count_points(engine)
    engine.dispose()
    r["rate"] = r["logged"] / r["total_s"]
    return r


def methods(admin_url: str, n: int) -> list[tuple[str, float, float]]:
    """(method, points/s, client CPU s) of `n` points in one transaction on one connection."""
    tree_url = fresh_database(admin_url)
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import reslog,sys; r=reslog.init(store=sys.argv[1], "
            "system=False); r.log({'k': 0.0}); r.finish()",
            tree_url,
        ],
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    engine = create_engine(tree_url)
    with engine.begin() as conn:
        run_id, key_id = conn.exec_driver_sql("SELECT run_id, key_id FROM points").first()
        for name in ("bare", "indexed"):
            conn.exec_driver_sql(
                f"CREATE TABLE {name} (id bigserial PRIMARY KEY, run_id int8, "
                "key_id int8, step int8, wall float8, value float8)"
            )
        conn.exec_driver_sql("CREATE INDEX ON indexed (run_id, id)")
        conn.exec_driver_sql("CREATE INDEX ON indexed (run_id, key_id, step)")
    rows = [(run_id, key_id, 1 + i, 1.7e9 + i, i * 0.5) for i in range(n)]
    cols = "(run_id, key_id, step, wall, value)"
    types = ["int8", "int8", "int8", "float8", "float8"]

    def executemany(cur, table):
        cur.executemany(f"INSERT INTO {table} {cols} VALUES (%s, %s, %s, %s, %s)", rows)

    def values(cur, table, k=1000):
        sql = f"INSERT INTO {table} {cols} VALUES " + ", ".join(["(%s, %s, %s, %s, %s)"] * k)
        for i in range(0, n, k):
            part = rows[i : i + k]
            if len(part) < k:
                sql = f"INSERT INTO {table} {cols} VALUES " + ", ".join(
                    ["(%s, %s, %s, %s, %s)"] * len(part)
                )
            cur.execute(sql, list(chain.from_iterable(part)))

    def copy(cur, table, binary=True):
        fmt = " (FORMAT BINARY)" if binary else ""
        with cur.copy(f"COPY {table} {cols} FROM STDIN{fmt}") as cp:
            if binary:
                cp.set_types(types)
            for row in rows:
                cp.write_row(row)

    cases = [
        ("executemany (before)", executemany, "points"),
        ("multi-row INSERT ... VALUES, 1,000 rows", values, "points"),
        ("COPY, text", lambda c, t: copy(c, t, binary=False), "points"),
        ("COPY, binary (after)", copy, "points"),
        ("COPY, binary, no foreign keys", copy, "indexed"),
        ("COPY, binary, no foreign keys, no indexes", copy, "bare"),
    ]
    out = []
    for label, func, table in cases:
        best = None
        for _ in range(2):
            with engine.connect() as conn:
                raw = conn.connection.dbapi_connection
                w0, c0 = time.perf_counter(), time.process_time()
                with raw.transaction():
                    func(raw.cursor(), table)
                took, cpu = time.perf_counter() - w0, time.process_time() - c0
            if best is None or took < best[0]:
                best = (took, cpu)
        assert best is not None
        out.append((label, n / best[0], best[1]))
    engine.dispose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--rate", type=int, default=10_000, help="points/s per writer")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--keys", type=int, default=20, help="scalars per log() call")
    ap.add_argument("--finish-timeout", type=float, default=600.0)
    ap.add_argument("--write-timeout", type=float, default=None, help="default: reslog's (90 s)")
    ap.add_argument("--before", default="main", help="git revision of the baseline")
    ap.add_argument("--parts", default="methods,writers")
    ap.add_argument("--variants", default="before,after", help="which trees to run")
    ap.add_argument("--method-points", type=int, default=100_000)
    ap.add_argument("--ingest-steps", type=int, default=50_000, help="part ingest: steps logged")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    server = postgres_server()
    try:
        print(
            f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}; "
            f"{os.cpu_count()} cores; PostgreSQL on loopback, fsync off"
        )
        if "methods" in parts:
            print(f"\n{args.method_points:,} points into one run, one transaction, best of 2")
            print("| how | points/s | client CPU s |")
            print("| --- | ---: | ---: |")
            for label, rate, cpu in methods(server.url, args.method_points):
                print(f"| {label} | {rate:,.0f} | {cpu:.2f} |")
        if "ingest" in parts:
            with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
                before = tree_of(args.before, Path(tmp) / "before")
                trees = [("before", before), ("after", ROOT)]
                took = {}
                for name, tree in [t for t in trees if t[0] in args.variants.split(",")]:
                    took[name] = ingest(tree, server.url, args.ingest_steps, args.keys)
                    print(f"{name}: {took[name]}", file=sys.stderr, flush=True)
            print(
                f"\none writer, {args.ingest_steps:,} steps x {args.keys} keys logged unpaced, "
                f"then finish(); before = {args.before}"
            )
            print(
                "| | points | log loop s | until finish() returned s | points/s | process CPU "
                "µs a point | stored |"
            )
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, r in took.items():
                print(
                    f"| {name} | {r['logged']:,} | {r['loop_s']:.1f} | {r['total_s']:.1f} | "
                    f"{r['rate']:,.0f} | {r['cpu_s'] / r['logged'] * 1e6:.2f} | {r['stored']:,} |"
                )
            if len(took) == 2:
                print(
                    f"\ningest, after / before: "
                    f"{took['after']['rate'] / took['before']['rate']:.2f}x"
                )
        if "writers" in parts:
            with tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp:
                before = tree_of(args.before, Path(tmp) / "before")
                got = {}
                trees = [("before", before), ("after", ROOT)]
                for name, tree in [t for t in trees if t[0] in args.variants.split(",")]:
                    got[name] = writers(tree, server.url, args)
                    print(f"{name}: {got[name]}", file=sys.stderr, flush=True)
            print(
                f"\n{args.writers} writers x {args.rate:,} points/s x {args.seconds:.0f} s "
                f"({args.keys} keys a step); before = {args.before}"
            )
            print(
                "| | logged | committed/s while logging | lag at end of logging, points | lag, s "
                "| finish() max s | finish() True | all stored after s | lost | hang warnings | "
                "failed writes |"
            )
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for name, r in got.items():
                complete = "-" if r["complete_s"] is None else f"{r['complete_s']:.0f}"
                print(
                    f"| {name} | {r['logged']:,} | {r['rate_during']:,.0f} | {r['lag']:,} | "
                    f"{r['lag_s']:.2f} | "
                    f"{r['finish_max']:.1f} | {r['finish_ok']}/{args.writers} | {complete} | "
                    f"{r['lost']:,} | {r['hung']} | {r['failures']} |"
                )
            if len(got) < 2:
                return 0
            b, a = got["before"], got["after"]
            print(
                f"\ncommitted/s while logging, after / before: "
                f"{a['rate_during'] / max(1.0, b['rate_during']):.2f}x"
            )
    finally:
        server.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
