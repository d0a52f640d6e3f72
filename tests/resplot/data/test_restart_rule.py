"""The restart rule ("a series logged again from a lower step starts a new take"), written once in
schema.store.rollup, and the viewer's numpy twin of it held to it on random sequences."""

from __future__ import annotations

import random

import numpy as np
import pytest

from resplot.data.model import Series, restarts
from resplot.data.model import newest_take as newest_take_np
from schema.store.rollup import is_restart, newest_take


@pytest.mark.parametrize(
    ("steps", "walls", "kept"),
    [
        ([0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]),  # no restart
        ([0, 1, 2, 3, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4]),  # resumed at 2
        ([5, 5, 5, 6], [0, 1, 2, 3], [5, 5, 5, 6]),  # equal steps (system samples) stay
        ([0, 1, 2, 3, 1, 2, 0, 1], [0, 1, 2, 3, 4, 5, 6, 7], [0, 1]),  # two restarts
        ([0, 2, 1, 3], [0, 1, 1, 2], [0, 2, 1, 3]),  # lower step, same wall: late row, kept
    ],
)
def test_the_newer_take_wins_after_a_restart_in_both_readers(steps, walls, kept):
    keep = newest_take(steps, walls)
    assert [s for s, k in zip(steps, keep, strict=True) if k] == kept
    assert newest_take_np(np.array(steps), np.array(walls, dtype=float)).tolist() == keep


def random_series(rng: random.Random, walls_tie: bool) -> tuple[list[int], list[float]]:
    """Steps that mostly climb, sometimes repeat and sometimes fall back (a resume); wall times
    that never go back, and with `walls_tie` sometimes stand still (a late row, no restart)."""
    steps, walls = [], []
    step, wall = rng.randint(0, 5), 0.0
    for _ in range(rng.randint(0, 80)):
        r = rng.random()
        if r < 0.15:
            step = max(0, step - rng.randint(1, 12))
        elif r > 0.3:
            step += rng.randint(1, 3)
        wall += rng.choice([0.0, 1.0, 2.0] if walls_tie else [0.5, 1.0, 2.0])
        steps.append(step)
        walls.append(wall)
    return steps, walls


@pytest.mark.parametrize("seed", range(400))
def test_the_numpy_twin_keeps_what_the_predicate_keeps(seed):
    rng = random.Random(seed)
    steps, walls = random_series(rng, walls_tie=seed % 2 == 0)
    s, w = np.array(steps, dtype=np.int64), np.array(walls)
    at = [
        i
        for i in range(1, len(steps))
        if is_restart(steps[i - 1], walls[i - 1], steps[i], walls[i])
    ]
    assert restarts(s, w).tolist() == at
    assert newest_take_np(s, w).tolist() == newest_take(steps, walls)


@pytest.mark.parametrize("seed", range(200))
def test_live_points_in_any_chunks_keep_the_newer_take(seed):
    """The viewer's live tail, fed in random chunks, holds the points the store's readers show
    (wall times that always move on: every lower step is a restart)."""
    rng = random.Random(seed)
    steps, walls = random_series(rng, walls_tie=False)
    series, i = Series(), 0
    while i < len(steps):
        j = min(len(steps), i + rng.randint(1, 9))
        series.extend(
            np.array(steps[i:j], dtype=np.int64), np.array(walls[i:j]), np.arange(i, j, dtype=float)
        )
        i = j
    keep = newest_take(steps, walls)
    assert series.view()[2].astype(int).tolist() == [i for i, k in enumerate(keep) if k]
