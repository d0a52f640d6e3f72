"""The first poll of an SSH source: connect, start the agent, discover, poll a tiny store.

    .venv/bin/python scripts/bench/bench_connect.py [--rounds 8]

Against a local sshd (tests/fixtures/sshd.py, as the tests start it); prints the median of the
rounds after a warm first one, and the minimum. Run it on two trees alternated to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from common import ssh_env  # noqa: E402

from resplot.data.cache import SeriesCache  # noqa: E402
from resplot.sources.spec import parse_spec  # noqa: E402
from resplot.sources.ssh import SSHSource  # noqa: E402
from resplot.ssh.options import SSHOptions  # noqa: E402
from tests.fixtures.stores import make_run, new_store  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    with ssh_env(root / "sshd") as env:
        cfg = env.make_ssh_config(root / "ssh")
        make_run(new_store(root / "s.db"), name="a", points={"x": [(0, 1.0)]})
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            src = SSHSource(
                parse_spec(f"target:{root}/s.db"), SSHOptions(ssh_config=cfg), python=sys.executable
            )
            src.poll(SeriesCache())
            times.append(time.perf_counter() - t0)
            src.close()
        print(
            f"first poll over SSH, ms: median {statistics.median(times[1:]) * 1000:.0f}, "
            f"min {min(times) * 1000:.0f} ({args.rounds} rounds)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
