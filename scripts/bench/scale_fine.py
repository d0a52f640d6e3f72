"""The first complete view of a page over SSH, headless: connect to the sshd fixture's agent, read
the series rows, draw the page (charts.render, the snapshot's path: every tile it asks for
fetched, fine ones included) and stop when every series is drawn at the level it wants. Run it
from each tree to compare (the agent's archive is built from the tree that runs it):

    (cd $TREE && PYTHONPATH=$TREE .venv/bin/python scripts/bench/scale_fine.py STORE \
        [--page training] [--size 1400x900] [--repeat 3])

Prints one JSON line a window and a median line: seconds, levels drawn, the raw points the
host read for fine views (scripts/bench/scale_store.py builds the stores: 8 runs of 20 keys).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def one(store: Path, cfg: Path, page: str, size: tuple[float, float]) -> dict:
    from resplot.data.cache import SeriesCache
    from resplot.data.state import ViewState
    from resplot.data.views import fine_points
    from resplot.draw import charts
    from resplot.sources.spec import parse_spec
    from resplot.sources.ssh import SSHSource
    from resplot.ssh.options import SSHOptions

    cache = SeriesCache()
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
        "complete": complete,
        "series": len(views),
        "levels": sorted({v.level for v in views if v is not None}),
        "fine_points": int(fine),
        "fold": fold,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("store", type=Path)
    ap.add_argument("--page", default="training")
    ap.add_argument("--size", default="1400x900")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
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
