"""A small demo corpus from text every Python install has: the standard library's ``.py`` sources.

    python -m trainer.corpus --out runs/demo/corpus/stdlib.jsonl [--max-mb 8] [--include-tests]

Writes one JSON line per source file, ``{id, data_src, category, title, content}``, in sorted path
order until the size cap is reached, so the same Python installation always gives the same file.
Sources that are not valid UTF-8 (a few deliberately odd test files) are skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from schema.store.user_files import replacing

DATA_SRC = "python-stdlib"
# Third-party code and the regression-test suites (most of the bytes, least typical code).
_SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}
_TEST_DIRS = {"test", "tests", "idle_test"}


@dataclass(frozen=True)
class CorpusInfo:
    path: Path
    documents: int
    bytes: int
    skipped: int
    root: Path


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def iter_sources(root: Path, include_tests: bool = False) -> Iterator[Path]:
    skip = _SKIP_DIRS if include_tests else _SKIP_DIRS | _TEST_DIRS
    for p in sorted(root.rglob("*.py"), key=lambda q: q.relative_to(root).as_posix()):
        if skip.isdisjoint(p.relative_to(root).parts[:-1]) and p.is_file():
            yield p


def build_corpus(
    out: str | Path,
    *,
    max_bytes: int = 8_000_000,
    root: str | Path | None = None,
    include_tests: bool = False,
) -> CorpusInfo:
    """Write the corpus to ``out`` (jsonl, atomically) and describe it."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise FileNotFoundError(f"no source folder at {root}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    documents = total = skipped = 0
    with replacing(out, "w") as f:
        for p in iter_sources(root, include_tests):
            rel = p.relative_to(root).as_posix()
            try:
                content = p.read_bytes().decode("utf-8")
            except (UnicodeDecodeError, OSError):
                skipped += 1
                continue
            if not content.strip():
                continue
            size = len(content.encode("utf-8"))
            if total + size > max_bytes and documents:
                break
            parts = rel.split("/")
            record = {
                "id": hashlib.sha1(rel.encode()).hexdigest()[:16],
                "data_src": DATA_SRC,
                "category": parts[0] if len(parts) > 1 else "module",
                "title": rel,
                "content": content,
            }
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            documents += 1
            total += size
    return CorpusInfo(out, documents, total, skipped, root)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.corpus", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="jsonl file to write")
    p.add_argument("--max-mb", type=float, default=8.0, help="stop after this many MB of text")
    p.add_argument("--root", default=None, help="source folder (default: this Python's stdlib)")
    p.add_argument("--include-tests", action="store_true", help="also take the test suites")
    args = p.parse_args(argv)
    info = build_corpus(
        args.out, max_bytes=int(args.max_mb * 1e6), root=args.root, include_tests=args.include_tests
    )
    mb = info.bytes / 1e6
    print(f"wrote {info.documents} documents ({mb:.1f} MB) from {info.root} to {info.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
