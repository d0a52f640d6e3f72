"""Writing one imported run: the run row, its keys, points (with rollups) and events, in one
transaction. A run imported again is skipped, rebuilt (`replace`: the old one deleted in the
same transaction), or, for sources that grow (TensorBoard folders), appended to: the points
read past where the last import stopped, which an `import` event records."""

from __future__ import annotations

import hashlib
import json
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select

from reslog.redact import redact
from reslog.training.values import MAX_KEY_LEN, as_json, storable_text
from schema.store.rollup_writer import RollupWriter
from schema.store.sql import positional_insert
from schema.store.status import FINISHED
from schema.store.tables import events, runs
from schema.store.writes import insert_run, resolve_keys


@dataclass
class ImportedRun:
    """A run read from another tool: series as parallel lists, in the order they were written."""

    source: str  # "tensorboard:/abs/dir", ... : the uid is derived from it
    project: str
    name: str
    series: dict[str, tuple[list[int], list[float], list[float]]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[float, int | None, str, str, str, str]] = field(default_factory=list)
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    host: str = ""
    created_at: float | None = None
    ended_at: float | None = None
    status: str = FINISHED
    # Values not imported (images, histograms, text, tables): (tag, kind) -> how many.
    skipped: dict[tuple[str, str], int] = field(default_factory=dict)
    # For a source read incrementally: where this read stopped, per file (`import` event).
    offsets: dict[str, int] = field(default_factory=dict)
    torn: list[tuple[Any, int]] = field(default_factory=list)  # (file, bytes left unread)
    # Records that failed their checksum, skipped: (file, byte offset, bytes skipped).
    corrupt: list[tuple[str, int, int]] = field(default_factory=list)
    # Judged by its content when imported again (a long Parquet file's rows fingerprinted).
    by_content: bool = False
    # Keys no store can hold (over MAX_KEY_LEN characters, a NUL): key -> [why, values].
    bad_keys: dict[str, list] = field(default_factory=dict)

    @property
    def uid(self) -> str:
        # surrogateescape: a path that is not UTF-8 keeps its own bytes (and its uid)
        raw = self.source.encode("utf-8", "surrogateescape")
        return hashlib.blake2b(raw, digest_size=16).hexdigest()

    def points(self) -> int:
        return sum(len(s[0]) for s in self.series.values())

    def add(self, key: str, step: int, wall: float, value: float) -> None:
        s = self.series.get(key)
        if s is None:
            why = key_problem(key)
            if why:
                self.bad_keys.setdefault(key, [why, 0])[1] += 1
                return
            s = self.series[key] = ([], [], [])
        s[0].append(step)
        s[1].append(wall)
        s[2].append(value)

    def skip(self, tag: str, kind: str) -> None:
        self.skipped[(tag, kind)] = self.skipped.get((tag, kind), 0) + 1

    def skipped_count(self) -> int:
        return sum(self.skipped.values())

    def skipped_text(self, limit: int = 6) -> str:
        """ "histogram: weights, grads; text: note" (at most `limit` tags a kind)."""
        by_kind: dict[str, list[str]] = {}
        for tag, kind in self.skipped:
            by_kind.setdefault(kind, []).append(tag)
        parts = []
        for kind, tags in sorted(by_kind.items()):
            more = f" and {len(tags) - limit} more" if len(tags) > limit else ""
            parts.append(f"{kind}: {', '.join(sorted(tags)[:limit])}{more}")
        return "; ".join(parts)

    def bad_key_text(self) -> str:
        """ "3 values under 1 key over 500 characters ('aaaa…')" and the like, one per reason."""
        by_why: dict[str, list] = {}
        for key, (why, n) in self.bad_keys.items():
            found = by_why.setdefault(why, [0, 0, key])
            found[0] += n
            found[1] += 1
        return "; ".join(
            f"{n:,} value{'s' * (n != 1)} under {k} key{'s' * (k != 1)} {why} (such as "
            f"{shown_key(first)})"
            for why, (n, k, first) in sorted(by_why.items())
        )

    def corrupt_lines(self) -> list[str]:
        """One line per file holding corrupt records: how many, where the first was."""
        by_file: dict[str, list[tuple[int, int]]] = {}
        for file, offset, size in self.corrupt:
            by_file.setdefault(file, []).append((offset, size))
        out = []
        for file, found in by_file.items():
            n = len(found)
            skipped = sum(size for _, size in found)
            first = f"at byte {found[0][0]}" if n == 1 else f"the first at byte {found[0][0]}"
            out.append(
                f"{file}: {n} corrupt record{'s' * (n != 1)} skipped ({first}, {skipped:,} "
                "bytes: checksum mismatch); the rest of the file imported"
            )
        return out

    def _extra_events(self, wall: float) -> list[tuple]:
        """The skipped values (one event, each tag and kind with its count), the corrupt
        records skipped (one event) and, for an incremental source, where this import stopped
        (an `import` event)."""
        out = []
        if self.bad_keys:
            body = "\n".join(
                f"{shown_key(k)}: {why}, {n} values" for k, (why, n) in self.bad_keys.items()
            )
            title = f"not imported: {self.bad_key_text()}"
            out.append((wall, None, "skipped", "warning", title[:2000], body))
        if self.corrupt:
            body = "\n".join(
                f"{file}: byte {offset} ({size} bytes)" for file, offset, size in self.corrupt
            )
            title = f"{len(self.corrupt)} corrupt records not imported (checksum mismatch)"
            out.append((wall, None, "skipped", "warning", title, body))
        if self.skipped:
            body = "\n".join(
                f"{tag} ({kind}): {n}" for (tag, kind), n in sorted(self.skipped.items())
            )
            title = (
                f"{self.skipped_count()} non-scalar values not imported "
                f"({len(self.skipped)} tags): {self.skipped_text()}"
            )
            out.append((wall, None, "skipped", "warning", title[:2000], body))
        if self.offsets:
            title = f"imported {self.points()} points from {len(self.offsets)} files"
            out.append((wall, None, "import", "info", title, json.dumps({"offsets": self.offsets})))
        return out


def key_problem(key: str) -> str:
    """Why a store cannot hold `key` as a key name ("" when it can)."""
    if len(key) > MAX_KEY_LEN:
        return f"over {MAX_KEY_LEN} characters"
    if "\x00" in key:
        return "holding a NUL character"
    return ""


def shown_key(key: str, limit: int = 40) -> str:
    """A bad key in a message: its start, escaped, and its length when cut."""
    cut = key[:limit].replace("\x00", "\\x00")
    return repr(cut + "…") + f" ({len(key):,} characters)" if len(key) > limit else repr(cut)


def exists(engine: Engine, uid: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(runs.c.id).where(runs.c.uid == uid)).first() is not None


def import_offsets(engine: Engine, uid: str) -> dict[str, int]:
    """Where the last import of run `uid` stopped, per file ({} when there is none)."""
    with engine.connect() as conn:
        body = conn.execute(
            select(events.c.body)
            .join(runs, runs.c.id == events.c.run_id)
            .where(runs.c.uid == uid, events.c.kind == "import")
            .order_by(events.c.id.desc())
            .limit(1)
        ).scalar()
    if not body:
        return {}
    try:
        return {str(k): int(v) for k, v in json.loads(body).get("offsets", {}).items()}
    except (ValueError, AttributeError, TypeError):
        return {}


def write_run(
    engine: Engine, run: ImportedRun, command: str, *, replace: bool = False, append: bool = False
) -> str:
    """Store `run` in one transaction: "new"; "replaced" (`replace`: a run of that uid is
    deleted first); "appended" (`append`: its points, events and config added to the run of
    that uid); "already" (nothing written: the uid is there and neither was asked, or there
    was nothing new to append); "unknown" (nothing written: `append`, but the run there has
    no `import` event saying where its import stopped)."""
    walls = [w for s in run.series.values() for w in (min(s[1]), max(s[1])) if s[1]]
    walls += [e[0] for e in run.events]
    now = time.time()
    with engine.begin() as conn:
        found = conn.execute(
            select(runs.c.id, runs.c.config, runs.c.heartbeat_at).where(runs.c.uid == run.uid)
        ).first()
        if found is not None and replace:
            conn.execute(runs.delete().where(runs.c.id == found.id))  # points &c. cascade
            outcome = "replaced"
        elif found is not None and append:
            if not _has_import_record(conn, found.id):
                return "unknown"  # imported by an older reslog: where it stopped is not known
            stored = json.loads(found.config or "{}")
            merged = {**stored, **redact(run.config)} if run.config else stored
            config = merged if merged != stored else None
            new = run.series or run.events or run.skipped or run.corrupt or run.bad_keys
            if not (new or config is not None):
                return "already"  # nothing new (bytes without values are read again: no harm)
            _append(conn, engine, run, found, walls, config)
            return "appended"
        elif found is not None:
            return "already"
        else:
            outcome = "new"
        created = run.created_at if run.created_at is not None else min(walls, default=now)
        ended = run.ended_at if run.ended_at is not None else max(walls, default=created)
        row = {
            "uid": run.uid,
            "project": storable_text(run.project)[:200],
            "name": storable_text(run.name)[:200],
            "status": run.status,
            "created_at": created,
            "heartbeat_at": ended,
            "ended_at": ended,
            "host": storable_text(run.host)[:255],
            "pid": None,
            "command": command,
            "config": json.dumps(redact(run.config), default=as_json),
            "summary": json.dumps(run.summary, default=as_json),
            "tags": json.dumps(run.tags),
            "notes": storable_text(run.notes),
            "run_group": storable_text(run.group)[:200],
            "job_type": storable_text(run.job_type)[:64],
        }
        run_id = insert_run(conn, row)
        _insert_points(conn, engine, run_id, run)
        insert_events(conn, engine, run_id, run.events + run._extra_events(ended))
    return outcome


def _has_import_record(conn, run_id: int) -> bool:
    query = select(events.c.id).where(events.c.run_id == run_id, events.c.kind == "import")
    return conn.execute(query.limit(1)).first() is not None


def _append(
    conn, engine: Engine, run: ImportedRun, found, walls: list[float], config: dict | None
) -> None:
    """The new points and events of a run imported before, its end and (`config`: the stored
    config with what the files add, None: nothing new) its config."""
    _insert_points(conn, engine, found.id, run)
    last = max(walls, default=found.heartbeat_at)
    insert_events(conn, engine, found.id, run.events + run._extra_events(last))
    values: dict[str, Any] = {}
    if walls and max(walls) > (found.heartbeat_at or 0.0):
        values["heartbeat_at"] = values["ended_at"] = max(walls)
    if config is not None:
        values["config"] = json.dumps(config, default=as_json)
    if values:
        conn.execute(runs.update().where(runs.c.id == found.id).values(**values))


def _insert_points(conn, engine: Engine, run_id: int, run: ImportedRun) -> None:
    ids = resolve_keys(conn, run.series)
    rows: list[tuple] = []
    # Series with the same steps and walls (to the bit) share a chunk, as keys logged together
    # do in a live run: one steps and one walls stream for them all (docs/store.md).
    groups: dict[tuple[tuple, bytes], tuple] = {}
    for key, (steps, walls_, values) in run.series.items():
        kid = ids[key]
        stored = [None if v != v else v for v in values]  # NaN is NULL (schema.store.tables)
        rows += zip([run_id] * len(steps), [kid] * len(steps), steps, walls_, stored, strict=True)
        shape = (tuple(steps), array("d", walls_).tobytes())
        group = groups.get(shape)
        if group is None:
            groups[shape] = (steps, walls_, {kid: stored})
        else:
            group[2][kid] = stored
    if rows:  # an existing run's series states are read back by the rollup writer
        writer = RollupWriter(engine.dialect, run_id)
        writer.insert(conn, rows, list(groups.values()))
        # An imported run is written whole: sealed chunks, as a finished run's are.
        writer.seal_all(conn)


def insert_events(conn, engine: Engine, run_id: int, rows: list[tuple]) -> None:
    if not rows:
        return
    sql = positional_insert(
        engine.dialect, events, ["run_id", "wall", "step", "kind", "level", "title", "body"]
    )
    conn.exec_driver_sql(
        sql,
        [
            (run_id, w, s, k, lv, storable_text(t)[:20000], storable_text(b))
            for w, s, k, lv, t, b in rows
        ],
    )


Progress = Callable[[int, int], None]
