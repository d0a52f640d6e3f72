"""The first complete view of a page over SSH, headless: connect to the sshd fixture's agent, read
the series rows, draw the page (charts.render, the snapshot's path: every tile it asks for
fetched, fine ones included) and stop when every series is drawn at the level it wants. Run it
from each tree to compare (the agent's archive is built from the tree that runs it):

    (cd $TREE && PYTHONPATH=$TREE .venv/bin/python scripts/bench/scale_fine.py STORE \
        [--page training] [--size 1400x900] [--repeat 3])

Prints one JSON line a window and a median line: seconds, levels drawn, the raw points the
host read for fine views (scripts/bench/scale_store.py builds the stores: 8 runs of 20 keys).

With `--before TREE` (e.g. `git archive e984d99 | tar -x -C /tmp/before`) it runs itself from
this tree and from TREE in child processes, alternated for `--rounds` rounds of `--repeat`
windows each, and prints both medians, their ratio and the load average. `--compress` keeps
this tree's replies compressed over the loopback sshd, as over a network (from e984d99 on, a
loopback host gets them plain; the code before always compressed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# RESPLOT_BENCH_CODE: the tree whose code this run measures (`--before` runs this script on the
# code before, so both report the same things); the sshd fixture comes from it too.
CODE = Path(os.environ.get("RESPLOT_BENCH_CODE") or ROOT)
sys.path.insert(0, str(CODE))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def cpu_s(pid: int) -> float:
    """CPU seconds of a process on this machine and of the children it waited for (the agent's
    tile workers), from /proc; 0 where it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def one(store: Path, cfg: Path, page: str, size: tuple[float, float]) -> dict:
    from resplot.data.cache import SeriesCache
    from resplot.data.state import ViewState
    from resplot.data.views import fine_points
    from resplot.draw import charts
    from resplot.sources.spec import parse_spec
    from resplot.sources.ssh import SSHSource
    from resplot.ssh.options import SSHOptions

    cache = SeriesCache()
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    source = SSHSource(
        parse_spec(f"target:{store}"), SSHOptions(ssh_config=str(cfg)), python=sys.executable
    )
    try:
        source.poll(cache)
        t_series = time.perf_counter() - t0
        refs = [r.ref for r in cache.runs()]
        state = ViewState(page=page, smoothing=0.0)
        drawn = charts.render(
            cache, state, refs, size=size, fetch=lambda: source.poll(cache), rounds=8
        )
        wall = time.perf_counter() - t0
        cpu_client = time.process_time() - cpu0
        agent = int(source.client.info.get("pid", 0)) if source.client is not None else 0
        # The agent and its sshd session (the agent's parent: `exec` all the way down).
        cpu_agent, cpu_sshd = cpu_s(agent), cpu_s(parent_of(agent))
        views = [t.view for ts in drawn.tracks for t in ts.values()]
        complete = all(v is not None and v.complete for v in views)
        fine = 0.0
        for i, ts in enumerate(drawn.tracks):
            for t in ts.values():
                s = cache.summary(t.item.ref, t.item.key)
                if s is not None and t.view is not None and t.view.level < 0:
                    fine += fine_points(s, -float("inf"), float("inf"), drawn._pixels(i), 4)
        fold = getattr(cache, "fold", lambda _s: None)(refs[0].source) if refs else None
    finally:
        source.close()
    return {
        "first_s": round(wall, 3),
        "series_s": round(t_series, 3),
        "cpu_client_s": round(cpu_client, 3),
        "cpu_agent_s": round(cpu_agent, 3),
        "cpu_sshd_s": round(cpu_sshd, 3),
        "complete": complete,
        "series": len(views),
        "levels": sorted({v.level for v in views if v is not None}),
        "fine_points": int(fine),
        "fold": fold,
    }


def tree_windows(tree: Path, args: argparse.Namespace, *, compress: bool) -> list[dict]:
    """The windows (one dict each) of this script run in a child on the code of `tree`."""
    cmd = [sys.executable, str(ROOT / "scripts/bench/scale_fine.py"), str(args.store)]
    cmd += ["--page", args.page, "--size", args.size, "--repeat", str(args.repeat)]
    if compress:
        cmd.append("--compress")
    env = {**os.environ, "PYTHONPATH": str(tree), "RESPLOT_BENCH_CODE": str(tree)}
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{tree}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if '"first_s"' in line]


def side_by_side(args: argparse.Namespace) -> int:
    """This tree and `--before`, alternated: medians of wall and CPU seconds, their ratios,
    the load average before and after."""
    before = args.before.resolve()
    got: dict[str, list[dict]] = {"this": [], "before": []}
    load0 = os.getloadavg()
    for r in range(args.rounds):
        for name, tree in (("this", CODE), ("before", before)):
            windows = tree_windows(tree, args, compress=args.compress and name == "this")
            got[name] += windows
            for w in windows:
                print(json.dumps({"round": r + 1, "tree": name, **w}), flush=True)
    load1 = os.getloadavg()
    out: dict = {"windows": len(got["this"]), "before": str(before), "compress": args.compress}
    for field in ("first_s", "cpu_client_s", "cpu_agent_s", "cpu_sshd_s"):
        this = statistics.median(w[field] for w in got["this"])
        old = statistics.median(w[field] for w in got["before"])
        out[field] = {"this": this, "before": old, "ratio": round(this / old, 3) if old else None}
    out["load_average"] = [round(v, 2) for v in (*load0, *load1)]
    print(json.dumps(out))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("store", type=Path)
    ap.add_argument("--page", default="training")
    ap.add_argument("--size", default="1400x900")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", type=Path, help="a tree of the code before, run alternated")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds with --before")
    ap.add_argument("--compress", action="store_true", help="compressed replies on loopback")
    args = ap.parse_args()
    if args.before is not None:
        return side_by_side(args)
    if args.compress:
        from resplot.ssh.connection import SSHConnection

        SSHConnection.loopback = property(lambda _self: False)  # as over a network
    from tests.fixtures.sshd import start_env

    os.environ.pop("SSH_AUTH_SOCK", None)
    work = Path(tempfile.mkdtemp(prefix="scale-fine-"))
    env = start_env(work)
    cfg = env.make_ssh_config(work / "ssh")
    w, h = (int(v) for v in args.size.split("x"))
    got = []
    try:
        one(args.store, cfg, args.page, (w / 100, h / 100))  # a first look: the page cache warm
        for _ in range(args.repeat):
            r = one(args.store, cfg, args.page, (w / 100, h / 100))
            print(json.dumps(r), flush=True)
            got.append(r["first_s"])
    finally:
        env.target.stop()
        env.jump.stop()
    print(json.dumps({"median_first_s": statistics.median(got), "all": got}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
