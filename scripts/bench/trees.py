"""The code before, for benchmarks that run it side by side with this tree in one run."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def tree_of(rev: str, into: Path) -> Path:
    """The repository at `rev`, unpacked into `into` (the baseline's code, untouched by this
    tree's files)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def alternated(
    before: str | None, into: Path, pairs: int, run: Callable[[Path], dict]
) -> dict[str, list[dict]]:
    """`run(tree)` `pairs` times for this tree and, with `before`, for that revision's code
    (unpacked into `into`), the order swapped every pair (what runs first runs on a cooler
    machine): each tree's results by its name ("this tree", or the revision)."""
    trees = {"this tree": ROOT}
    if before:
        trees = {before: tree_of(before, into), **trees}
    rows: dict[str, list[dict]] = {name: [] for name in trees}
    for pair in range(pairs):
        order = list(trees.items())
        for name, tree in order if pair % 2 == 0 else order[::-1]:
            rows[name].append(run(tree))
    return rows
