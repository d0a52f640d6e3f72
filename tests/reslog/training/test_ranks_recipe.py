"""docs/ranks.md's recipe for your own training code, run as written: its code block is taken
from the markdown and run verbatim under a real `torchrun --nproc_per_node 4` (gloo on CPU),
with what it leaves to the reader (the process group, `loader`, `model`, `opt`, `steps`,
`job_id`) defined before it and `run.finish()` after. Rank 2's data is 200 ms slower for 50
steps. `reslog watch` names rank 2 in data as it happens, and `resplot snapshot --page ranks`
draws the job (the recipe logs no time/step: its step time comes from the log() intervals)
with rank 2 outlined over those steps.

As in tests/trainer/test_ranks_torchrun.py, every forward sleeps 100 ms on every rank, standing for
device time: four CPU-bound processes on this 2-core machine are otherwise slow by turns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from matplotlib.patches import Rectangle

from resplot.cli import main as resplot_main
from resplot.data.cache import SeriesCache
from resplot.data.ranks import STEP_INTERVALS
from resplot.data.state import ViewState
from resplot.draw.ranks import render_ranks
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from schema.store.connect import open_store
from tests.fixtures.logging_child import ROOT
from tests.fixtures.signals import restore_ctrl_c
from tests.reslog.training.test_run_health import wait_until
from tests.trainer.test_ranks_torchrun import Lines, running

pytestmark = [pytest.mark.integration, pytest.mark.slow]
STEPS, FIRST, LAST = 150, 40, 89  # rank 2's data +200 ms at steps 40-89

BEFORE = f"""
import os, time, torch, torch.distributed as dist

dist.init_process_group("gloo")
torch.manual_seed(0)
steps = {STEPS}
job_id = None  # the recipe's comment: under torchrun its run id is the default


class Loader:
    def __iter__(self):
        for step in range(steps):
            if dist.get_rank() == 2 and {FIRST} <= step <= {LAST}:
                time.sleep(0.2)  # a slow disk or a busy data worker on one rank
            yield torch.randn(8, 16), torch.randn(8, 1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 1)

    def forward(self, x, y):
        time.sleep(0.1)  # device time
        return torch.nn.functional.mse_loss(self.lin(x), y)


loader = Loader()
model = torch.nn.parallel.DistributedDataParallel(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
"""
AFTER = """
run.finish()
dist.destroy_process_group()
"""


def recipe() -> str:
    """The python code block under docs/ranks.md's "Your own training code (the recipe)"."""
    text = (ROOT / "docs" / "ranks.md").read_text(encoding="utf-8")
    section = text.split("### Your own training code (the recipe)", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "docs/ranks.md: the recipe's code block is gone"
    return found.group(1)


def test_the_documented_recipe_under_torchrun_gives_the_watch_and_the_ranks_page(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(BEFORE + recipe() + AFTER, encoding="utf-8")
    store = tmp_path / "runs" / "reslog.db"  # reslog's default, in the job's folder
    open_store(str(store), create=True).dispose()  # a watch reads existing stores
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("RESLOG_STORE", None)
    watch = subprocess.Popen(
        [sys.executable, "-m", "reslog.tools.cli", "watch", str(store), "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env=env,
        preexec_fn=restore_ctrl_c,
    )
    lines = Lines(watch)
    assert wait_until(lambda: lines.having("watching"), timeout=60), lines.lines
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "4",
            str(script),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    with running(job, watch):
        out = Lines(job)
        assert job.wait(timeout=500) == 0, "\n".join(out.lines[-40:])
        assert wait_until(lambda: len(lines.having("FINISHED")) == 4, timeout=60), lines.lines
    # The watch named rank 2, slow in data, and no other rank (the others wait in backward).
    named = [ln for ln in lines.lines if " STRAGGLER " in ln]
    assert len(named) == 1 and "my-job-rank2" in named[0], "\n".join(lines.lines)
    assert re.search(r"rank 2 on \S+: data \+\d+ ms from step (\d+)", named[0]), named[0]
    since = int(re.search(r"from step (\d+)", named[0]).group(1))
    assert FIRST <= since <= FIRST + 5
    # The Ranks page: `resplot snapshot` draws it...
    png = tmp_path / "ranks.png"
    assert resplot_main(["snapshot", str(store), "--page", "ranks", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # ...as this draws it: step time from the log() intervals, rank 2 outlined over its steps.
    cache = SeriesCache()
    source = LocalSource(parse_spec(str(store)))
    try:
        source.poll(cache)
        page = render_ranks(
            cache,
            ViewState(page="ranks"),
            size=(12.8, 8),
            dpi=100,
            fetch=lambda: source.poll(cache),
        )
    finally:
        source.close()
    view = page.view
    assert view is not None and view.complete and view.step_from == STEP_INTERVALS
    assert [r.rank for r in view.rows] == [0, 1, 2, 3]
    assert page.shown == "data" and page.pair  # the phase rank 2 is named in, over the step
    outlines = [a for a in page._artists if isinstance(a, Rectangle)]
    assert outlines and {int(o.get_y()) for o in outlines} == {2}
    for outline in outlines:
        assert FIRST - 8 <= outline.get_x() <= FIRST + 5
        assert LAST - 5 <= outline.get_x() + outline.get_width() <= LAST + 9
    # The step time every rank shares in the slow stretch is the 200 ms slower one.
    step = view.matrices["step"].mean
    middle = view.column_of((FIRST + LAST) // 2)
    before = view.column_of(FIRST // 2)
    assert all(step[r, middle] > step[r, before] + 0.1 for r in range(4)), step[:, [before, middle]]


def test_the_recipe_block_is_found(tmp_path):
    """The extraction itself: the block is the doc's, not empty, and compiles."""
    code = recipe()
    assert "reslog.init(" in code and 'run.timer("data")' in code
    compile(BEFORE + code + AFTER, str(tmp_path / "train.py"), "exec")
