"""Streaming readers for raw text: ``.jsonl``, ``.json`` (a top-level array), ``.parquet``.

Records look like ``{id, data_src, category, title, content}``; only the text field (``content``
by default) is read. Nothing loads a whole file: jsonl goes line by line, a JSON array is parsed
element by element from fixed-size chunks, parquet is read one row group at a time.

Bad input never stops a read. Every malformed line, record or row is counted in a `ReadStats`
with its file and line (row for parquet), the first `max_problems` are kept verbatim, and the
good records around it are still yielded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from trainer.parts import RankPart

SUFFIXES = (".jsonl", ".json", ".parquet")

# A decode error this far before the end of the buffer cannot be cured by reading more data
# (the longest JSON literal that can be cut in half, "-Infinity" or "\uXXXX", is shorter).
_SAFE_TAIL = 16
_CHUNK_CHARS = 1 << 16
_MAX_ELEMENT_CHARS = 256 << 20
_WS = re.compile(r"[ \t\n\r]*")
# Where to pick up after a malformed array element: the next "," that is followed by an object.
_RESYNC = re.compile(r",[ \t\n\r]*(?=\{)")


@dataclass(frozen=True)
class Problem:
    """One malformed input: ``path:line: message`` (line = row number for parquet, 1-based)."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class ReadStats:
    """Counts for a read. ``problems`` keeps the first ``max_problems``; ``bad`` counts them all."""

    files: int = 0
    records: int = 0  # texts yielded
    empty: int = 0  # records whose text is "" (skipped, not a problem)
    bad: int = 0
    chars: int = 0
    problems: list[Problem] = field(default_factory=list)
    max_problems: int = 20

    def problem(self, path: str | Path, line: int, message: str) -> None:
        self.bad += 1
        if len(self.problems) < self.max_problems:
            self.problems.append(Problem(str(path), line, message))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["problems"] = [str(p) for p in self.problems]
        del d["max_problems"]
        return d

    def summary(self) -> str:
        s = f"{self.records} records from {self.files} files, {self.bad} malformed"
        s += f", {self.empty} empty"
        if self.bad:
            shown = "\n".join(f"  {p}" for p in self.problems)
            more = self.bad - len(self.problems)
            s += "\n" + shown + (f"\n  ... and {more} more" if more > 0 else "")
        return s


def find_sources(inputs: Iterable[str | Path]) -> list[Path]:
    """Expand files and directories (recursively) into a sorted list of readable sources."""
    found: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found.extend(
                sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in SUFFIXES)
            )
        elif p.is_file():
            if p.suffix.lower() not in SUFFIXES:
                raise ValueError(f"{p}: unsupported file type (expected one of {SUFFIXES})")
            found.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or directory")
    seen: set[Path] = set()
    unique = [f for f in found if not (f.resolve() in seen or seen.add(f.resolve()))]
    if not unique:
        raise ValueError(f"no {'/'.join(SUFFIXES)} files under {[str(i) for i in inputs]}")
    return unique


def _text_of(obj: object, text_field: str) -> tuple[str | None, str | None]:
    """(text, None) for a good record, (None, reason) for a bad one."""
    if not isinstance(obj, dict):
        return None, f"record is {type(obj).__name__}, expected a JSON object"
    if text_field not in obj:
        return None, f"missing text field {text_field!r}"
    text = obj[text_field]
    if not isinstance(text, str):
        return None, f"text field {text_field!r} is {type(text).__name__}, expected string"
    return text, None


# One record of a file: (line, text, None) when good, (line, None, reason) when bad.
_Record = tuple[int, str | None, str | None]


def _count_file(stats: ReadStats | None) -> ReadStats:
    """The caller's stats, or fresh ones, with this file counted (every reader starts so)."""
    stats = stats if stats is not None else ReadStats()
    stats.files += 1
    return stats


def _accept(text: str | None, reason: str | None, path, line, stats: ReadStats) -> str | None:
    if reason is not None:
        stats.problem(path, line, reason)
        return None
    assert text is not None
    if not text:
        stats.empty += 1
        return None
    stats.records += 1
    stats.chars += len(text)
    return text


class _ChunkedText:
    """A sliding window over a text file with line numbers for positions in the window."""

    def __init__(self, f, chunk_chars: int):
        self.f = f
        self.chunk_chars = chunk_chars
        self.buf = ""
        self.eof = False
        # Line numbers are counted incrementally: queries mostly move forward.
        self._mark_pos, self._mark_line = 0, 1

    def more(self, n: int = 0) -> bool:
        """Append the next ``max(n, chunk_chars)`` characters; False at end of file."""
        if self.eof:
            return False
        data = self.f.read(max(n, self.chunk_chars))
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def skip_ws(self, pos: int) -> int:
        while True:
            pos = _WS.match(self.buf, pos).end()
            if pos < len(self.buf) or not self.more():
                return pos

    def compact(self, pos: int) -> int:
        """Drop consumed text once it outweighs a chunk; returns ``pos`` in the new window."""
        if pos < self.chunk_chars:
            return pos
        self._mark_line = self.line(pos)
        self._mark_pos = 0
        self.buf = self.buf[pos:]
        return 0

    def line(self, pos: int) -> int:
        if pos >= self._mark_pos:
            self._mark_line += self.buf.count("\n", self._mark_pos, pos)
        else:
            self._mark_line -= self.buf.count("\n", pos, self._mark_pos)
        self._mark_pos = pos
        return self._mark_line


def iter_json_array(
    path: str | Path,
    stats: ReadStats | None = None,
    chunk_chars: int = _CHUNK_CHARS,
) -> Iterator[tuple[int, object]]:
    """Yield ``(line, element)`` for each element of a top-level JSON array, reading in chunks.

    A malformed element is recorded in ``stats`` and reading resumes at the next ``, {`` (so one
    broken object may count as more than one problem if it contains nested objects). A truncated
    file yields every complete element before the cut and records the cut as one problem.
    """
    stats = stats if stats is not None else ReadStats()
    decoder = json.JSONDecoder()
    # errors="replace": a stray invalid byte becomes U+FFFD instead of losing the whole file.
    with open(path, encoding="utf-8", errors="replace") as f:
        w = _ChunkedText(f, chunk_chars)
        pos = w.skip_ws(0)
        if pos >= len(w.buf):
            stats.problem(path, 1, "empty file, expected a JSON array")
            return
        if w.buf[pos] != "[":
            stats.problem(path, w.line(pos), "not a JSON array (first character is not '[')")
            return
        pos = w.skip_ws(pos + 1)
        if pos < len(w.buf) and w.buf[pos] == "]":
            return
        while True:
            pos = w.compact(pos)
            try:
                obj, end = decoder.raw_decode(w.buf, pos)
            except json.JSONDecodeError as e:
                unterminated = e.msg.startswith("Unterminated string")
                final = w.eof or (not unterminated and e.pos + _SAFE_TAIL < len(w.buf))
                if not final and len(w.buf) - pos <= _MAX_ELEMENT_CHARS:
                    w.more(len(w.buf) - pos)  # doubling: a huge element is re-parsed O(log n) times
                    continue
                where = w.line(e.pos)
                if w.eof and (e.pos >= len(w.buf) - 1 or unterminated):
                    stats.problem(path, where, f"truncated JSON array: {e.msg}")
                    return
                stats.problem(path, where, f"bad JSON element: {e.msg}")
                pos = _resync(w, e.pos)
                if pos < 0:
                    return
                continue
            # A value that ends exactly at the window's edge may be a number cut in half.
            if end >= len(w.buf) and w.more():
                continue
            yield w.line(pos), obj
            pos = w.skip_ws(end)
            if pos >= len(w.buf):
                stats.problem(path, w.line(pos), "truncated JSON array: missing ']'")
                return
            c = w.buf[pos]
            if c == "]":
                return
            if c != ",":
                stats.problem(path, w.line(pos), f"expected ',' or ']' after element, got {c!r}")
                pos = _resync(w, pos)
                if pos < 0:
                    return
                continue
            pos = w.skip_ws(pos + 1)


def _resync(w: _ChunkedText, start: int) -> int:
    """Position of the next element after a malformed one, or -1 at end of file."""
    while True:
        m = _RESYNC.search(w.buf, start)
        if m:
            return m.end()
        start = max(0, len(w.buf) - 1)
        if not w.more():
            return -1


@dataclass(frozen=True)
class TextReader:
    """Reads raw files: the ``text_field`` of each record in this rank's ``part`` of each file.

    ``chunk_chars``: how much of a ``.json`` file is parsed at a time. Every method counts the
    file in ``stats`` (fresh ones when None) and every malformed record as a problem there.
    """

    text_field: str = "content"
    part: RankPart = field(default_factory=RankPart)
    chunk_chars: int = _CHUNK_CHARS

    def read_texts(
        self, paths: Iterable[str | Path], stats: ReadStats | None = None
    ) -> Iterator[str]:
        """Texts of every file in ``paths`` in order (see `read_file`)."""
        stats = stats if stats is not None else ReadStats()
        for p in paths:
            yield from self.read_file(p, stats)

    def read_file(self, path: str | Path, stats: ReadStats | None = None) -> Iterator[str]:
        """Texts of one file, read by the reader for its suffix; the rest counted in ``stats``."""
        readers = {".jsonl": self._jsonl, ".json": self._json, ".parquet": self._parquet}
        records = readers.get(Path(path).suffix.lower())
        if records is None:
            raise ValueError(f"{path}: unsupported file type (expected one of {SUFFIXES})")
        stats = _count_file(stats)
        for line, text, reason in records(path, stats):
            text = _accept(text, reason, path, line, stats)
            if text is not None:
                yield text

    # Each reader yields (line, text, reason) for the records of this rank's part: a text or the
    # reason it is bad; problems found before a record is parsed go to ``stats`` directly.

    def _jsonl(self, path: str | Path, stats: ReadStats) -> Iterator[_Record]:
        """A JSON-lines file; rank r of w takes non-blank lines r, r+w, r+2w, ..."""
        index = 0
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                mine = self.part.owns(index)
                index += 1
                if not mine:
                    continue
                try:
                    obj = json.loads(raw.decode("utf-8"))
                except UnicodeDecodeError as e:
                    stats.problem(path, lineno, f"invalid UTF-8: {e.reason} at byte {e.start}")
                    continue
                except json.JSONDecodeError as e:
                    stats.problem(path, lineno, f"bad JSON: {e.msg} (column {e.colno})")
                    continue
                yield (lineno, *_text_of(obj, self.text_field))

    def _json(self, path: str | Path, stats: ReadStats) -> Iterator[_Record]:
        """A JSON array of records; rank r of w takes elements r, r+w, r+2w, ..."""
        elements = iter_json_array(path, stats, self.chunk_chars)
        for index, (line, obj) in enumerate(elements):
            if self.part.owns(index):
                yield (line, *_text_of(obj, self.text_field))

    def _parquet(self, path: str | Path, stats: ReadStats) -> Iterator[_Record]:
        """A parquet file, one row group at a time; rank r of w takes groups r, r+w, ..."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        text_field = self.text_field
        try:
            pf = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as e:
            stats.problem(path, 1, f"not a readable parquet file: {e}")
            return
        names = pf.schema_arrow.names
        if text_field not in names:
            stats.problem(path, 1, f"missing text column {text_field!r} (columns: {names})")
            return
        col_type = pf.schema_arrow.field(text_field).type
        if not (pa.types.is_string(col_type) or pa.types.is_large_string(col_type)):
            stats.problem(path, 1, f"text column {text_field!r} is {col_type}, expected string")
            return
        meta = pf.metadata
        first_row = [0]
        for g in range(meta.num_row_groups):
            first_row.append(first_row[-1] + meta.row_group(g).num_rows)
        for g in self.part.indices(meta.num_row_groups):
            try:
                column = pf.read_row_group(g, columns=[text_field]).column(0)
            except (pa.ArrowException, OSError) as e:
                stats.problem(path, first_row[g] + 1, f"unreadable row group {g}: {e}")
                continue
            for i, text in enumerate(column.to_pylist()):
                reason = f"text column {text_field!r} is null" if text is None else None
                yield first_row[g] + i + 1, text, reason
