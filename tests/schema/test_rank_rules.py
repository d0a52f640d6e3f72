"""The rules that judge a job's ranks (schema/rules/ranks.py, stragglers.py, hangs.py), on synthetic
phase timings and stall bodies. The same rules run against real torchrun jobs in
tests/trainer/test_ranks_torchrun.py."""

from __future__ import annotations

import random
import threading
import time

import pytest

from reslog.training.stall import thread_stacks
from schema.rules import hangs, ranks
from schema.rules.stragglers import StragglerDetector, StragglerRule

HOSTS = {0: "gpu-a", 1: "gpu-a", 2: "gpu-b", 3: "gpu-b"}


def healthy_step(rng: random.Random) -> dict[str, float]:
    """One rank's phases of a ~100 ms step with ordinary jitter (and a rare 40 ms hiccup)."""
    phases = {
        "data": rng.uniform(0.001, 0.004),
        "h2d": rng.uniform(0.0005, 0.001),
        "forward": rng.gauss(0.030, 0.003),
        "backward": rng.gauss(0.050, 0.004),
        "optimizer": rng.gauss(0.010, 0.001),
    }
    if rng.random() < 0.03:
        phases[rng.choice(list(phases))] += 0.040
    return phases


def job_steps(n, slow=None, seed=0):
    """(rank, step, phases) of 4 lockstep ranks; `slow` = (rank, phase, seconds, first, last):
    extra own work, which the other ranks wait out in comm."""
    rng = random.Random(seed)
    rows = []
    for step in range(1, n + 1):
        own = {r: healthy_step(rng) for r in HOSTS}
        if slow and slow[3] <= step <= slow[4]:
            own[slow[0]][slow[1]] += slow[2]
        work = {r: sum(p.values()) for r, p in own.items()}
        finish = max(work.values()) + 0.002
        for r in HOSTS:
            phases = dict(own[r], comm=finish - work[r])
            phases["step"] = sum(phases.values())
            rows.append((r, step, phases))
    # Ranks flush independently: interleave them out of step order between ranks.
    rng.shuffle(rows)
    return sorted(rows, key=lambda row: (row[1] + rng.randint(0, 3), row[0]))


def test_a_healthy_job_with_jitter_names_no_straggler():
    for seed in range(5):
        det = StragglerDetector(HOSTS)
        assert det.add_many(job_steps(600, seed=seed)) == []
        assert det.finish() == [] and det.found == []


def test_a_rank_slow_in_data_is_named_with_phase_host_excess_and_start():
    det = StragglerDetector(HOSTS)
    changed = det.add_many(job_steps(300, slow=(2, "data", 0.2, 100, 149)))
    changed += det.finish()
    assert len(det.found) == 1, [s.message() for s in det.found]
    s = det.found[0]
    assert (s.rank, s.host, s.phase) == (2, "gpu-b", "data")
    assert 100 <= s.since <= 102 and s.found_at - 100 < 100
    assert s.until is not None and 147 <= s.until <= 149
    assert 0.18 < s.excess_s < 0.22
    assert s.others_wait_s is not None and s.others_wait_s > 0.15
    assert s.message().startswith("rank 2 on gpu-b: data +")
    assert "from step 10" in s.message() and "the other ranks wait" in s.message()
    # Said twice: when named, and when it recovered (the finding with its end filled in).
    assert [c.until for c in changed] == [None, s.until] and changed[1] == s


def test_a_jittery_step_just_before_a_stretch_is_not_its_start():
    """A rank stalled once by a busy machine 6 steps before its fault: the stretch still opens
    at the fault (the suffix rule alone said 104, as seen under torchrun in CI)."""
    rows = job_steps(200, slow=(3, "forward", 0.15, 110, 150))
    for rank, step, phases in rows:
        if (rank, step) == (3, 104):
            phases["forward"] += 0.15
    det = StragglerDetector(HOSTS)
    det.add_many(rows)
    det.finish()
    assert [(s.rank, s.phase) for s in det.found] == [(3, "forward")]
    assert det.found[0].since == 110


def test_the_ranks_that_wait_for_a_slow_forward_are_not_named():
    det = StragglerDetector(HOSTS)
    det.add_many(job_steps(200, slow=(1, "forward", 0.08, 50, 120)))
    det.finish()
    assert [(s.rank, s.phase) for s in det.found] == [(1, "forward")]


def test_a_short_window_says_the_last_slow_step_when_it_recovers():
    """Zoomed out, the Ranks page judges bucket means with a window of a few buckets: the rule
    recovers only once every mark is fast again, after the last slow one left the window; the
    finding still ends at that last slow step, not at its first."""
    det = StragglerDetector(HOSTS, StragglerRule(window=3))
    for step in range(4, 400, 8):  # bucket middles, 8 steps a bucket
        slow = 0.2 if 100 <= step <= 200 else 0.0
        for rank in HOSTS:
            extra = slow if rank == 2 else 0.0
            det.add(rank, step, {"data": 0.002 + extra, "forward": 0.1, "step": 0.3 + extra})
    det.finish()
    assert [(s.rank, s.phase, s.since, s.until) for s in det.found] == [(2, "data", 100, 196)]


def test_two_ranks_a_rank_that_stopped_logging_and_late_points():
    det = StragglerDetector({0: "a", 1: "b", 2: "c"}, StragglerRule(window=10, lag=4))
    for step in range(1, 80):
        slow = 0.05 if step >= 20 else 0.0
        det.add(0, step, {"forward": 0.02, "step": 0.05})
        det.add(1, step, {"forward": 0.02 + slow, "step": 0.05 + slow})
        if step < 10:
            det.add(2, step, {"forward": 0.02, "step": 0.05})
        if step == 30:  # rank 2's run ended at step 10: the steps since are judged without it
            assert det.found == []
            det.retire(2)
    assert [(s.rank, s.since) for s in det.found] == [(1, 20)]
    assert det.found[0].found_at < 40
    assert det.add(2, 5, {"forward": 9.0}) == []  # a step already judged stays judged


def test_rule_arguments_are_checked():
    with pytest.raises(ValueError, match="window"):
        StragglerRule(window=1)


def test_ranks_helpers():
    assert ranks.phase_of("time/forward") == "forward"
    assert ranks.phase_of("time/rank3/step") is None and ranks.phase_of("train/loss") is None
    assert ranks.own_work(["comm", "step", "optimizer", "mine", "data"]) == [
        "data",
        "optimizer",
        "mine",
    ]
    assert ranks.ranks_text([3, 0, 1, 2, 7]) == "ranks 0-3, 7"
    assert ranks.ranks_text([1]) == "rank 1"
    assert ranks.rank_label(2, "gpu-b") == "rank 2 on gpu-b"


# ---------------------------------------------------------------------------------------- hangs


def blocked_here(ready: threading.Event, release: threading.Event) -> None:
    ready.set()
    release.wait(10)


def stack_of_a_thread_blocked_in(func) -> str:
    """thread_stacks() as the writer stores it, taken while a real thread sits in `func`."""
    ready, release = threading.Event(), threading.Event()
    t = threading.Thread(target=func, args=(ready, release), name="trainer")
    t.start()
    ready.wait(5)
    time.sleep(0.05)
    try:
        return thread_stacks(t)
    finally:
        release.set()
        t.join()


WAITING_IN_BACKWARD = """Thread "MainThread" (the thread that called reslog.init), daemon=False:
  File "/app/train.py", line 300, in train_step
    (loss / accum).backward()
  File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 625, in backward
    torch.autograd.backward(
  File "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py", line 354, in backward
    _engine_run_backward(
  File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 841, in _engine_run_bac\
kward
    return Variable._execution_engine.run_backward(

Thread "reslog-writer", daemon=True:
  File "/app/reslog/training/writer.py", line 290, in _loop
    self._watch_stall(time.time())
"""


def test_a_real_stack_is_parsed_and_the_blocking_frame_found():
    body = stack_of_a_thread_blocked_in(blocked_here)
    frames = hangs.training_frames(body)
    assert frames[-1].func == "wait" and "blocked_here" in [f.func for f in frames]
    assert hangs.where_stuck(frames).startswith("schema/test_rank_rules.py:")
    assert (
        "in blocked_here: release.wait(10) (innermost: python3.11/threading.py:"
        in hangs.where_stuck(frames)
    )
    assert hangs.collective_of(frames) is None
    frames = hangs.training_frames(WAITING_IN_BACKWARD)
    assert frames[-1].func == "_engine_run_backward" and frames[0].line == 300
    assert "all-reduce" in hangs.collective_of(frames)


def test_join_names_the_rank_that_never_entered_with_its_frames():
    blocked = stack_of_a_thread_blocked_in(blocked_here)
    job = [
        hangs.RankStall(0, "gpu-a", "stalled", WAITING_IN_BACKWARD, 100.0, 41),
        hangs.RankStall(1, "gpu-a", "stalled", blocked, 100.5, 41),
        hangs.RankStall(2, "gpu-b", "stalled", WAITING_IN_BACKWARD, 100.2, 41),
        hangs.RankStall(3, "gpu-b", "stalled", WAITING_IN_BACKWARD, 100.1, 41),
    ]
    hang = hangs.join(job, 4)
    assert hang is not None
    assert hang.inside == [0, 2, 3] and hang.culprits == [1]
    text = hang.message()
    assert text.startswith("hung collective after step 41: ranks 0, 2, 3 wait in backward")
    assert "rank 1 on gpu-a never entered it: stuck at" in text
    assert "in blocked_here" in text and "test_rank_rules.py" in text
    assert hang.since == 100.0


def test_join_waits_for_every_rank_and_names_dead_or_missing_ones():
    job = [
        hangs.RankStall(0, "a", "stalled", WAITING_IN_BACKWARD),
        hangs.RankStall(1, "a", "running"),  # its stall event is a flush away
    ]
    assert hangs.join(job, 2) is None
    job[1] = hangs.RankStall(1, "a", "crashed")
    hang = hangs.join(job, 2)
    assert hang is not None and hang.culprits == [1] and "crashed" in hang.message()
    # Only host a's store: ranks 2, 3 are elsewhere; say so.
    hang = hangs.join([hangs.RankStall(r, "a", "stalled", WAITING_IN_BACKWARD) for r in (0, 1)], 4)
    assert (
        hang is not None
        and hang.missing == [2, 3]
        and "ranks 2, 3 not in the stores" in (hang.message())
    )
    # Nobody in a collective: every rank stuck in its own code is not a collective hang.
    blocked = stack_of_a_thread_blocked_in(blocked_here)
    assert hangs.join([hangs.RankStall(r, "a", "stalled", blocked) for r in (0, 1)], 2) is None


def test_nvml_evidence_of_a_spinning_gpu():
    assert hangs.collective_signature(100.0, 80.0, 700.0)
    assert not hangs.collective_signature(100.0, 600.0, 700.0)  # really computing
    assert not hangs.collective_signature(5.0, 60.0, 700.0)  # idle
    assert not hangs.collective_signature(100.0, 80.0, None)
    job = [hangs.RankStall(r, "a", "stalled", WAITING_IN_BACKWARD) for r in (0, 1)]
    gpus = [hangs.GpuReading("a", 0, 100.0, 75.0, 700.0), hangs.GpuReading("a", 1, 3, 60, 700)]
    hang = hangs.join(job, 2, gpus)
    assert hang is not None and len(hang.evidence) == 1 and "a GPU 0: 100 % busy" in hang.detail()
