"""Writing one imported run: the run row, its keys, points (with rollups) and events, in one
transaction."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, select

from reslog.redact import redact
from reslog.training.values import as_json, storable_text
from schema.rollup_writer import RollupWriter
from schema.sql import positional_insert
from schema.tables import events, runs
from schema.writes import insert_run, resolve_keys


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
    status: str = "finished"

    @property
    def uid(self) -> str:
        return hashlib.blake2b(self.source.encode("utf-8"), digest_size=16).hexdigest()

    def points(self) -> int:
        return sum(len(s[0]) for s in self.series.values())

    def add(self, key: str, step: int, wall: float, value: float) -> None:
        s = self.series.get(key)
        if s is None:
            s = self.series[key] = ([], [], [])
        s[0].append(step)
        s[1].append(wall)
        s[2].append(value)


def exists(engine: Engine, uid: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(select(runs.c.id).where(runs.c.uid == uid)).first() is not None


def write_run(engine: Engine, run: ImportedRun, command: str) -> bool:
    """Store `run` in one transaction; False (nothing written) when its uid is already there."""
    walls = [w for s in run.series.values() for w in (s[1][0], s[1][-1]) if s[1]]
    walls += [e[0] for e in run.events]
    now = time.time()
    created = run.created_at if run.created_at is not None else min(walls, default=now)
    ended = run.ended_at if run.ended_at is not None else max(walls, default=created)
    with engine.begin() as conn:
        if conn.execute(select(runs.c.id).where(runs.c.uid == run.uid)).first() is not None:
            return False
        row = {
            "uid": run.uid,
            "project": run.project[:200],
            "name": run.name[:200],
            "status": run.status,
            "created_at": created,
            "heartbeat_at": ended,
            "ended_at": ended,
            "host": run.host[:255],
            "pid": None,
            "command": command,
            "config": json.dumps(redact(run.config), default=as_json),
            "summary": json.dumps(run.summary, default=as_json),
            "tags": json.dumps(run.tags),
            "notes": run.notes,
            "run_group": run.group[:200],
            "job_type": run.job_type[:64],
        }
        run_id = insert_run(conn, row)
        ids = resolve_keys(conn, run.series)
        rows: list[tuple] = []
        groups = []
        for key, (steps, walls_, values) in run.series.items():
            kid = ids[key]
            stored = [None if v != v else v for v in values]  # NaN is NULL (schema.tables)
            rows += zip(
                [run_id] * len(steps), [kid] * len(steps), steps, walls_, stored, strict=True
            )
            groups.append((steps, walls_, {kid: stored}))
        if rows:
            RollupWriter(engine.dialect, run_id).insert(conn, rows, groups)
        if run.events:
            sql = positional_insert(
                engine.dialect, events, ["run_id", "wall", "step", "kind", "level", "title", "body"]
            )
            conn.exec_driver_sql(
                sql,
                [
                    (run_id, w, s, k, lv, storable_text(t)[:20000], storable_text(b))
                    for w, s, k, lv, t, b in run.events
                ],
            )
    return True


Progress = Callable[[int, int], None]
