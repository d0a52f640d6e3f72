"""Pieces several benchmarks share: their Markdown section in a results file, the writer
processes the store benchmarks start at once, and the test suite's sshd for those that poll
over SSH."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def update_section(path: Path, section: str, text: str) -> None:
    """Replace the section headed `section` in the file (or append it), leaving others alone."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if section in old:
        start = old.index(section)
        nxt = old.find("\n## ", start + len(section))
        old = old[:start] + (old[nxt + 1 :] if nxt != -1 else "")
    path.write_text(old.rstrip("\n") + "\n\n" + text)


def built_marker(path: Path) -> Path | None:
    """For a store a benchmark builds once and keeps (in the temp folder): None when it is
    built at the store schema's current revision; else the marker file to write (with
    built()) once it is, what a half-built or older one left removed (a store kept from
    before a schema change would stop the benchmark at `reslog upgrade`)."""
    marker = path.with_name(path.name + ".done")
    if marker.exists() and marker.read_text() == built():
        return None
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    return marker


def built() -> str:
    """What a built store's marker says: the schema revision it was built at."""
    from schema.store.revision import HEAD_REVISION

    return f"schema {HEAD_REVISION}"


def run_text(argv: Sequence[object], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`argv` (each item through str) run to its end, its output captured as text."""
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, **kwargs)


def start_writers(
    code: str, store: str, argv: list[str], count: int, tree: Path, env: dict
) -> list[subprocess.Popen]:
    """`count` Python processes running `code` in `tree`, each with argv (store, its index,
    *argv), their output piped as text."""
    return [
        subprocess.Popen(
            [sys.executable, "-c", code, store, str(i), *argv],
            env=env,
            cwd=tree,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]


@contextmanager
def ssh_env(root: Path) -> Iterator[Any]:
    """tests/fixtures/sshd.py's target and jump host under `root`, stopped on the way out
    (the repository's root must be on sys.path)."""
    from tests.fixtures.sshd import start_env

    env = start_env(root)
    try:
        yield env
    finally:
        env.target.stop()
        env.jump.stop()
