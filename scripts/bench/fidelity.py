"""Fidelity: how exactly a chart shows a run, at every run length and chart width, next to the
code it is compared with (issue 20).

    .venv/bin/python scripts/bench/fidelity.py                        # 10^3 .. 10^7, ~15 min
    .venv/bin/python scripts/bench/fidelity.py --lengths 1e3,1e4 --widths 600
    .venv/bin/python scripts/bench/fidelity.py --base 46f7156 --markdown /tmp/fidelity.md

--base: the code to compare with (default: where this branch left main).

For each run length (one run, one key: a noisy decaying loss with a one-step spike and dip,
built once under --dir) and chart width (the axes' pixels), a fresh process of each code tree
(this checkout; --base unpacked with `git archive`) connects over SSH to a local sshd through a
byte-counting proxy, draws the run's chart headless with antialiasing off
(fidelity_child.py), and reports:

  groups/px   exact groups (raw points or buckets) the chart drew from, per pixel of its width:
              the target is at least 1 (or every raw point when the run has fewer)
  diff px     pixels of the chart that differ from the line through every raw point drawn in
              the same axes (matplotlib, same width, antialiasing off), and how many of those
              lie more than one pixel from any pixel of the other drawing ("far")
  first view  seconds from connecting to the complete chart, and bytes over SSH both ways
              (the agent is on the host already, as on a second look)

Alongside, the same comparison for exact M4 of every raw point (each pixel column's first, min,
max and last, computed from all of them): what any column-based drawing can reach with Agg.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
HERE = Path(__file__).resolve().parent

from tests.fixtures.pixels import far  # noqa: E402 (ROOT is on the path from here)

LENGTHS = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
WIDTHS = (300, 600, 1_100)
CHUNK = 1_000_000  # points a transaction while building


def values(n: int) -> np.ndarray:
    """The run's train/loss: deterministic, so the parent draws the raw line without reading."""
    rng = np.random.default_rng(n)
    s = np.arange(n)
    y = 2.0 + 3.0 * np.exp(-s / max(n / 5, 1)) + 0.3 * rng.standard_normal(n)
    y[n // 3] = 20.0
    y[(2 * n) // 3] = -5.0
    return y


def build(path: Path, n: int) -> None:
    """One run of `n` steps of train/loss, through the writer's rollup keeper (reused when
    built)."""
    marker = path.with_name(path.name + ".built")
    if path.exists() and marker.exists() and marker.read_text() == str(n):
        return
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    from tests.fixtures.stores import add_points, make_run, new_store

    engine = new_store(path)
    run = make_run(engine, name="r", status="finished")
    y = values(n)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        add_points(
            engine, run.id, {"train/loss": zip(range(lo, hi), y[lo:hi].tolist(), strict=True)}
        )
    engine.dispose()
    marker.write_text(str(n))


def run_child(
    tree: Path, store: Path, proxy, cfg: Path, agent_dir: Path, width: int, out: Path
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "QT_QPA_PLATFORM": "offscreen"}
    proxy.reset_counters()
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "fidelity_child.py"),
            str(store),
            str(proxy.port),
            str(cfg),
            str(agent_dir),
            str(width),
            str(out),
        ],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"fidelity_child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["mb"] = (proxy.bytes_up + proxy.bytes_down) / 2**20
    return result


def draw_reference(saved, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The line through (x, y) in the axes the child drew in: same figure size, place, limits."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=tuple(saved["figsize"]), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes(tuple(saved["position"]))
    ax.set_axis_off()
    ax.plot(x, y, color="#000000", linewidth=1.4, antialiased=False)
    ax.set_xlim(*saved["xlim"])
    ax.set_ylim(*saved["ylim"])
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., 0] < 128


def exact_m4(saved, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First, min, max and last of each canvas pixel column the axes span, from every point."""
    x0, _y0, w, _h = saved["bounds"]
    lo, hi = saved["xlim"]
    dx = (hi - lo) / w
    first = math.floor(x0)
    edges = lo + (first - x0 + np.arange(math.ceil(x0 + w) - first + 1)) * dx
    at = np.searchsorted(x, edges)
    keep = [0, len(x) - 1]
    starts = at[:-1][at[1:] > at[:-1]]
    ends = at[1:][at[1:] > at[:-1]]
    keep += starts.tolist() + (ends - 1).tolist()
    mins = [a + int(np.argmin(y[a:b])) for a, b in zip(starts, ends, strict=True)]
    maxs = [a + int(np.argmax(y[a:b])) for a, b in zip(starts, ends, strict=True)]
    keep = np.unique(np.array(keep + mins + maxs))
    return x[keep], y[keep]


def compare(npz: Path, x: np.ndarray, y: np.ndarray, reference: np.ndarray) -> dict[str, int]:
    saved = np.load(npz)
    ink = saved["ink"]
    return {
        "diff": int((ink != reference).sum()),
        "far": far(ink, reference),
        "lit": int(reference.sum()),
    }


def _px(r: dict | None) -> str:
    return "-" if r is None else f"{r['diff']:,} ({r['far']:,})"


def _view(r: dict | None) -> str:
    return "-" if r is None else f"{r['first_s']:.2f} s, {r['mb']:.3f} MB"


def _groups(r: dict | None) -> str:
    return "-" if r is None else f"{r['groups_per_px']:.2f}"


def fmt_row(n: int, w: int, new: dict, old: dict | None, m4: dict) -> str:
    cells = [
        f"{n:,}",
        f"{w:,}",
        _groups(new),
        _groups(old),
        _px(new),
        _px(old),
        f"{m4['diff']:,}",
        f"{new['lit']:,}",
        _view(new),
        _view(old),
    ]
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default=",".join(str(n) for n in LENGTHS))
    p.add_argument("--widths", default=",".join(str(w) for w in WIDTHS))
    p.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "reslog-fidelity")
    p.add_argument(
        "--base",
        default="fork",
        help="the code to compare with: a commit, 'fork' "
        "(where this branch left main: today's code) or '' for none",
    )
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    lengths = [int(float(v)) for v in args.lengths.split(",")]
    widths = [int(v) for v in args.widths.split(",")]
    work = args.dir
    work.mkdir(parents=True, exist_ok=True)
    from scale import code_tree

    from tests.fixtures.sshd import start_env
    from tests.fixtures.tcpproxy import TCPProxy

    trees = {"new": ROOT}
    if args.base:
        base = args.base
        if base == "fork":
            fork = ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"]
            base = subprocess.run(fork, check=True, capture_output=True, text=True).stdout.strip()
        rev = ["git", "-C", str(ROOT), "rev-parse", "--short", base]
        commit = subprocess.run(rev, check=True, capture_output=True, text=True).stdout.strip()
        trees["old"] = code_tree(work, commit)
    os.environ.pop("SSH_AUTH_SOCK", None)
    env = start_env(Path(tempfile.mkdtemp(prefix="fidelity-sshd-")))
    proxy = TCPProxy(env.target.port)
    cfg = env.make_ssh_config(work / "ssh", target_port=proxy.port)
    rows, results = [], []
    t_start = time.perf_counter()
    try:
        for n in lengths:
            store = work / f"run-{n}.db"
            t0 = time.perf_counter()
            build(store, n)
            print(f"{n:,} steps: store ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            x = np.arange(n, dtype=np.float64)
            y = values(n)
            for w in widths:
                got: dict[str, dict[str, Any]] = {}
                for name, tree in trees.items():
                    agent_dir = work / f"agent-{name}"
                    out = work / f"{name}-{n}-{w}.npz"
                    run_child(tree, store, proxy, cfg, agent_dir, w, out)  # upload, warm up
                    got[name] = run_child(tree, store, proxy, cfg, agent_dir, w, out)
                    got[name]["npz"] = out
                saved = np.load(got["new"]["npz"])
                reference = draw_reference(saved, x, y)
                m4_ink = draw_reference(saved, *exact_m4(saved, x, y))
                m4 = {"diff": int((m4_ink != reference).sum()), "far": far(m4_ink, reference)}
                for name in got:
                    here = np.load(got[name]["npz"])  # the same axes, unless a layout moved it
                    same = (
                        np.array_equal(here["position"], saved["position"])
                        and np.array_equal(here["xlim"], saved["xlim"])
                        and np.array_equal(here["ylim"], saved["ylim"])
                    )
                    ref_here = reference if same else draw_reference(here, x, y)
                    got[name].update(compare(got[name].pop("npz"), x, y, ref_here))
                old = got.get("old")
                rows.append(fmt_row(n, w, got["new"], old, m4))
                results.append({"n": n, "width": w, "new": got["new"], "old": old, "m4": m4})
                print(rows[-1], file=sys.stderr)
    finally:
        proxy.close()
        env.target.stop()
        env.jump.stop()
    against = f", compared with {trees['old'].name[5:]}" if "old" in trees else ""
    took = time.perf_counter() - t_start
    head = [
        f"scripts/bench/fidelity.py, {time.strftime('%Y-%m-%d')}, {took:.0f} s{against}",
        "",
        "| steps | width px | groups/px | before | diff px (far) | before | exact M4 diff | line px"
        " | first view over SSH | before |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    text = "\n".join(head + rows) + "\n"
    print(text)
    (work / "fidelity.json").write_text(json.dumps(results, default=str, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
