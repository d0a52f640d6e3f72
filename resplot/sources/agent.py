"""Sources that read a store through a reslog agent, and how an agent's replies go into the cache
so that a reconnect loses and duplicates nothing.

A transport-specific source (LocalSource: an agent subprocess; SSHSource: an agent on an SSH
exec channel; OpenSSHSource: through the system ssh binary) subclasses AgentSource and supplies
only `_connect()`; discovery, the pipelined poll loop and the cursor bookkeeping live here, so
every transport runs one tested path.

What a store costs to look at does not grow with its history (docs/protocol.md): the first poll
reads runs, keys, events and one summary row per series, and starts the live cursor at the
store's end; the charts then ask for tiles at the resolution they draw (SeriesCache.want_tiles),
which the next poll fetches in the same snapshot as the live points.
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from dataclasses import replace
from typing import Any

import numpy as np

from reslog.agent.wire import MAX_TILES, ROW_LAYOUTS
from resplot.data.cache import SeriesCache, Summary
from resplot.data.model import Event, RunInfo, RunRef
from resplot.data.tiles import Tile, agg_at
from resplot.sources.apply import Points, Reply, apply_reply
from resplot.sources.base import PollResult, Progress, Source, StoreCursor
from resplot.sources.client import (
    AgentClient,
    AgentConnectionError,
    decode_columns,
    decode_points,
    rows_table,
    table_columns,
)
from schema.store import buckets
from schema.store.errors import StoreError, StoreNotFound
from schema.store.read import run_from_row
from schema.store.status import row_status


class _Row:
    """schema.store.read.run_from_row reads `row._mapping`; the agent sends plain dicts."""

    __slots__ = ("_mapping",)

    def __init__(self, mapping: dict[str, Any]) -> None:
        self._mapping = mapping


def summaries_from(columns: dict[str, np.ndarray]) -> dict[tuple[int, int], Summary]:
    """{(run_id, key_id): Summary} of a series section (or rows read through SQLAlchemy)."""
    # Python lists first: agg_at on numpy scalars (an .item() a value) took ~60 ms of a first
    # view's 888 series rows, 4x this.
    cols = {name: np.asarray(col).tolist() for name, col in columns.items()}
    run_ids, key_ids, levels = cols["run_id"], cols["key_id"], cols["levels"]
    steps, walls = cols["tail_step"], cols["tail_wall"]
    out = {}
    for i in range(len(run_ids)):
        tail = (int(steps[i]), float(walls[i]))
        out[(int(run_ids[i]), int(key_ids[i]))] = Summary(agg_at(cols, i), int(levels[i]), tail)
    return out


def tiles_from(section: tuple) -> list[tuple[int, int, int, int, dict[str, np.ndarray]]]:
    """(run_id, key_id, level, index, columns) of each tile in a "buckets" or "raw" section."""
    about, data = section
    if int(about.get("rows", 0)) != sum(t[4] for t in about.get("tiles", [])):
        raise AgentConnectionError(f"section {about.get('name')}: tiles do not add up to its rows")
    table = rows_table(about, data, ROW_LAYOUTS)
    out, at = [], 0
    for run_id, key_id, level, index, rows in about.get("tiles", []):
        # Decoded tile by tile, so each owns its arrays and the cache's byte bound is true
        # (decoding the section at once and copying slices measured twice as slow).
        out.append((run_id, key_id, level, index, table_columns(table[at : at + rows])))
        at += rows
    return out


class StoreView:
    """One store of a source: its cursor and what the cache needs to place points and tiles."""

    def __init__(self, source: str, path: str) -> None:
        self.source, self.path = source, path
        self.cursor = StoreCursor()
        self.raw: dict[int, dict[str, Any]] = {}  # run row id → raw row from the agent
        self.infos: dict[int, RunInfo] = {}
        self.keys: dict[int, str] = {}
        self.store_id: str | None = None  # the file the agent read (device:inode)
        self.have_series = False  # the summary rows of every series were read
        self.refetch: set[tuple[int, int]] = set()  # series to read again (they restarted)
        self.epoch = 0  # replies applied: tiles and summaries carry the one they came with

    def run_id(self, uid: str) -> int | None:
        return next((i for i, info in self.infos.items() if info.ref.uid == uid), None)

    def key_id(self, name: str) -> int | None:
        return next((i for i, k in self.keys.items() if k == name), None)

    def cursor_after(self, header: dict[str, Any]) -> StoreCursor:
        c = self.cursor
        return StoreCursor(
            points=int(header.get("points_cursor", c.points)),
            events=int(header.get("events_cursor", c.events)),
            keys=int(header.get("keys_cursor", c.keys)),
            runs_fp=header.get("runs_fp", c.runs_fp),
            beats_fp=header.get("beats_fp", c.beats_fp),
        )

    def _reset(self, cache: SeriesCache) -> None:
        self.cursor, self.raw, self.infos, self.keys = StoreCursor(), {}, {}, {}
        self.have_series, self.refetch = False, set()
        cache.drop_store(self.source, self.path)

    def apply(self, cache: SeriesCache, header: dict[str, Any], sections: dict) -> PollResult:
        """Apply one poll reply and advance the cursor; both or neither.

        A reply naming a run or key this view does not know (only possible after a store was
        swapped under us) is not applied: the next poll reads runs and keys from the start."""
        result = PollResult()
        store_id = header.get("store_id")
        if store_id is not None and store_id != self.store_id:
            if self.store_id is not None:
                # Another file at this path: its ids start over below our cursors. Forget the
                # old file's runs and read the new one from the start (this reply is discarded).
                self._reset(cache)
                self.store_id = store_id
                result.runs_changed = True
                result.errors.append(f"{self.path}: the store file was replaced; reading it anew")
                return result
            self.store_id = store_id
        raw = dict(self.raw)
        if "runs" in header:
            raw = {int(r["id"]): r for r in header["runs"]}
        elif "beats" in header:
            for run_id, status, heartbeat_at, ended_at, alive, stalled_since in header["beats"]:
                if run_id in raw:
                    raw[run_id] = {
                        **raw[run_id],
                        "status": status,
                        "heartbeat_at": heartbeat_at,
                        "ended_at": ended_at,
                        "alive": alive,
                        "stalled_since": stalled_since,
                    }
        keys = self.keys
        if header.get("keys"):
            keys = {**keys, **{int(i): name for i, name in header["keys"]}}
        batch = decode_points(sections)
        groups = group_rows(batch.run_ids, batch.key_ids)
        series = summaries_from(decode_columns(sections["series"])) if "series" in sections else {}
        tiles = []
        for name in ("buckets", "raw"):
            if name in sections:
                tiles += tiles_from(sections[name])
        named = {r for r, _, _ in groups} | {r for r, _ in series} | {t[0] for t in tiles}
        named |= {row[1] for row in header.get("events", ())}
        known_keys = {k for _, k, _ in groups} | {k for _, k in series} | {t[1] for t in tiles}
        if any(r not in raw for r in named) or any(k not in keys for k in known_keys):
            self.cursor = StoreCursor(self.cursor.points, self.cursor.events)
            self.raw, self.keys = {}, {}
            result.errors.append(f"{self.path}: reply referenced unknown runs or keys; re-reading")
            return result

        self.raw, self.keys = raw, keys
        self.epoch += 1
        runs = self._refresh_infos(force="runs" in header or "beats" in header)
        reply = Reply(self.epoch, runs, [self._event(row) for row in header.get("events", ())])
        for (run_id, key_id), summary in series.items():
            reply.summaries.setdefault(self.infos[run_id].ref, {})[keys[key_id]] = summary
        for run_id, key_id, idx in groups:
            ref, key = self.infos[run_id].ref, keys[key_id]
            steps, walls, values = batch.steps[idx], batch.walls[idx], batch.values[idx]
            reply.points.append(Points((run_id, key_id), ref, key, steps, walls, values))
        for run_id, key_id, level, index, cols in tiles:
            tile = Tile(level, index, cols, self.epoch)
            reply.tiles.append((self.infos[run_id].ref, keys[key_id], tile))
        # The live points of this reply stop short of the tiles' snapshot.
        reply.tiles_again = bool(header.get("more"))
        result, restarted = apply_reply(cache, reply)
        if "series" in sections:
            self.have_series = True
        self.refetch = (self.refetch - set(series)) | restarted  # restarted: read it again
        self.cursor = self.cursor_after(header)
        return result

    def refresh_status(self, cache: SeriesCache) -> bool:
        """Re-derive effective status (a silent run turns "crashed" with no store change)."""
        runs = self._refresh_infos(force=False)
        return apply_reply(cache, Reply(self.epoch, runs))[0].runs_changed

    def _refresh_infos(self, *, force: bool) -> list[RunInfo]:
        """The runs whose info changed; `force` reads them all from the raw rows again."""
        now = time.time()
        changed: list[RunInfo] = []
        if force:
            infos = {}
            for run_id, row in self.raw.items():
                info = run_from_row(_Row(row), self.source, self.path, now)
                infos[run_id] = info
                if self.infos.get(run_id) != info:
                    changed.append(info)
            self.infos = infos
        else:
            for run_id, info in list(self.infos.items()):
                row = self.raw[run_id]
                status = row_status(row, now)
                if status != info.status:
                    # A new object: the cache's readers hold the old one.
                    self.infos[run_id] = replace(info, status=status)
                    changed.append(self.infos[run_id])
        return changed

    def _event(self, row: list[Any]) -> Event:
        event_id, run_id, wall, step, kind, level, title, body = row
        return Event(self.infos[run_id].ref, event_id, wall, step, kind, level, title, body or "")

    def tile_requests(self, cache: SeriesCache) -> list[list[int]]:
        """[run_id, key_id, level, first index, count] ranges of the tiles the charts want from
        this store."""
        out = []
        for uid, key, level, first, count in tile_ranges(cache.take_wanted(self.source, self.path)):
            run_id, key_id = self.run_id(uid), self.key_id(key)
            if run_id is not None and key_id is not None:
                out.append([run_id, key_id, level, first, count])
        return out

    def series_request(self) -> bool | list[list[int]]:
        """Every series row on the first poll; afterwards those of series that restarted."""
        if not self.have_series:
            return True
        return [list(p) for p in sorted(self.refetch)]


def split_tiles(ranges: list[list[int]], limit: int) -> list[list[list[int]]]:
    """Tile ranges [run_id, key_id, level, first, count] cut into requests of at most `limit`
    tiles each (a range longer than that split across them); one empty request for none."""
    out: list[list[list[int]]] = [[]]
    room = limit
    for run_id, key_id, level, first, count in ranges:
        while count > 0:
            if room == 0:
                out.append([])
                room = limit
            take = min(count, room)
            out[-1].append([run_id, key_id, level, first, take])
            first, count, room = first + take, count - take, room - take
    return out


def tile_ranges(wanted) -> list[tuple[str, str, int, int, int]]:
    """Wanted tiles (uid, key, level, index), sorted, as (uid, key, level, first, count) runs of
    consecutive indices: one read each, however sparse the series."""
    out: list[list] = []
    for uid, key, level, index in sorted(wanted):
        last = out[-1] if out else None
        if last and last[:3] == [uid, key, level] and last[3] + last[4] == index:
            last[4] += 1
        else:
            out.append([uid, key, level, index, 1])
    return [tuple(r) for r in out]


def group_rows(run_ids: np.ndarray, key_ids: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """(run id, key id, row indices in arrival order) for each series present in a batch.

    The ids are mapped to a dense uint16 code first, so the stable sort is numpy's radix sort
    (a million rows in ~20 ms instead of ~50 ms for int64 plus two np.unique calls)."""
    if len(run_ids) == 0:
        return []
    runs, run_code = _dense(run_ids)
    keys, key_code = _dense(key_ids)
    code = run_code * len(keys) + key_code
    if len(runs) * len(keys) <= 1 << 16:
        code = code.astype(np.uint16)
    order = np.argsort(code, kind="stable")
    counts = np.bincount(code, minlength=len(runs) * len(keys))
    out = []
    start = 0
    for c in np.flatnonzero(counts):
        end = start + int(counts[c])
        out.append((int(runs[c // len(keys)]), int(keys[c % len(keys)]), order[start:end]))
        start = end
    return out


def _dense(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct ids, each row's index into them); bincount when the ids are small."""
    top = int(ids.max())
    if top < 4 * len(ids) + 1024:
        present = np.flatnonzero(np.bincount(ids, minlength=top + 1))
        lookup = np.zeros(top + 1, dtype=np.int64)
        lookup[present] = np.arange(len(present))
        return present, lookup[ids]
    distinct, inverse = np.unique(ids, return_inverse=True)
    return distinct, inverse.astype(np.int64)


class AgentReader:
    """Raw points of one run through a source's agent, page by page (exports); `scan` does I/O
    on the calling thread, under the source's request lock."""

    def __init__(self, source: AgentSource, view: StoreView, run_id: int) -> None:
        self.source, self.view, self.run_id = source, view, run_id

    def scan(self, key: str, start: int | None = None, stop: int | None = None):
        key_id = self.view.key_id(key)
        if key_id is None:
            return
        lo = -(2**63) if start is None else int(start)
        hi = 2**63 - 1 if stop is None else int(stop)
        after = None
        failing_since, delay = None, 0.5
        while lo < hi:
            try:
                cols, last, more = self.source.request_raw(
                    self.view.path, self.run_id, key_id, lo, hi, after
                )
            except AgentConnectionError:
                # A cut or stalled connection: reconnect and ask for this very page again (the
                # cursor is the last point already yielded), as `resplot sync` resumes.
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > self.source.export_retry_s:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            failing_since, delay = None, 0.5
            if len(cols["step"]):
                yield list(
                    zip(
                        cols["step"].tolist(),
                        cols["wall"].tolist(),
                        cols["value"].tolist(),
                        strict=True,
                    )
                )
            if not more or last is None:
                return
            lo, after = last


class AgentSource(Source):
    """A source read through the agent protocol; subclasses provide the transport."""

    compress = False  # zlib big replies: worth it on a network, not on a local pipe
    limit = 1_000_000  # live points per reply
    raw_page = 200_000  # raw points per export page
    export_retry_s = 120.0  # how long an export page is retried over a broken connection
    rediscover_s = 10.0

    def __init__(self, spec: str, label: str, patterns: list[str]) -> None:
        super().__init__(spec, label)
        self.patterns = patterns
        self.views: dict[str, StoreView] = {}
        self.client: AgentClient | None = None
        self._discovered_at = -float("inf")
        self._found: list[str] | None = None  # stores found by connect(), not yet taken in
        # One request at a time on the agent's stream: the poller's worker and an export.
        self._lock: threading.RLock = threading.RLock()

    @abstractmethod
    def _connect(self) -> AgentClient:
        """Open the transport and start an agent on it; return a client over its streams."""

    def _disconnect(self) -> None:
        """Drop the transport (subclasses extend this to close channels or processes)."""
        client, self.client = self.client, None
        if client is not None:
            client.close()

    def close(self) -> None:
        self._disconnect()

    @property
    def rtt_ms(self) -> float | None:
        return self.client.rtt_ms if self.client is not None else None

    def connect(self) -> AgentClient:
        if self.client is None:
            client = self._connect()
            try:
                # Discovery goes right behind hello, not a round trip after its reply.
                hello = client.send("hello")
                found = client.send("discover", patterns=list(self.patterns))
                client.hello_reply(hello)
                stores = client.discover_reply(found)[0]
            except BaseException:
                self.client = client
                self._disconnect()
                raise
            self.client = client
            self._discovered_at = -float("inf")
            self._found = stores
        return self.client

    def reader(self, ref: RunRef) -> AgentReader:
        view = self.views.get(ref.store)
        run_id = view.run_id(ref.uid) if view is not None else None
        if view is None or run_id is None:
            raise StoreError(f"{ref.store}: no run {ref.uid[:8]} here any more")
        return AgentReader(self, view, run_id)

    def request_raw(self, store: str, run_id: int, key_id: int, lo: int, hi: int, after):
        """One page of raw points (AgentReader.scan); reconnects like a poll would."""
        with self._lock:
            try:
                client = self.connect()
                return client.raw(
                    store, run_id, key_id, lo, hi, after_id=after, limit=self.raw_page
                )
            except StoreError:
                raise
            except BaseException:
                self._disconnect()
                raise

    def poll(self, cache: SeriesCache, progress: Progress | None = None) -> PollResult:
        with self._lock, cache.fetching(self.label):
            return self._poll(cache, progress)

    def _poll(self, cache: SeriesCache, progress: Progress | None) -> PollResult:
        try:
            client = self.connect()
            # What the host folds fine tiles with sets the page's budget of them; an agent from
            # before `hello` said ("fold" missing) folds with the builtins.
            cache.set_fold(self.label, str(client.info.get("fold") or "builtins"))
            if time.monotonic() - self._discovered_at >= self.rediscover_s:
                self._discover(client)
            result = PollResult()
            failures: list[StoreError] = []
            for view in list(self.views.values()):
                try:
                    result.merge(self._poll_store(client, view, cache, progress))
                except StoreError as exc:
                    failures.append(exc)
                    result.errors.append(str(exc))
        except StoreError:
            raise  # an error reply: the stream is still in step
        except BaseException:
            # Connection lost, or the caller aborted from `progress` with a request in flight:
            # either way this stream is out of step; the next poll reconnects.
            self._disconnect()
            raise
        if failures and len(failures) == len(self.views):
            raise failures[0]
        return result

    def _discover(self, client: AgentClient) -> None:
        stores, self._found = self._found, None  # what connect() found, if it just did
        if stores is None:
            stores = client.discover(self.patterns)[0]
        if not stores and not self.views:
            raise StoreNotFound(f"no store matches {' '.join(self.patterns)} on {self.label}")
        for path in stores:
            if path not in self.views:
                self.views[path] = StoreView(self.label, path)
        self._discovered_at = time.monotonic()

    def _poll_store(
        self, client: AgentClient, view: StoreView, cache: SeriesCache, progress: Progress | None
    ) -> PollResult:
        total = PollResult(runs_changed=view.refresh_status(cache))
        if total.runs_changed and progress is not None:
            progress(PollResult(runs_changed=True))
        # The agent serves at most MAX_TILES tiles a request: more go in further polls, each
        # one consistent with the live points it brings (a separate `tiles` read would not be).
        # Fine tiles (folded on the host from every raw point in view) go in requests of their
        # own after the others: the coarse stand-ins asked for with them arrive, and are drawn,
        # while the host folds.
        coarse, fine = [], []
        for r in view.tile_requests(cache):
            (fine if buckets.is_fine(r[2]) else coarse).append(r)
        chunks = split_tiles(coarse, MAX_TILES) + (split_tiles(fine, MAX_TILES) if fine else [])
        for i, tiles in enumerate(chunks):
            series = view.series_request() if i == 0 else False
            total.merge(self._poll_once(client, view, cache, progress, series, tiles))
        return total

    def _poll_once(
        self,
        client: AgentClient,
        view: StoreView,
        cache: SeriesCache,
        progress: Progress | None,
        series,
        tiles: list,
    ) -> PollResult:
        total = PollResult()
        rid = client.send_poll(view.path, view.cursor, limit=self.limit, series=series, tiles=tiles)
        while True:
            header, sections = client.receive(rid)
            more = bool(header.get("more")) or bool(header.get("events_more"))
            # Pipelining: ask for the next batch before applying this one, so the agent reads
            # while we decode. The cursor still only advances inside apply().
            if more:
                rid = client.send_poll(view.path, view.cursor_after(header), limit=self.limit)
            step = view.apply(cache, header, sections)
            total.merge(step)
            if progress is not None:
                progress(step)
            if step.errors and more:
                client.receive(rid)  # drain the in-flight reply; re-read from the old cursor
                break
            if not more:
                break
        return total


__all__ = [
    "AgentConnectionError",
    "AgentReader",
    "AgentSource",
    "StoreView",
    "group_rows",
    "split_tiles",
    "summaries_from",
    "tile_ranges",
    "tiles_from",
]
