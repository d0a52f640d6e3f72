"""The code before, for benchmarks that run it side by side with this tree in one run."""

from __future__ import annotations

import subprocess
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
