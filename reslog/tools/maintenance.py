"""`reslog check` and `reslog upgrade`: look a store over, and migrate it safely."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, bindparam, exists, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from schema.store import connect as store
from schema.store import migrate
from schema.store.errors import NotAStore, SchemaTooNew, SchemaTooOld, StoreError, StoreNotFound
from schema.store.rollup_repair import check_series, point_series, rebuild, sample_series
from schema.store.sqlite_file import backup_into, readonly_uri
from schema.store.status import CRASHED, RUNNING, STALLED, effective_status, row_status
from schema.store.tables import events, keys, points, runs

ROLLUP_SAMPLE = 24  # series `reslog check` compares with their raw points
ANNOUNCE_BYTES = 256 << 20  # a whole-file pass over a store this large is announced first


@dataclass
class CheckReport:
    where: str
    info: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _locate(store_arg: str | None) -> tuple[str, Path | None, str]:
    """(url, SQLite path or None, label for messages). StoreNotFound for a missing file."""
    url = store.resolve_store(store_arg)
    path = store.sqlite_path(url)
    if path is not None:
        store.refuse_odd_file(path)
        if not path.exists():
            raise StoreNotFound(f"no store at {path}")
    return url, path, store.url_label(url)


def _orphan_line(n: int, table: str, what: str) -> str:
    rows = "1 row" if n == 1 else f"{n} rows"
    verb = "points" if n == 1 else "point"
    return f"{rows} in {table} {verb} to a missing {what}"


def _chunk_points(conn, run_id: int, key_id: int) -> int:
    """The points of one series held in chunks (their rows' counts, nothing decoded)."""
    from schema.store.chunk_read import keyset_columns
    from schema.store.sql import placeholder

    cur, p = conn.connection.dbapi_connection.cursor(), placeholder(conn.dialect)
    total = 0
    for ks, _col, _k in keyset_columns(cur, p, run_id, key_id):
        cur.execute(f"SELECT coalesce(sum(n), 0) FROM chunks WHERE keyset_id = {p}", (ks,))
        total += int(cur.fetchone()[0])
    return total


def _orphans(engine: Engine, present: list[tuple[int, int]], head: bool = True) -> list[str]:
    """Rows whose run or key is gone (foreign keys were off, or a hand edit). Points are judged
    by the series that hold them (`present`, found by index seeks) and counted only where a
    series is orphaned: an anti-join over every point took 23 s on a 100M-point store."""
    found = []
    with engine.connect() as conn:
        run_ids = set(conn.execute(select(runs.c.id)).scalars())
        key_ids = set(conn.execute(select(keys.c.id)).scalars())
        in_series = (
            select(func.count())
            .select_from(points)
            .where(points.c.run_id == bindparam("r"), points.c.key_id == bindparam("k"))
        )
        lost_run = [(r, k) for r, k in present if r not in run_ids]
        lost_key = [(r, k) for r, k in present if k not in key_ids]
        for what, lost in (("run", lost_run), ("key", lost_key)):
            n = sum(conn.execute(in_series, {"r": r, "k": k}).scalar() or 0 for r, k in lost)
            if n:
                found.append(_orphan_line(n, "points", what))
            n = sum(_chunk_points(conn, r, k) for r, k in lost) if head else 0
            if n:
                found.append(f"{n} point{'s' * (n != 1)} in chunks of a missing {what}")
        n = conn.execute(  # events: a small table
            select(func.count())
            .select_from(events)
            .where(~exists().where(runs.c.id == events.c.run_id))
        ).scalar()
        if n:
            found.append(_orphan_line(n, "events", "run"))
    return found


def _running(engine: Engine, now: float, head: bool) -> list[tuple[Any, str]]:
    """Runs stored as "running", with their effective status (crashed, stalled, running). An
    older store has no liveness columns: the heartbeat rule alone decides there."""
    if head:
        query = select(runs).where(runs.c.status == RUNNING)
    else:
        query = select(
            runs.c.id, runs.c.uid, runs.c.name, runs.c.heartbeat_at, runs.c.heartbeat_interval
        ).where(runs.c.status == RUNNING)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    if head:
        return [(r, row_status(r._mapping, now)) for r in rows]
    return [(r, effective_status(RUNNING, r.heartbeat_at, r.heartbeat_interval, now)) for r in rows]


def _rollups(
    engine: Engine, report: CheckReport, fix: bool, sample: int, present: list | None
) -> None:
    """Compare the rollups of a sample of series with their raw points; with `fix`, rebuild
    every run where they differ."""
    with engine.connect() as conn:
        chosen = sample_series(conn, sample, present=present)
        bad_runs: dict[int, int] = {}
        for run_id, key_id in chosen:
            try:
                found = check_series(conn, run_id, key_id)
            except ValueError as exc:  # a corrupt chunk: the chunk check names it
                report.problems.append(
                    f"rollups: run {run_id} key {key_id} not compared: {_first_line(exc)}"
                )
                continue
            if found:
                bad_runs[run_id] = bad_runs.get(run_id, 0) + 1
                if not fix:
                    shown = found[:3] + ([f"... {len(found) - 3} more"] if len(found) > 3 else [])
                    report.problems += [f"rollups: {line}" for line in shown]
    if bad_runs and fix:
        for run_id in sorted(bad_runs):
            try:
                with engine.begin() as conn:
                    n = rebuild(conn, run_id)
            except ValueError as exc:  # a corrupt chunk: nothing to rebuild from
                report.problems.append(f"rollups of run {run_id} not rebuilt: {_first_line(exc)}")
                continue
            report.info.append(f"fixed     rollups of run {run_id} rebuilt from {n} points")
    elif bad_runs:
        report.problems.append(
            f"rollups of {len(bad_runs)} run(s) disagree with their points; "
            f"`reslog check --fix {report.where}` rebuilds them"
        )
    else:
        report.info.append(f"rollups   agree with the raw points ({len(chosen)} series sampled)")


def _integrity(
    engine: Engine, path: Path, full: bool, say: Callable[[str], None] | None, report: CheckReport
) -> None:
    """SQLite's own check of the file: quick_check (every page, record and constraint) unless
    `full` (integrity_check also matches every index entry with its row: 102 s against 16 s
    on a 100M-point store). Both read the whole file, so a large one is announced first."""
    pragma = "integrity_check" if full else "quick_check"
    size = path.stat().st_size
    if say is not None and size >= ANNOUNCE_BYTES:
        say(f"reading all {size / 2**30:.2f} GiB of {path.name} for SQLite's {pragma} ...")
    with engine.connect() as conn:
        result = [r[0] for r in conn.exec_driver_sql(f"PRAGMA {pragma}").all()]
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    if result == ["ok"]:
        how = "" if full else " (quick_check; --full also matches every index with its table)"
        report.info.append(f"integrity ok{how}")
    else:
        report.problems += [f"integrity: {line}" for line in result]
    report.info.append(f"journal   {mode}")


def _chunks(engine: Engine, report: CheckReport, fix: bool, full: bool, live: set) -> None:
    """Every chunk against its CRC and its row (`full`: decoded too), and the head chunks a
    crashed writer left, sealed with `fix` (a live run's heads are its writer's)."""
    from schema.store.chunk_check import check_chunks
    from schema.store.chunk_write import ChunkWriter

    try:
        with engine.connect() as conn:
            found = check_chunks(conn, full)
    except (SQLAlchemyError, sqlite3.DatabaseError) as exc:
        report.problems.append(f"chunks could not be read: {_first_line(exc)}")
        return
    size = f", {found.blob_bytes / found.points:.2f} bytes a point" if found.points else ""
    how = "decoded" if full else "CRC-32 and header"
    report.info.append(f"chunks    {found.chunks:,} ({found.points:,} points{size}; {how} checked)")
    report.problems += [f"corrupt {line}" for line in found.problems]
    if found.problems:
        report.problems.append(
            f"{len(found.problems)} chunk(s) are damaged: their points cannot be read back; "
            f"restore the store from a backup (`reslog check --fix` cannot mend them)"
        )
    left = {r: n for r, n in found.heads.items() if r not in live}
    if not left:
        return
    if not fix:
        n = sum(left.values())
        report.info.append(
            f"heads     {n} unsealed chunk(s) of {len(left)} run(s) whose writer is gone "
            f"(readable as they are; `reslog check --fix {report.where}` seals them)"
        )
        return
    for run_id in sorted(left):
        try:
            with engine.begin() as conn:
                sealed = ChunkWriter(conn.dialect, run_id).seal_all(conn)
        except (SQLAlchemyError, sqlite3.DatabaseError, ValueError) as exc:
            report.problems.append(f"run {run_id}: heads could not be sealed: {_first_line(exc)}")
            continue
        report.info.append(
            f"fixed     {left[run_id]} head chunk(s) of run {run_id} sealed into {sealed} chunk(s)"
        )


def _first_line(exc: BaseException) -> str:
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


def check_store(
    store_arg: str | None,
    *,
    fix: bool = False,
    sample: int = ROLLUP_SAMPLE,
    full: bool = False,
    say: Callable[[str], None] | None = None,
) -> CheckReport:
    """Integrity, schema revision, orphan rows, stale runs, and rollups against raw points on a
    sample of series. Raises StoreError only when the store cannot be examined at all
    (missing, not a store, newer schema). `say` hears, before it starts, of a pass that reads
    a large file whole."""
    from reslog.text import age

    url, path, where = _locate(store_arg)
    report = CheckReport(where)
    engine = store.make_engine(url, readonly=path is not None and not fix)
    try:
        revision = store.stored_revision(engine)
        if revision is None:
            raise NotAStore(f"{where} is empty: no reslog store there")
        report.info.append(f"schema    {revision} (this reslog: {store.HEAD_REVISION})")
        try:
            store.check_revision(engine, revision, where)
        except SchemaTooOld as exc:
            report.problems.append(str(exc))
        if path is not None:
            _integrity(engine, path, full, say, report)
        counts = []
        with engine.connect() as conn:
            tables = [("runs", runs), ("keys", keys), ("points", points)]
            if revision == store.HEAD_REVISION:
                tables[2] = ("point rows not converted to chunks", points)
            for name, table in tables:
                try:
                    n = conn.execute(select(func.count()).select_from(table)).scalar()
                except SQLAlchemyError as exc:  # corrupt pages: the integrity lines say where
                    report.problems.append(f"rows: cannot count {name} ({_first_line(exc)})")
                    n = "?"
                counts.append(f"{n} {name}")
        report.info.append("rows      " + ", ".join(counts))
        left = counts[2].split(" ")[0]
        if revision == store.HEAD_REVISION and left not in ("0", "?"):
            report.info.append(
                f"upgrade   an upgrade stopped before converting every run's rows (readable as "
                f"they are); `reslog upgrade {where}` finishes it"
            )
        live = {
            r.id
            for r, s in _running(engine, time.time(), revision == store.HEAD_REVISION)
            if s != CRASHED
        }
        if revision == store.HEAD_REVISION:
            _chunks(engine, report, fix, full, live)
        present = None  # every (run, key) that has points, shared with the rollup check
        try:
            with engine.connect() as conn:
                present = point_series(conn)
            report.problems += _orphans(engine, present, revision == store.HEAD_REVISION)
        except (SQLAlchemyError, sqlite3.DatabaseError) as exc:
            report.problems.append(f"orphan check failed: {_first_line(exc)}")
        if revision == store.HEAD_REVISION:
            try:
                _rollups(engine, report, fix, sample, present)
            except (SQLAlchemyError, sqlite3.DatabaseError) as exc:  # corrupt pages, say
                report.problems.append(
                    f"rollups could not be compared with the points: {_first_line(exc)}"
                )
        now = time.time()
        running = _running(engine, now, revision == store.HEAD_REVISION)
        stale = [(r.id, r.uid, r.name, r.heartbeat_at) for r, s in running if s == CRASHED]
        for r, _s in (x for x in running if x[1] == STALLED):
            since = r._mapping.get("stalled_since") or r.heartbeat_at
            report.problems.append(
                f"run {r.uid[:8]} ({r.name}) is stalled: its process is alive but no step was "
                f"logged since {age(since, now)}; `reslog show {r.uid[:8]}` has where it hangs"
            )
        if stale and fix:
            with engine.begin() as conn:
                for run_id, uid, name, beat in stale:
                    conn.execute(
                        update(runs)
                        .where(runs.c.id == run_id, runs.c.status == RUNNING)
                        .values(status=CRASHED, ended_at=beat)
                    )
                    report.info.append(f"fixed     run {uid[:8]} ({name}) marked crashed")
        elif stale:
            for _run_id, uid, name, beat in stale:
                report.problems.append(
                    f"run {uid[:8]} ({name}) is stored as running but its process is gone or "
                    f"its last heartbeat was {age(beat, now)}: it crashed (kill -9, OOM, host "
                    f"lost); `reslog check --fix {where}` marks it crashed"
                )
    finally:
        engine.dispose()
    return report


# A process of its own that removes the backup's part file if this one dies before renaming
# it (SIGKILL, OOM): it waits for its stdin to close, which happens however this process ends.
_GUARD = """import os, shutil, sys
sys.stdin.buffer.read()
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass
"""


@contextlib.contextmanager
def removed_if_killed(*paths: Path) -> Iterator[None]:
    """While inside, `paths` are removed by a guard process should this one be killed (a
    SIGKILL runs no cleanup of ours); the guard is in a session of its own, so a signal to
    this process group spares it. It removes them when the block ends too: use it for files
    that must not outlive the block."""
    try:
        guard = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _GUARD, *map(os.fspath, paths)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:  # no process to spare: the sweep of stale part files is what is left
        guard = None
    try:
        yield
    finally:
        if guard is not None:
            guard.stdin.close()  # type: ignore[union-attr]
            guard.wait()


def _sweep_parts(path: Path) -> None:
    """Part files of backups of `path` whose upgrade process is gone (killed before its guard
    existed, or with it)."""
    for part in path.parent.glob(f".{glob.escape(path.name)}.bak-*.part-*"):
        pid = part.name.rpartition(".part-")[2].partition("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            if part.is_dir() and not part.is_symlink():
                shutil.rmtree(part, ignore_errors=True)
            else:
                part.unlink(missing_ok=True)
        except OSError:
            pass  # alive, another user's


def backup_sqlite(path: Path, revision: str) -> Path:
    """A consistent copy through SQLite's backup API (safe with WAL and concurrent readers),
    written under a temporary name and renamed into place once whole and on disk: an upgrade
    killed during its backup leaves no `.bak-NNNN` that would restore an empty database, and
    no part file either (removed_if_killed). A disk that fills up is a StoreError saying how
    much room the copy needs."""
    _sweep_parts(path)
    target = path.with_name(f"{path.name}.bak-{revision}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.bak-{revision}.{n}")
        n += 1
    # The copy is made in a private folder beside the store (no one else can plant a link
    # at its name or its -journal's), named for this process so a sweep can tell it stale,
    # and made once its guard runs: a kill between the two left the folder for good.
    folder = path.parent / f".{target.name}.part-{os.getpid()}-{secrets.token_hex(6)}"
    part = folder / target.name
    src = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        with removed_if_killed(folder):
            try:
                folder.mkdir(mode=0o700)  # never an existing name, link or not
                backup_into(src, part)
                with open(part, "rb+") as f:
                    os.fsync(f.fileno())
                os.replace(part, target)
            except (sqlite3.Error, OSError) as exc:
                raise StoreError(_backup_failed(path, exc)) from None
    finally:
        src.close()
        shutil.rmtree(folder, ignore_errors=True)
    return target


def _backup_failed(path: Path, exc: BaseException) -> str:
    detail = getattr(exc, "strerror", None) or str(exc)
    full = "full" in detail or getattr(exc, "errno", None) == errno.ENOSPC
    if full:
        free = shutil.disk_usage(path.parent).free
        size = path.stat().st_size
        return (
            f"cannot back up {path} before upgrading it: the disk is full ({free / 2**20:.1f} "
            f"MiB free in {path.parent}, the copy needs about {size / 2**20:.1f} MiB); the "
            "store is unchanged: free some room, or upgrade without a backup (--no-backup)"
        )
    return (
        f"cannot back up {path} before upgrading it ({detail}); the store is unchanged "
        "(--no-backup upgrades without a copy)"
    )


def progress_bar(label: str, out=sys.stderr) -> Callable[[int, int], None]:
    """A callback printing `label: done / total (pct)` on one line, at most 4 times a second."""
    shown = [0.0]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - shown[0] < 0.25:
            return
        shown[0] = now
        pct = 100.0 * done / total if total else 100.0
        end = "\n" if done >= total else ""
        print(f"\r{label}: {done:,} / {total:,} points ({pct:.0f}%)", end=end, file=out, flush=True)

    return report


VACUUM_SHARE = 0.25  # free pages (of the whole file) worth a VACUUM once no rows are left


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def _converted_line(
    done: Any, path: Path | None, before: int, vacuumed: bool, compacted: Any = None
) -> str:
    """What the conversion to chunks and the compaction did, for upgrade_store's line ('' when
    nothing)."""
    parts = []
    if done is not None and done.points:
        rate = done.points / done.seconds if done.seconds > 0 else 0.0
        parts.append(
            f"{done.points:,} points of {done.runs} run{'s' * (done.runs != 1)} converted to "
            f"{done.chunks:,} chunks ({rate:,.0f} points/s)"
        )
    if compacted is not None and compacted.points:
        parts.append(compacted.line())
    if vacuumed:
        parts.append(f"{path.name if path else 'file'}: {_mib(before)} → {_mib(_size(path))}")
    return "; ".join(parts)


def _give_back_space(engine: Engine, path: Path | None) -> bool:
    """VACUUM a SQLite store once no rows wait for conversion and a quarter of it is free pages
    (what converting the rows left): once at the end of a conversion, not after each run
    (each VACUUM rewrites the whole file), and again by `reslog upgrade` should a kill have
    stopped it. PostgreSQL reuses the pages of deleted rows by itself (autovacuum); `VACUUM
    FULL points` gives them back to the system there."""
    from schema.store.chunk_convert import free_share, pending_runs, vacuum

    if path is None:
        return False
    with engine.connect() as conn:
        if pending_runs(conn):
            return False
    if free_share(engine) < VACUUM_SHARE:
        return False
    vacuum(engine)
    return True


def upgrade_store(
    store_arg: str | None,
    *,
    backup: bool = True,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    converting: Callable[[int, int], None] | None = None,
    compacting: Callable[[int, int], None] | None = None,
) -> str:
    """Migrate to Alembic head (filling in rollups of the points of a store from before them,
    in one streaming pass), then convert the points stored as rows into chunks run by run
    (`converting` hears its progress), compact the chunks of the runs whose writer is gone
    (schema/store/chunk_compact.py, `compacting` hears its progress) and give the space back;
    returns the line to print (from → to, backup path, what was converted and compacted). At
    head, it resumes a conversion or a compaction a kill or an error stopped."""
    from schema.store.chunk_compact import compact
    from schema.store.chunk_convert import convert, pending_runs

    url, path, where = _locate(store_arg)
    engine = store.make_engine(url)
    try:
        revision = store.stored_revision(engine)
        if revision is None:
            raise NotAStore(f"{where} is empty: no reslog store there")
        head = migrate.head_revision()
        if revision not in migrate.known_revisions():
            raise SchemaTooNew(
                f"{where} was written by a newer reslog (schema {revision}, this one knows up "
                f"to {head}); upgrade reslog instead"
            )
        if revision == head:
            with engine.connect() as conn:
                left = pending_runs(conn)
            before = _size(path)
            if not left:
                packed = compact(engine, progress=compacting)
                vacuumed = _give_back_space(engine, path)
                if not vacuumed and not packed.points:
                    return f"{where} is already at schema {head}; nothing to do"
                line = _converted_line(None, path, before, vacuumed, packed)
                return f"{where} is at schema {head}; " + line
        now = time.time()
        live = [r.name for r, s in _running(engine, now, False) if s == RUNNING]
        if live and not force:
            raise StoreError(
                f"{where} has runs still writing ({', '.join(live)}); stop them before "
                "upgrading, or pass --force"
            )
        if revision == head:
            # The backup of the first try is the store before any conversion; the store at
            # head reads whole however far the conversion got, so none is written again.
            done = convert(engine, converting)
            packed = compact(engine, progress=compacting)
            vacuumed = _give_back_space(engine, path)
            line = f"{where} at schema {head}: conversion resumed; "
            return line + _converted_line(done, path, before, vacuumed, packed)
        saved = backup_sqlite(path, revision) if path is not None and backup else None
        before = _size(path)
        done = migrate.upgrade(engine, progress=progress, converting=converting)
        packed = compact(engine, progress=compacting) if done is not None else None
        vacuumed = _give_back_space(engine, path)
    finally:
        engine.dispose()
    line = f"upgraded {where}: schema {revision} → {head}"
    line += f" (backup: {saved})" if saved else ""
    extra = _converted_line(done, path, before, vacuumed, packed)
    return line + (f"; {extra}" if extra else "")
