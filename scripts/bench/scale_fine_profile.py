"""Where a first view's time goes (scale_fine.py's window, a clock around each call): SSH login
and `hello`, the series rows, each tile poll of charts.render, the end. Three windows:

    PYTHONPATH=$PWD .venv/bin/python scripts/bench/scale_fine_profile.py STORE
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    from common import ssh_env

    from resplot.data.cache import SeriesCache
    from resplot.data.state import ViewState
    from resplot.draw import charts
    from resplot.sources.spec import parse_spec
    from resplot.sources.ssh import SSHSource
    from resplot.ssh.options import SSHOptions

    store = sys.argv[1]
    os.environ.pop("SSH_AUTH_SOCK", None)
    work = Path(tempfile.mkdtemp(prefix="scale-fine-profile-"))
    with ssh_env(work) as env:
        cfg = env.make_ssh_config(work / "ssh")
        for _ in range(3):
            cache, marks = SeriesCache(), []
            t0 = time.perf_counter()
            src = SSHSource(
                parse_spec(f"target:{store}"),
                SSHOptions(ssh_config=str(cfg)),
                python=sys.executable,
            )
            src.connect()
            marks.append(("connect+hello", round(time.perf_counter() - t0, 3)))
            src.poll(cache)
            marks.append(("series poll", round(time.perf_counter() - t0, 3)))

            def fetch(src=src, cache=cache, marks=marks, t0=t0) -> None:
                a, wanted = time.perf_counter(), cache.wanted_count()
                got = src.poll(cache).tiles
                now = time.perf_counter()
                marks.append(
                    (f"poll of {wanted} tiles ({got})", round(now - t0, 3), round(now - a, 3))
                )

            refs = [r.ref for r in cache.runs()]
            charts.render(
                cache,
                ViewState(page="training", smoothing=0.0),
                refs,
                size=(14, 9),
                fetch=fetch,
                rounds=8,
            )
            marks.append(("done", round(time.perf_counter() - t0, 3)))
            src.close()
            print(json.dumps(marks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
