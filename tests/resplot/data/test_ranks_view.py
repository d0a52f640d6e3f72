"""The Ranks page's data (resplot/data/ranks.py): a job's rank x step matrices from two "hosts",
each a store reached through its own source (the agent, as over SSH), joined by job id; every
cell's extremes checked against the raw points in the stores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from resplot.data import alerts
from resplot.data.cache import SeriesCache
from resplot.data.ranks import job_view, jobs_in
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from schema.store import buckets, read
from schema.store.connect import open_store
from tests.reslog.tools.test_jobs import HOSTS, log_steps, open_job, stall
from tests.reslog.training.test_run_health import wait_until
from tests.schema.test_rank_rules import (
    WAITING_IN_BACKWARD,
    blocked_here,
    stack_of_a_thread_blocked_in,
)


@pytest.fixture
def job_cache(tmp_path, monkeypatch):
    """A finished 4-rank job of 1,500 steps (rank 2 slow in data for steps 400-699), read into
    one cache through a source per host."""
    job = open_job(tmp_path, monkeypatch, group="job-v")
    try:
        log_steps(job, 1, 1500, slow=(2, 0.2, 400, 699), seed=3)
    finally:
        for run in job.values():
            run.finish()
    cache = SeriesCache()
    sources = [LocalSource(parse_spec(str(tmp_path / f"{h}.db"))) for h in ("gpu-a", "gpu-b")]
    for source in sources:
        source.poll(cache)
    yield cache, sources, tmp_path
    for source in sources:
        source.close()


def complete_view(cache, sources, lo, hi, columns):
    def attempt():
        view = job_view(cache, "job-v", lo, hi, columns)
        if view is not None and view.complete:
            return view
        for source in sources:
            source.poll(cache)
        return None

    view = wait_until(attempt, timeout=60, every=0.01)
    assert view is not None, "the job view never completed"
    return view


def raw(tmp_path) -> dict[tuple[int, str], tuple[np.ndarray, np.ndarray]]:
    """(rank, phase) -> (steps, values) straight from the stores."""
    out = {}
    for host in ("gpu-a", "gpu-b"):
        engine = open_store(str(tmp_path / f"{host}.db"), readonly=True)
        try:
            with engine.connect() as conn:
                names = read.key_names(conn)
                for run_id, run in read.list_runs(conn):
                    for kid, name in names.items():
                        steps, _, values = read.series(engine, run_id, kid)
                        if steps:
                            out[(run.rank, name.split("/")[1])] = (
                                np.array(steps),
                                np.array(values),
                            )
        finally:
            engine.dispose()
    return out


@pytest.mark.parametrize(("lo", "hi", "columns"), [(-math.inf, math.inf, 24), (300, 419, 200)])
def test_every_cell_holds_the_exact_extremes_of_its_steps(job_cache, lo, hi, columns):
    cache, sources, tmp_path = job_cache
    assert list(jobs_in(cache)) == ["job-v"]
    view = complete_view(cache, sources, lo, hi, columns)
    assert [(r.rank, r.host) for r in view.rows] == sorted((r, h) for r, h in HOSTS.items())
    assert view.hosts == [("gpu-a", range(0, 2)), ("gpu-b", range(2, 4))]
    assert list(view.matrices) == [
        "step",
        "data",
        "forward",
        "backward",
        "optimizer",
        "comm",
        "own work",
    ]
    assert (view.level == 0) == (columns == 200) and view.missing == []
    cols = len(view.edges) - 1
    assert cols <= columns
    truth = raw(tmp_path)
    for rank in HOSTS:  # a rank's own work: its step minus its wait in comm, step by step
        (steps, step), (_, comm) = truth[(rank, "step")], truth[(rank, "comm")]
        truth[(rank, "own work")] = (steps, step - comm)
    first = 1 if lo == -math.inf else lo
    last = 1500 if hi == math.inf else hi
    for name, m in view.matrices.items():
        assert m.vmax.shape == (4, cols)
        for i, row in enumerate(view.rows):
            steps, values = truth[(row.rank, name)]
            for c in range(cols):
                inside = (steps >= max(view.edges[c], first)) & (steps < view.edges[c + 1])
                inside &= steps <= last
                if not inside.any():
                    assert math.isnan(m.vmax[i, c])
                    continue
                if name == "own work" and view.level != 0:
                    # Zoomed out, a cell of own work is the mean of its steps (step minus comm
                    # bucket by bucket: their extremes do not give its own).
                    assert m.vmax[i, c] == m.vmin[i, c] == m.mean[i, c]
                    assert m.mean[i, c] == pytest.approx(values[inside].mean(), rel=1e-6)
                    continue
                assert m.vmax[i, c] == pytest.approx(values[inside].max(), rel=1e-12), (
                    name,
                    row.rank,
                    c,
                )
                assert m.vmin[i, c] == pytest.approx(values[inside].min(), rel=1e-12)
                if name != "own work":  # (a difference of two floats: ties may fall apart)
                    assert steps[inside][values[inside].argmax()] == m.max_at[i, c]
                assert m.mean[i, c] == pytest.approx(values[inside].mean(), rel=0.05)


def test_the_straggler_is_marked_and_a_cell_hovers_its_breakdown(job_cache):
    cache, sources, _ = job_cache
    view = complete_view(cache, sources, 350, 750, 400)  # raw: judged every step
    assert view.judged_per == 1
    assert [(s.rank, s.phase, s.since, s.until) for s in view.stragglers] == [(2, "data", 400, 699)]
    (mark,) = view.marks
    assert mark.kind == "straggler" and mark.rows == (2,) and (mark.first, mark.last) == (400, 699)
    column = view.column_of(500)
    text = view.cell_text(2, column)
    assert text.startswith("rank 2 on gpu-b, step 500")
    assert "  data: 20" in text and "  comm: " in text
    # Zoomed out, the rule judges bucket means: still rank 2's data, at bucket resolution.
    wide = complete_view(cache, sources, -math.inf, math.inf, 24)
    assert wide.level != 0 and wide.judged_per == buckets.width(wide.level) > 1
    assert [(s.rank, s.phase) for s in wide.stragglers] == [(2, "data")]
    assert 384 <= wide.stragglers[0].since <= 448


@pytest.mark.slow
def test_a_hung_job_marks_the_rank_that_never_came(tmp_path, monkeypatch):
    job = open_job(tmp_path, monkeypatch, group="job-h")
    log_steps(job, 1, 2)
    cache = SeriesCache()
    sources = [LocalSource(parse_spec(str(tmp_path / f"{h}.db"))) for h in ("gpu-a", "gpu-b")]
    try:
        # The viewer is watching (its live cursors at the stores' ends) as the job goes on.
        assert wait_until(lambda: [s.poll(cache) for s in sources] and len(cache.runs()) == 4)
        log_steps(job, 3, 60, slow=(3, 0.2, 25, 60))  # rank 3 slow in data up to the hang
        blocked = stack_of_a_thread_blocked_in(blocked_here)
        for rank in (0, 2, 3):
            stall(tmp_path / f"{HOSTS[rank]}.db", job[rank].uid, WAITING_IN_BACKWARD)
        stall(tmp_path / "gpu-a.db", job[1].uid, blocked)

        def hung():
            for source in sources:
                source.poll(cache)
            view = job_view(cache, "job-h", -math.inf, math.inf, 50)
            return view if view is not None and view.hang is not None else None

        view = wait_until(hung, timeout=60)
        assert view is not None and view.hang.culprits == [1]
        hang = [m for m in view.marks if m.kind == "hang"]
        assert len(hang) == 1 and hang[0].rows == (1,) and "blocked_here" in hang[0].message

        # The run table's and the notifications' alerts: on the run of the rank each names,
        # from the points seen live (once every rank's step 60 has arrived).
        def live_to_60():
            for source in sources:
                source.poll(cache)
            return all(
                (live := cache.live(r.ref, "time/step")) is not None and live[0][-1] == 60
                for r in cache.runs()
            )

        assert wait_until(live_to_60, timeout=60)
        found = alerts.check_all(cache)
        rank_of = {r.ref: r.rank for r in cache.runs()}
        named = [(rank_of[ref], a) for ref, got in found.items() for a in got]
        job_alerts = sorted((r, a.kind) for r, a in named if a.kind in ("hang", "straggler"))
        assert job_alerts == [(1, "hang"), (3, "straggler")]
        straggler = next(a for _, a in named if a.kind == "straggler")
        assert straggler.message.startswith("rank 3 on gpu-b: data +")
        assert "from step 25" in straggler.message
    finally:
        for source in sources:
            source.close()
        for run in job.values():
            run.finish()
