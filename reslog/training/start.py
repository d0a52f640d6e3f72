"""Starting a run: `init()` checks its arguments, opens the store, writes the run row (or, to
resume, takes the stored one back with its last step and summary), builds the Run and starts
its writer and system sampler. Everything after that is the Run's (reslog.training.run)."""

from __future__ import annotations

import json
import math
import os
import time
import uuid
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from reslog.text import duration
from reslog.training import hostinfo, lifecycle, options
from reslog.training.config import Config, config_json
from reslog.training.disabled import DisabledRun
from reslog.training.run import Run, RunHooks
from reslog.training.stall import check_stall_after
from reslog.training.store_file import StoreFile
from reslog.training.summary import Summary
from reslog.training.values import as_json, check_run_text
from reslog.training.writer import ON_FULL
from schema import open_store
from schema.store import liveness
from schema.store.connect import resolve_store, sqlite_path, write_timeout
from schema.store.errors import RunInUse, StoreError, UnknownRun
from schema.store.status import RUNNING, stale_after
from schema.store.tables import events, keys, runs, series
from schema.store.writes import insert_run

DEFAULT_FINISH_TIMEOUT_S = 10.0
DEFAULT_MAX_BUFFER_POINTS = 2_000_000


def _json(value: Any) -> str:
    return json.dumps(value, default=as_json)


def init(
    project: str = "default",
    name: str | None = None,
    config: Any = None,
    store: str | os.PathLike[str] | None = None,
    tags: list[str] | tuple[str, ...] | None = None,
    notes: str = "",
    resume: str | None = None,
    system: bool = True,
    system_interval: float = 1.0,
    flush_interval: float = 1.0,
    rank: int | None = None,
    world_size: int | None = None,
    *,
    max_buffer_points: int = DEFAULT_MAX_BUFFER_POINTS,
    finish_timeout: float = DEFAULT_FINISH_TIMEOUT_S,
    on_full: str = "drop",
    stall_after: float | None = None,
    group: str | None = None,
    job_type: str | None = None,
    id: str | None = None,
    dir: str | os.PathLike[str] | None = None,
    mode: str | None = None,
    reinit: Any = None,
    config_exclude_keys: list[str] | None = None,
    config_include_keys: list[str] | None = None,
    **wandb_only: Any,
) -> Run | DisabledRun:
    """Start (or with resume=uid, or id= and resume=, continue) a run and make it the current
    one. wandb's keywords are accepted (docs/reslog.md, "Coming from wandb")."""
    options.notice_ignored(wandb_only)
    run_id_opt = options.check_id(id)
    config = options.config_data(config, config_include_keys, config_exclude_keys)
    if options.check_mode(mode) == "disabled":
        return DisabledRun(project, name, config, run_id_opt)
    previous = lifecycle.current()
    if previous is not None and reinit == "return_previous":
        return previous
    if previous is not None and (reinit is True or reinit == "finish_previous"):
        previous.finish()
    if store is None:
        store = options.store_in(dir)
    if not flush_interval > 0:
        raise ValueError(f"reslog: flush_interval must be > 0 seconds, got {flush_interval!r}")
    if max_buffer_points < 1:
        raise ValueError(f"reslog: max_buffer_points must be >= 1, got {max_buffer_points!r}")
    if on_full not in ON_FULL:
        raise ValueError(f"reslog: on_full must be one of {ON_FULL}, got {on_full!r}")
    stall_after = check_stall_after(stall_after)
    check_run_text(
        project=project, name=name, group=group, job_type=job_type, tags=tags or [], notes=notes
    )
    write_limit = write_timeout(make_url(resolve_store(store)))
    rank = hostinfo.rank() if rank is None else int(rank)
    world_size = hostinfo.world_size() if world_size is None else int(world_size)
    stored_json = config_json(config) if config is not None else None
    group, job_type = str(group or ""), str(job_type or "")
    tag_list = [str(t) for t in (tags or [])]
    engine = open_store(store, create=True)
    label = engine.url.render_as_string(hide_password=True)
    now = time.time()
    where = {
        "host": hostinfo.host(),
        "pid": os.getpid(),
        "command": hostinfo.command_line(),
        "heartbeat_interval": float(flush_interval),
        "rank": rank,
        "world_size": world_size,
        "proc_host": liveness.host_identity(),
        "proc_start": liveness.process_identity(os.getpid()),
        "stall_after": stall_after,
        "stalled_since": None,
        **({"run_group": group} if group else {}),
        **({"job_type": job_type} if job_type else {}),
    }
    try:
        with engine.begin() as conn:
            target, new_uid = options.resume_target(conn, resume, run_id_opt, project)
            if target is None:
                uid = new_uid or uuid.uuid4().hex
                name = name or f"{project}-{time.strftime('%Y%m%d-%H%M%S')}-{uid[:4]}"
                row = {
                    "uid": uid,
                    "project": project,
                    "name": name,
                    "status": RUNNING,
                    "created_at": now,
                    "heartbeat_at": now,
                    "git_commit": hostinfo.git_commit(),
                    "config": stored_json or "{}",
                    "tags": _json(tag_list),
                    "notes": notes or "",
                    # A new run under torchrun (or Slurm) is in its job's group unless told
                    # otherwise, so the job's ranks join up (a resume keeps the stored group).
                    "run_group": hostinfo.job_id(),
                    **where,
                }
                run_id = insert_run(conn, row)
                summary, step = Summary(), 0
            else:
                run_id, uid, project, name, summary, step = _resume(
                    conn, target, now, where, stored_json, tag_list if tags else None, notes
                )
            stored_config, stored_group, stored_job = conn.execute(
                select(runs.c.config, runs.c.run_group, runs.c.job_type).where(runs.c.id == run_id)
            ).one()
    except SQLAlchemyError as exc:
        engine.dispose()
        detail = getattr(exc, "orig", None) or exc
        raise StoreError(f"reslog: cannot write a run into {label}: {detail}") from None
    except BaseException:
        engine.dispose()
        raise
    if target is None:
        run_config = Config(config)
    else:  # the stored config (secrets redacted) with this init's config over it
        run_config = Config({**json.loads(stored_config or "{}"), **(config or {})})
    run = Run(
        engine,
        int(run_id),
        uid,
        project=project,
        name=name,
        step=step,
        summary=summary,
        flush_interval=flush_interval,
        max_buffer_points=max_buffer_points,
        finish_timeout=finish_timeout,
        rank=rank,
        world_size=world_size,
        label=label,
        on_full=on_full,
        stall_after=stall_after,
        store_file=_store_file(engine),
        write_timeout=write_limit,
        config=run_config,
        dir=_run_dir(dir, engine),
        url=f"{label}#{uid}",
        group=stored_group or "",
        job_type=stored_job or "",
    )
    run._writer.start()
    lifecycle.register(RunHooks(run))
    if system:
        run._start_system(system_interval)
    return run


def _refuse_live_writer(row, now: float) -> None:
    """A run has one writer at a time: its rollups are kept in the writer's memory, so a
    second process writing the same series would leave them wrong. RunInUse when the process
    that logs the run still lives (same host: /proc says so; elsewhere: a fresh heartbeat)."""
    if row.status != RUNNING:
        return
    if row.pid == os.getpid() and row.proc_host == liveness.host_identity():
        if any(getattr(h.run, "uid", None) == row.uid for h in lifecycle.active()):
            raise RunInUse(
                f"reslog: run {row.uid} is still being logged by this process; finish() it "
                "first, or init(reinit='finish_previous')"
            )
        return  # this process's own run, ended without a status (an abandoned Run object)
    alive = liveness.is_alive(row.proc_host, row.pid, row.proc_start)
    if alive is False:
        return
    age = now - row.heartbeat_at
    limit = stale_after(row.heartbeat_interval or 1.0)
    if alive is None and age > limit:
        return  # another host, and its heartbeat stopped: that process is gone
    seen = "alive" if alive else f"its heartbeat is {duration(max(0.0, age))} old"
    later = (
        ""
        if alive
        else f"; if that process is gone, its heartbeat goes stale after {duration(limit)}: "
        "retry then"
    )
    raise RunInUse(
        f"reslog: run {row.uid} is being logged by pid {row.pid} on {row.host or '?'} "
        f"({seen}); a second process logging into it would break its rollups. Finish or "
        f"stop that process first, or start a new run (init(group=...) ties runs "
        f"together){later}"
    )


def _store_file(engine) -> StoreFile | None:
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    return None if path is None else StoreFile(path)


def _run_dir(dir: str | os.PathLike[str] | None, engine) -> str:
    if dir is not None:
        return os.path.abspath(os.fspath(dir))
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    return os.path.dirname(os.path.abspath(database)) if database else os.getcwd()


def _resume(conn, uid: str, now: float, where: dict, stored_json, tags, notes):
    # FOR UPDATE (PostgreSQL; SQLite's write transaction is already exclusive): two processes
    # resuming at once are checked one after the other, so the second sees the first.
    row = conn.execute(select(runs).where(runs.c.uid == uid).with_for_update()).first()
    if row is None:
        raise UnknownRun(f"reslog: cannot resume run {uid!r}: no such run in this store")
    _refuse_live_writer(row, now)
    # The series rows hold each key's last step: O(keys), not a walk of every point.
    last = conn.execute(
        select(func.max(series.c.step_hi)).where(series.c.run_id == row.id)
    ).scalar()
    step = 0 if last is None else int(last) + 1
    values: dict[str, Any] = {"status": RUNNING, "ended_at": None, "heartbeat_at": now, **where}
    if stored_json is not None:
        merged = json.loads(row.config or "{}")
        merged.update(json.loads(stored_json))
        values["config"] = _json(merged)
    if tags is not None:
        values["tags"] = _json(tags)
    if notes:
        values["notes"] = notes
    conn.execute(runs.update().where(runs.c.id == row.id).values(**values))
    body = f"host {where['host']}, pid {where['pid']}; the run was {row.status}"
    conn.execute(
        events.insert().values(
            run_id=row.id,
            wall=now,
            step=step,
            kind="resume",
            level="info",
            title=f"resumed at step {step}",
            body=body,
        )
    )
    try:
        summary = Summary(json.loads(row.summary or "{}"))
    except ValueError:
        summary = Summary()
    # wandb's summary holds each logged key's last value; the series rows have them (the
    # system sampler's sys/* keys are not logged values, as in wandb).
    lasts = conn.execute(
        select(keys.c.name, series.c.last)
        .join(keys, keys.c.id == series.c.key_id)
        .where(series.c.run_id == row.id, ~keys.c.name.startswith("sys/", autoescape=True))
    ).all()
    summary._resume_last((k, math.nan if v is None else v) for k, v in lasts)
    return row.id, row.uid, row.project, row.name, summary, step
