"""Scale: a week of 8-GPU pretraining (34M points) as quick to look at as a toy run.

    .venv/bin/python scripts/bench/scale.py                  # 3.4M and 34M points, ~15 min
    .venv/bin/python scripts/bench/scale.py --sizes 3.4M --markdown /tmp/scale.md
    .venv/bin/python scripts/bench/scale.py --parts first,history --no-before

Stores are built once through reslog's public API (scripts/bench/scale_store.py) under --dir
and reused. Every measurement runs in a fresh child process (scale_children.py; its peak RSS
is its own), one at a time. Baselines are measured in the same run: "before" is this project's
code before rollups (commit BEFORE, unpacked with `git archive`) on a copy of the store it can
read; the raw-points path is the same agent reading every point by id, as the viewer did then.

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
            the store's shape (20 keys a step, 90 more every 4th), and a slow run's flush;
            with --first-shifts, also rollups whose first level is 2**shift steps wide (what
            storing finer levels would cost: docs/store.md, "Fine levels")
  overhead  a training loop of 1 ms steps logging the store's shape: wall time with reslog
            against without (median of 12 pairs of blocks), for a step of torch ops (outside
            the GIL, as GPU work is) and a pure-Python one (holds the GIL); the writer's
            backlog when the blocks end says whether it kept up. Baseline: the same with a
            writer that inserts the points without rollups
  sweep     50 runs on the training page: redraw time with every tile cached
"""

from __future__ import annotations

import argparse
import json
import os
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
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale_children import ZOOMS  # noqa: E402 (the bench folder is on the path from here)
from trees import tree_of  # noqa: E402

from schema.store.sqlite_file import backup_into, readonly_uri  # noqa: E402

BEFORE = "47f46fc"  # the last commit before rollups (issue 8)
SIZES = {"3.4M": 10_000, "6.8M": 20_000, "34M": 100_000, "100M": 300_000}  # steps a run, 8 runs
FIRST_RUNS = 3  # windows opened afresh for the first view: the median (and every zoom's)
OVERHEAD_PAIRS = 12  # of 1,000-step blocks, each pair from four blocks (scale_children.py)
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
    """Run `scale_children.py part args` and return the JSON it prints last."""
    cmd = [sys.executable, str(HERE / "scale_children.py"), part, *args]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, input=stdin, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{part} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def timed(cmd: list[str], env=None, cwd=ROOT) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit status) of a command, by wait4."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        print(proc.stderr.read().decode()[-2000:], file=sys.stderr)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def code_tree(work: Path, commit: str) -> Path:
    """The tree of `commit`, unpacked once under `work` (git archive)."""
    tree = work / f"base-{commit}"
    if not (tree / "resplot").is_dir():
        tree_of(commit, tree)
    return tree


def before_tree(work: Path) -> Path:
    """The code before rollups."""
    return code_tree(work, BEFORE)


def before_store(store: Path) -> Path:
    """A copy of the store the old code reads: same points, its revision marked 0001 (the old
    code ignores the rollup tables)."""
    copy = store.with_name(store.stem + ".before.db")
    if not copy.exists() or copy.stat().st_mtime < store.stat().st_mtime:
        src = sqlite3.connect(readonly_uri(store), uri=True)
        backup_into(src, copy)
        dst = sqlite3.connect(copy)
        dst.execute("UPDATE alembic_version SET version_num = '0001'")
        dst.commit()
        dst.close()
        src.close()
    return copy


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


def build_sweep(path: Path) -> None:
    """50 runs × 4,000 steps × the 20 training keys (4M points)."""
    from scale_store import TRAIN, cached

    import reslog

    def make(path: Path) -> None:
        for r in range(50):
            run = reslog.init(
                project="sweep",
                name=f"lr{r}",
                store=path,
                system=False,
                config={"lr": 1e-4 * (r + 1)},
            )
            for s in range(4000):
                run.log({k: 2 + r / 50 + 1 / (s + 10) for k in TRAIN}, step=s)
            run.finish(timeout=600)

    cached(path, {"runs": 50, "steps": 4000}, make)


# -- the parent ----------------------------------------------------------------------------------


def _first_view(store: Path, proxy, cfg: Path) -> dict[str, Any]:
    """One window's first view, zooms and idle polls (scale_children.child_first)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "scale_children.py"),
            "first",
            str(store),
            str(proxy.port),
            str(cfg),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
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
    result["first_mb"] = (marks["zoom"] - marks["first"]) / 2**20
    result["zoom_mb"] = (marks["idle"] - marks["zoom"]) / 2**20 / len(result["zooms_s"])
    result["idle_bytes"] = (marks["idle-end"] - marks["idle-start"]) / 10
    return result


def measure_first(store: Path, env, work: Path, with_raw: bool) -> dict[str, Any]:
    from tests.fixtures.tcpproxy import TCPProxy

    proxy = TCPProxy(env.target.port)
    cfg = env.make_ssh_config(work / f"ssh-{store.stem}", target_port=proxy.port)
    # A first connect (a second look at a host: its page cache holds the store).
    child("connect", str(store), str(cfg))
    raw: dict[str, Any] = {}
    if with_raw:
        proxy.reset_counters()
        raw = child("raw", str(store), str(cfg), timeout=1800)
        raw["raw_mb"] = (proxy.bytes_up + proxy.bytes_down) / 2**20
    runs = [_first_view(store, proxy, cfg) for _ in range(FIRST_RUNS)]
    proxy.close()
    result = dict(runs[-1])
    result["first_s"] = statistics.median(r["first_s"] for r in runs)
    result["firsts_s"] = [r["first_s"] for r in runs]
    result["zooms_s"] = [z for r in runs for z in r["zooms_s"]]
    result["zoom_s"] = statistics.median(result["zooms_s"])
    result["first_max_s"], result["zoom_max_s"] = max(result["firsts_s"]), max(result["zooms_s"])
    pictures = [r["first_picture_s"] for r in runs if r.get("first_picture_s") is not None]
    result["first_picture_s"] = statistics.median(pictures) if pictures else None
    for key in ("window_rss_mb", "agent_rss_mb"):
        result[key] = max(r[key] for r in runs)
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
        cmd = [
            sys.executable,
            "-c",
            "import sys; from resplot.cli import main; sys.exit(main())",
            "snapshot",
            str(copy),
            "--timeout",
            "900",
            "-o",
            str(work / "before.png"),
            "--page",
            "training",
        ]
        wall, rss, rc = timed(cmd, env=env, cwd=tree)
        out["before_snapshot_training_s"], out["before_snapshot_training_rss_mb"] = wall, rss
    return out


def environment() -> str:
    import platform

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    cpu = platform.processor() or platform.machine()
    return (
        f"{cpu}, {os.cpu_count()} cores, load average {load}; Python "
        f"{platform.python_version()}, SQLite {sqlite3.sqlite_version}"
    )


def fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}{unit}" if abs(v) < 10 else f"{v:,.1f}{unit}"
    return f"{v:,}{unit}" if isinstance(v, int) else f"{v}{unit}"


def overhead_rows(kind: str, label: str) -> list[tuple[str, str, str, str]]:
    """A step kind's overhead and quartiles; the baseline column: the writer without rollups."""
    name = f"overhead_{kind}"
    return [
        (label, f"{name}_pct", " %", f"{name}_off_pct"),
        (
            f"  quartiles of its {OVERHEAD_PAIRS} block pairs",
            f"{name}_iqr",
            " %",
            f"{name}_off_iqr",
        ),
    ]


ROWS = [
    (f"first view, training page, over SSH (median of {FIRST_RUNS})", "first_s", "s", "raw_s"),
    ("  the slowest of them", "first_max_s", "s", None),
    ("  its first paint (the first draw with data; median)", "first_picture_s", "s", None),
    ("  bytes over SSH for it", "first_mb", " MB", "raw_mb"),
    (f"zoom to 1 % at full resolution (median of {len(ZOOMS) * FIRST_RUNS})", "zoom_s", "s", None),
    ("  the slowest of them", "zoom_max_s", "s", None),
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
    *overhead_rows("torch", "logging overhead on a 1 ms step of torch ops"),
    *overhead_rows("python", "  on a 1 ms pure-Python step (holds the GIL)"),
]
TARGET_OF = {
    "latency_p50_s": "latency_s",
    "latency_max_s": "latency_s",
    "lost_intervals": "kill_intervals",
    "overhead_torch_pct": "overhead_pct",
    "overhead_python_pct": "overhead_pct",
}


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
        met = (
            "" if target is None or largest is None else ("met" if largest <= target else "NOT met")
        )
        row += [fmt(target, unit) if target is not None else "", met]
        lines.append("| " + " | ".join(row) + " |")
    if len(sizes) >= 2:
        a, b = results[sizes[0]], results[sizes[-1]]
        grow = {
            k: b[k] / a[k]
            for k in ("first_s", "snapshot_training_s", "history_s", "zoom_s")
            if a.get(k) and b.get(k)
        }
        times = b["points"] / a["points"]
        growth = ", ".join(f"{k} ×{v:.2f}" for k, v in grow.items())
        lines += [
            "",
            f"{times:.1f}× the points ({sizes[0]} → {sizes[-1]}): {growth} "
            "(target at 10×: first view ≤ ×1.3)",
        ]
    extra = {
        size: {
            k: v
            for k, v in r.items()
            if k
            in (
                "levels",
                "zoom_levels",
                "series",
                "tile_mb",
                "first_draws",
                "rows",
                "spike",
                "check_rollups",
                "killed_run_problems",
                "sweep_redraw_s",
                "sweep_runs",
                "points",
                "build_s",
                "firsts_s",
                "zooms_s",
            )
            or k.startswith("overhead_")
        }
        for size, r in results.items()
    }
    lines += ["", "Details: " + json.dumps(extra)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="3.4M,34M", help="comma list of 3.4M, 6.8M, 34M, 100M")
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "reslog-scale")
    p.add_argument("--no-before", action="store_true", help="skip the old code's baselines")
    p.add_argument(
        "--no-raw",
        action="store_true",
        help="skip the first view's baseline (every point over SSH: minutes at 100M)",
    )
    p.add_argument(
        "--first-shifts",
        default="",
        help="writer part: also measure first levels of 2**shift steps (e.g. 4,5)",
    )
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
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
            print(
                f"{size}: {built['points']:,} points, {built['bytes'] / 2**30:.2f} GiB",
                file=sys.stderr,
            )
            if "first" in parts:
                r.update(measure_first(store, env, work, with_raw=not args.no_raw))
            if "snapshot" in parts:
                r.update(measure_snapshot(store, work, before=not args.no_before))
            if "history" in parts:
                h = child("history", str(store))
                r.update(
                    {
                        "history_s": h["history_s"],
                        "history_raw_s": h["raw_s"],
                        "rows": h["rows"],
                        "spike": h["spike"],
                    }
                )
            if "latency" in parts:
                from tests.fixtures.tcpproxy import TCPProxy

                proxy = TCPProxy(env.target.port)
                cfg = env.make_ssh_config(work / f"ssh-lat-{size}", target_port=proxy.port)
                r.update(child("latency", str(store), str(cfg), "20"))
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
            largest.update(
                {
                    "writer_us": won,
                    "writer_off_us": woff,
                    "writer_ratio": won / woff,
                    "slow_ms_per_flush": slow_on,
                    "slow_off_ms_per_flush": slow_off,
                }
            )
            for shift in filter(None, args.first_shifts.split(",")):
                # Interleaved with the bare inserts again: its own baseline, the same drift.
                runs = [
                    child("writer", mode, "20000", *([shift] if mode == "on" else []))
                    for _ in range(4)
                    for mode in ("on", "off")
                ]
                w_on = min(x["us_per_point"] for x in runs[0::2])
                w_off = min(x["us_per_point"] for x in runs[1::2])
                print(
                    f"writer, first level 2**{shift} steps: {w_on:.3f} µs a point against "
                    f"{w_off:.3f} bare: {w_on / w_off:.3f}x",
                    file=sys.stderr,
                )
                largest[f"writer_ratio_shift{shift}"] = w_on / w_off
        if "overhead" in parts:
            for kind in ("torch", "python"):
                name = f"overhead_{kind}"
                for rollups, suffix in (("on", ""), ("off", "_off")):
                    o = child("overhead", str(OVERHEAD_PAIRS), "1000", kind, rollups)
                    o[f"{name}_iqr"] = f"{o[f'{name}_q1']:.2f} to {o[f'{name}_q3']:.2f}"
                    largest.update({k.replace(name, name + suffix): v for k, v in o.items()})
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
