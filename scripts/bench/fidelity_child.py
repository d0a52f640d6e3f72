"""One measurement of scripts/bench/fidelity.py, in a fresh process of whichever code tree is
first on PYTHONPATH (this branch, or the code it is compared with):

    fidelity_child.py STORE PORT SSH_CONFIG AGENT_DIR WIDTH OUT.npz

Connects to STORE over SSH (through the parent's byte-counting proxy on PORT), draws its one
chart (the run's train/loss, every step in view) headless at an axes WIDTH pixels wide with
antialiasing off, and prints one JSON line: the first view's time (connect to a complete
chart), the level drawn and its exact groups (raw points or buckets) per pixel. OUT.npz gets
the chart's data pixels and the axes geometry, for the parent to compare with the line through
every raw point. Uses only what both code trees have.
"""

from __future__ import annotations

import json
import sys
import time
from inspect import signature

import matplotlib
import numpy as np

matplotlib.use("Agg")
# Before any artist exists: every line and band of the chart drawn without antialiasing.
matplotlib.rcParams["lines.antialiased"] = False
matplotlib.rcParams["patch.antialiased"] = False

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Polygon  # noqa: E402

from resplot.data import layout  # noqa: E402
from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.data.state import ViewState  # noqa: E402
from resplot.draw.charts import render  # noqa: E402
from resplot.sources.spec import parse_spec  # noqa: E402
from resplot.sources.ssh import SSHSource  # noqa: E402
from resplot.ssh.options import SSHOptions  # noqa: E402

HEIGHT_PX = 360
DPI = 100


def figure_width(width: int) -> float:
    """The figure width (pixels) whose one chart's axes are `width` pixels wide."""
    fig_w = float(width) + 80
    for _ in range(4):
        m = layout.margins(layout.Frame(fig_w, HEIGHT_PX, DPI, 1), layout.Grid(1, 1))
        fig_w += width - (m["right"] - m["left"]) * fig_w
    return fig_w


def main(store: str, port: str, cfg: str, agent_dir: str, width: str, out: str) -> None:
    del port  # the proxy is named in the SSH config; the parent counts its bytes
    fig_w = figure_width(int(width))
    state = ViewState(page="custom", smoothing=0.0, custom_keys=["train/loss"])
    t0 = time.perf_counter()
    # The code before issue 22 uploads the agent into `agent_dir`; from it on, the agent runs
    # from memory and the source takes no folder.
    upload = {"agent_dir": agent_dir} if "agent_dir" in signature(SSHSource).parameters else {}
    source = SSHSource(
        parse_spec(f"target:{store}"), SSHOptions(ssh_config=cfg), python=sys.executable, **upload
    )
    cache = SeriesCache()
    source.poll(cache)
    refs = [r.ref for r in cache.runs()]
    page = render(
        cache,
        state,
        refs,
        size=(fig_w / DPI, HEIGHT_PX / DPI),
        dpi=DPI,
        fetch=lambda: source.poll(cache),
        rounds=8,
    )
    tracks = [t for ts in page.tracks for t in ts.values()]
    done = bool(tracks) and page.incomplete() == 0
    first_s = time.perf_counter() - t0
    source.close()
    ax = page.axes[0]
    view = tracks[0].view
    lo, hi = ax.get_xlim()
    if view.level == 0:
        groups = int(((view.steps >= lo) & (view.steps <= hi)).sum())
    else:
        groups = len(view.mid_steps)
    # The data alone: the series' line and band; every text, legend, tick, grid line, spine
    # and mark hidden.
    FigureCanvasAgg(page.figure)
    keep = {id(a) for t in tracks for a in (t.line, t.band) if a.get_visible()}
    for artist in page.figure.findobj():
        if artist is page.figure or artist is ax or id(artist) in keep:
            continue
        if isinstance(artist, (Line2D, Polygon)) or hasattr(artist, "set_visible"):
            artist.set_visible(False)
    ax.set_visible(True)
    page.figure.canvas.draw()
    rgba = np.asarray(page.figure.canvas.buffer_rgba())
    ink = (rgba[..., :3].astype(int).sum(axis=2) < 3 * 250) & (rgba[..., 3] > 0)
    x0, y0, w, h = ax.bbox.bounds
    np.savez_compressed(
        out,
        ink=ink,
        bounds=np.array([x0, y0, w, h]),
        xlim=np.array([lo, hi]),
        ylim=np.array(ax.get_ylim()),
        figsize=np.array(page.figure.get_size_inches()),
        position=np.array(ax.get_position().bounds),
    )
    print(
        json.dumps(
            {
                "first_s": first_s,
                "complete": done,
                "level": int(view.level),
                "groups": groups,
                "axes_px": w,
                "groups_per_px": groups / w,
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:7])
