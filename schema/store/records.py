"""Plain records read from a store: what readers (CLI, export, resplot) pass around.

Stdlib only, so every reader can use them; resplot adds numpy series on top.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class RunRef:
    """A run's identity across hosts: which source, which store on it, which run."""

    source: str  # host label ("local", an ssh alias, a postgres URL without password)
    store: str  # path on that host, or URL
    uid: str

    def __hash__(self) -> int:
        # Worked out once: a run's tiles are keyed by it (resplot's cache hashes it for every
        # tile it looks up, thousands a redraw). The same value as the hash dataclass makes.
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash((self.source, self.store, self.uid))
            object.__setattr__(self, "_hash", value)
            return value

    def __reduce__(self):
        # Pickled by its fields: a string's hash differs from process to process.
        return (RunRef, (self.source, self.store, self.uid))


@dataclass
class RunInfo:
    ref: RunRef
    project: str
    name: str
    status: str  # effective status (schema.store.status.effective_status): may say "crashed"
    created_at: float
    heartbeat_at: float
    ended_at: float | None = None
    host: str = ""
    pid: int | None = None
    rank: int = 0
    world_size: int = 1
    command: str = ""
    git_commit: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    heartbeat_interval: float = 1.0
    group: str = ""  # wandb's group and job_type (init(group=, job_type=))
    job_type: str = ""


@dataclass(frozen=True)
class Event:
    run: RunRef
    id: int
    wall: float
    step: int | None
    kind: str  # alert, checkpoint, note, schedule, resume, drop, ...
    level: str  # info, warning, error
    title: str
    body: str = ""


def _loads(text: str | None, default):
    try:
        return json.loads(text) if text else default
    except ValueError:
        return default


def run_info(m: Mapping, source: str, store: str, now: float | None = None) -> RunInfo:
    """A RunInfo from a `runs` row by column name (SQLAlchemy's row mapping or a plain dict),
    its status as readers show it (schema/store/status.py): the one place a row becomes a run."""
    from schema.store.status import row_status

    return RunInfo(
        ref=RunRef(source, store, m["uid"]),
        project=m["project"],
        name=m["name"],
        status=row_status(m, now),
        created_at=m["created_at"],
        heartbeat_at=m["heartbeat_at"],
        ended_at=m["ended_at"],
        host=m["host"],
        pid=m["pid"],
        rank=m["rank"],
        world_size=m["world_size"],
        command=m["command"],
        git_commit=m["git_commit"],
        config=_loads(m["config"], {}),
        summary=_loads(m["summary"], {}),
        tags=_loads(m["tags"], []),
        notes=m["notes"],
        heartbeat_interval=m["heartbeat_interval"],
        group=m["run_group"],
        job_type=m["job_type"],
    )
