"""`resplot sync SOURCE... MIRROR`: copy runs into a local store that outlives the GPU box.

Reads each source through the agent (a local store, or a host over SSH) and writes an ordinary
reslog store: runs (by uid), keys (by name), events and points. The points travel as the chunks
the source stores (the agent's `chunks` request), checked and stored byte for byte with the
mirror's own ids (schema.store.chunk_copy); an agent without that request, and legacy point rows,
send rows, written through schema.store.rollup_writer. Either way the mirror's rollups, series rows
and takes are what the training writer would have made. Incremental by cursor: the source's
point and event ids copied so far are committed with the rows (schema.store.mirror), so a sync cut
at any moment resumes where it stopped, a second sync copies only what is new, and nothing is
copied twice, also while the run is live. Run metadata (status, heartbeat, summary, ...) is
refreshed on every sync.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.engine import Connection

from resplot.sources import open_source
from resplot.sources.agent import AgentSource
from resplot.sources.client import AgentClient, AgentRemoteError, decode_points
from resplot.sources.spec import LocalSpec, PostgresSpec, Spec, parse_spec
from resplot.ssh.options import SSHOptions
from schema.store.chunk_copy import ChunkCopier, Copied, verify
from schema.store.columns import RUN_COLUMNS
from schema.store.connect import open_store
from schema.store.errors import StoreError
from schema.store.mirror import mirror_cursors, mirror_metadata
from schema.store.rollup_writer import RollupWriter
from schema.store.status import RUNNING
from schema.store.tables import events, runs
from schema.store.user_files import check_not_planted
from schema.store.writes import insert_run, resolve_keys

BATCH_POINTS = 200_000  # points per request and per mirror transaction
# A run's columns as the source holds them, but its id (the mirror's own) and the writer
# process's identity (proc_host, proc_start: the liveness of a process on the source's host,
# which the mirror judges by heartbeat). The agent reads every one of RUN_COLUMNS.
RUN_FIELDS = tuple(c for c in RUN_COLUMNS if c not in ("id", "proc_host", "proc_start"))
EVENT_FIELDS = ("wall", "step", "kind", "level", "title", "body")


class SyncError(StoreError):
    """A source that cannot be mirrored (the message says why)."""


@dataclass
class SyncReport:
    """What one sync copied, per source store."""

    stores: int = 0
    runs: set[str] = field(default_factory=set)  # uids seen
    new_runs: int = 0
    points: int = 0
    events: int = 0
    batches: int = 0
    chunks: int = 0  # chunks stored as the source holds them (the rest came as rows)

    def line(self) -> str:
        return (
            f"{self.points} points, {self.events} events, {len(self.runs)} runs "
            f"({self.new_runs} new) from {self.stores} stores"
        )


class Mirror:
    """The local mirror store; `sync(spec)` copies one source into it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        if not isinstance(parse_spec(str(self.path)), LocalSpec):
            raise SyncError(f"the mirror must be a local store path, not {path}")
        try:  # a link another user put there would have the mirror written into what it names
            check_not_planted(self.path)
        except PermissionError as exc:
            raise SyncError(f"the mirror {self.path} {exc.strerror}") from None
        self.engine: Engine = open_store(self.path, create=True)
        mirror_metadata.create_all(self.engine, checkfirst=True)
        self._writers: dict[int, RollupWriter] = {}
        self._chunk_agent = True  # until an agent without the `chunks` op answers

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Mirror:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one source -------------------------------------------------------------------------
    def sync(
        self,
        spec: Spec,
        *,
        ssh: SSHOptions | None = None,
        max_batches: int | None = None,
        progress: Callable[[str], None] | None = None,
        **opts: Any,
    ) -> SyncReport:
        """Copy what is new in every store of `spec`. `max_batches` stops early (a resumable
        partial sync: the next call goes on from there). `ssh` is for an SSH source; `opts` go
        to the source itself (e.g. `python`)."""
        if isinstance(spec, PostgresSpec):
            raise SyncError(
                f"{spec}: a PostgreSQL store lives on its server, not on the GPU box; mirroring "
                "it is not supported (use pg_dump for a copy)"
            )
        source = open_source(spec, ssh, **opts)
        assert isinstance(source, AgentSource)
        report = SyncReport()
        self._chunk_agent = True  # each source's agent says for itself
        try:
            client = source.connect()
            stores, missing = client.discover(source.patterns)
            if not stores:
                raise SyncError(f"no store matches {' '.join(missing) or spec} on {source.label}")
            for store in stores:
                report.stores += 1
                self._sync_store(client, spec.text, store, report, max_batches, progress)
                if max_batches is not None and report.batches >= max_batches:
                    break
        finally:
            source.close()
        return report

    def _sync_store(
        self,
        client: AgentClient,
        spec: str,
        store: str,
        report: SyncReport,
        max_batches: int | None,
        progress,
    ) -> None:
        stored = self._cursor(spec, store)  # as committed in the mirror
        ask = dict(stored)  # what to ask the source for
        while max_batches is None or report.batches < max_batches:
            header, sections, copied = None, {}, None
            limit = BATCH_POINTS
            if self._chunk_agent:
                try:
                    header, sections = client.call(
                        "chunks",
                        store=store,
                        points_after=ask["points_after"],
                        events_after=ask["events_after"],
                        limit=BATCH_POINTS,
                    )
                except AgentRemoteError as exc:
                    if exc.kind != "BadRequest" or "'chunks'" not in str(exc):
                        raise
                    # An agent from before the op: the points come as rows, as they did.
                    self._chunk_agent = False
                    if progress is not None:
                        progress(f"{store}: the agent sends no chunks; copying points as rows")
                if header is not None and header.get("rows"):
                    # Legacy point rows first (a store half upgraded), and no further: the
                    # chunks after them come as they are.
                    rows = int(header.get("rows_upto", 0)) - ask["points_after"]
                    limit = max(1, min(BATCH_POINTS, rows))
                    header = None
            if header is None:
                header, sections = client.call(
                    "poll",
                    store=store,
                    points_after=ask["points_after"],
                    keys_after=0,
                    events_after=ask["events_after"],
                    limit=limit,
                )
            else:
                copied = received_chunks(header, sections, store)
            if ask["store_id"] and header["store_id"] != ask["store_id"]:
                # A new file at that path: its ids start over (its runs have new uids; the
                # mirror keeps the old file's runs).
                ask = {"store_id": header["store_id"], "points_after": 0, "events_after": 0}
                continue
            batch = decode_points(sections) if copied is None else copied
            stored = self._apply(spec, store, stored, header, batch, report, ask["points_after"])
            ask = dict(stored)
            report.batches += 1
            if progress is not None:
                progress(f"{store}: {report.points} points copied")
            if not header.get("more") and not header.get("events_more"):
                self._seal_ended(report)
                return

    def _seal_ended(self, report: SyncReport) -> None:
        """Every point of an ended run is copied: seal its head chunks, as the run's own writer
        did at finish(), so the mirror holds it as sealed chunks too."""
        if not report.runs:
            return
        sealed = []
        try:
            with self.engine.begin() as conn:
                ended = (
                    conn.execute(
                        select(runs.c.id).where(
                            runs.c.uid.in_(sorted(report.runs)), runs.c.status != RUNNING
                        )
                    )
                    .scalars()
                    .all()
                )
                for run_id in ended:
                    writer = self._writers.get(run_id)
                    if writer is None:
                        writer = self._writers[run_id] = RollupWriter(conn.dialect, run_id)
                    writer.seal_all(conn, alone=True)
                    sealed.append(writer)
        except BaseException:
            self._writers.clear()
            raise
        for writer in sealed:
            writer.accept()

    def _cursor(self, spec: str, store: str) -> dict:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(mirror_cursors).where(
                    (mirror_cursors.c.source == spec) & (mirror_cursors.c.store == store)
                )
            ).first()
        if row is None:
            return {"store_id": "", "points_after": 0, "events_after": 0}
        return {
            "store_id": row.store_id,
            "points_after": int(row.points_after),
            "events_after": int(row.events_after),
        }

    def _apply(
        self,
        spec: str,
        store: str,
        cursor: dict,
        header: dict,
        batch,
        report: SyncReport,
        after: int,
    ) -> dict:
        """One reply into the mirror, in one transaction with the cursor it moves to; `batch`:
        the points as rows (PointBatch) or the chunks (list[Copied]) after the source id
        `after`."""
        new_cursor = {
            "store_id": header["store_id"],
            "points_after": int(header["points_cursor"]),
            "events_after": int(header["events_cursor"]),
        }
        pendings: dict = {}
        try:
            with self.engine.begin() as conn:
                if not self._advance(conn, spec, store, cursor, new_cursor):
                    # Another sync into this mirror copied this batch first: take its cursor,
                    # and read the rollup states again (they moved on without us).
                    self._writers.clear()
                    return self._cursor(spec, store)
                run_map = self._runs(conn, header.get("runs") or [], report)
                key_map = self._keys(conn, header.get("keys") or [])
                for row in header.get("events") or []:
                    _id, run_id, *rest = row
                    values = dict(zip(EVENT_FIELDS, rest, strict=True))
                    conn.execute(insert(events).values(run_id=run_map[run_id], **values))
                    report.events += 1
                if isinstance(batch, list):  # chunks as they are stored at the source
                    copier = ChunkCopier(conn, self._writers)
                    chunks = [
                        c._replace(
                            run_id=run_map[c.run_id], key_ids=[key_map[k] for k in c.key_ids]
                        )
                        for c in batch
                    ]
                    try:
                        pendings = copier.copy(chunks, after, new_cursor["points_after"])
                    except ValueError as exc:  # an agent that cut inside a row: a bug there
                        msg = f"{store}: {exc}; nothing of this batch was written"
                        raise SyncError(msg) from None
                    report.points += copier.points
                    report.chunks += copier.whole
                else:
                    self._points(conn, batch, run_map, key_map)
                    report.points += len(batch.steps)
        except BaseException:
            self._writers.clear()  # their in-memory state may hold the rolled-back batch
            raise
        for run_id, pending in pendings.items():
            self._writers[run_id].accept(pending)
        return new_cursor

    def _advance(self, conn: Connection, spec: str, store: str, old: dict, new: dict) -> bool:
        """Move the cursor first (this takes the store's write lock), and only if it is still
        where this batch started: two syncs into one mirror never copy the same rows."""
        values = {**new, "synced_at": time.time()}
        found = conn.execute(
            update(mirror_cursors)
            .where(
                (mirror_cursors.c.source == spec)
                & (mirror_cursors.c.store == store)
                & (mirror_cursors.c.points_after == old["points_after"])
                & (mirror_cursors.c.events_after == old["events_after"])
                & (mirror_cursors.c.store_id == old["store_id"])
            )
            .values(**values)
        ).rowcount
        if found:
            return True
        exists = conn.execute(
            select(mirror_cursors.c.source).where(
                (mirror_cursors.c.source == spec) & (mirror_cursors.c.store == store)
            )
        ).first()
        if exists is not None:
            return False
        conn.execute(insert(mirror_cursors).values(source=spec, store=store, **values))
        return True

    def _runs(self, conn: Connection, rows: list[dict], report: SyncReport) -> dict[int, int]:
        """source run id → mirror run id; new runs inserted, known ones refreshed (by uid)."""
        mapping = {}
        for row in rows:
            values = {k: row[k] for k in RUN_FIELDS}
            found = conn.execute(select(runs.c.id).where(runs.c.uid == row["uid"])).scalar()
            if found is None:
                found = insert_run(conn, values)
                report.new_runs += 1
            else:
                conn.execute(update(runs).where(runs.c.id == found).values(**values))
            report.runs.add(row["uid"])
            mapping[int(row["id"])] = int(found)
        return mapping

    def _keys(self, conn: Connection, rows: list) -> dict[int, int]:
        known = resolve_keys(conn, [name for _key_id, name in rows])
        return {int(key_id): known[name] for key_id, name in rows}

    def _points(self, conn: Connection, batch, run_map, key_map) -> None:
        """Insert in the source's id order, per run, through the rollup writer."""
        per_run: dict[int, list[tuple]] = {}
        for run_id, key_id, step, wall, value in zip(
            batch.run_ids.tolist(),
            batch.key_ids.tolist(),
            batch.steps.tolist(),
            batch.walls.tolist(),
            batch.values.tolist(),
            strict=True,
        ):
            mirror_run = run_map[run_id]
            value = None if value != value else value  # NaN is NULL in a store
            per_run.setdefault(mirror_run, []).append(
                (mirror_run, key_map[key_id], step, wall, value)
            )
        for mirror_run, rows in per_run.items():
            writer = self._writers.get(mirror_run)
            if writer is None:
                writer = self._writers[mirror_run] = RollupWriter(conn.dialect, mirror_run)
            for part, groups in logged_together(rows):
                # The writer's states move on part by part inside this transaction; if it
                # rolls back, _apply drops the writers and they are read back from the store.
                writer.accept(writer.insert(conn, part, groups))


def logged_together(rows: list[tuple]) -> list[tuple[list, list]]:
    """One run's points (run, key, step, wall, value), in the source's id order, cut into parts
    with their groups (steps, walls, {key: values}) of keys logged together, so the mirror's
    chunks share a step/wall stream a group as the source's do (about half the bytes of one
    series a chunk). A logged row's points have consecutive ids: a run of points with one step
    and wall and distinct keys is one row; rows with the same keys, one group. A key is in one
    group of a part (RollupWriter.insert): a row whose keys overlap another group's (keys
    logged with new companions, a row the batch limit cut in two) starts the next part."""
    parts: list[tuple[list, list]] = []
    groups: dict[tuple, tuple] = {}
    owner: set[int] = set()
    first, i, n = 0, 0, len(rows)
    while i < n:
        step, wall = rows[i][2], rows[i][3]
        keys = {rows[i][1]}
        j = i + 1
        while j < n and rows[j][2] == step and rows[j][3] == wall and rows[j][1] not in keys:
            keys.add(rows[j][1])
            j += 1
        sig = tuple(sorted(keys))
        group = groups.get(sig)
        if group is None:
            if owner & keys:
                parts.append((rows[first:i], list(groups.values())))
                groups, owner, first = {}, set(), i
            owner |= keys
            group = groups[sig] = ([], [], {k: [] for k in sig})
        group[0].append(step)
        group[1].append(wall)
        for row in rows[i:j]:
            group[2][row[1]].append(row[4])
        i = j
    if first < n:
        parts.append((rows[first:], list(groups.values())))
    return parts


def received_chunks(header: dict, sections: dict, store: str) -> list[Copied]:
    """The chunks of a `chunks` reply, each checked whole (its CRC-32, lengths, rows and
    columns) before any is stored: a damaged one stops the sync with the mirror as the last
    batch left it."""
    listed = header.get("chunks") or []
    _about, data = sections.get("chunks", ({}, b""))
    uids = {int(r["id"]): r["uid"] for r in header.get("runs") or []}
    out, at = [], 0
    for run_id, key_ids, id_lo, id_hi, n, _step_lo, _step_hi, sealed, size in listed:
        blob = bytes(data[at : at + size])
        at += size
        try:
            if len(blob) != size:
                raise ValueError(f"corrupt chunk: {len(blob)} of its {size} bytes arrived")
            verify(blob, n, len(key_ids), id_lo, id_hi)
        except ValueError as exc:
            raise SyncError(
                f"{store}: chunk of points {id_lo}..{id_hi} of run {uids.get(run_id, run_id)}"
                f" arrived damaged ({exc}); nothing of this batch was written, the mirror"
                " holds what the syncs before copied"
            ) from None
        out.append(
            Copied(
                int(run_id),
                [int(k) for k in key_ids],
                int(id_lo),
                int(id_hi),
                int(n),
                int(sealed),
                blob,
            )
        )
    if at != len(data):
        raise SyncError(f"{store}: {len(data) - at} bytes of chunks no entry describes")
    return out


def sync_all(
    specs: Iterable[Spec],
    mirror: str | Path,
    *,
    ssh: SSHOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> SyncReport:
    """Every source into one mirror, once."""
    total = SyncReport()
    with Mirror(mirror) as m:
        for spec in specs:
            r = m.sync(spec, ssh=ssh, progress=progress)
            total.stores += r.stores
            total.runs |= r.runs
            total.new_runs += r.new_runs
            total.points += r.points
            total.events += r.events
            total.batches += r.batches
            total.chunks += r.chunks
    return total
