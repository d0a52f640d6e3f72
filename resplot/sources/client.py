"""The client side of the agent protocol (docs/protocol.md) over any pair of binary streams.

The transport is not this module's business: LocalSource hands it a subprocess's pipes, the SSH
source an exec channel's stdin/stdout. Framing and the section codec are the agent's own
(reslog.agent.wire), so both ends share one implementation and the local path tests the remote.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from reslog.agent import wire
from reslog.agent.bundle import boot_bytes
from reslog.agent.wire import KEY_BITS, POINT_LAYOUTS, ROW_LAYOUTS
from schema.store.errors import NotAStore, SchemaTooNew, SchemaTooOld, StoreError, StoreNotFound

PROTOCOL = wire.PROTOCOL

ERRORS: dict[str, type[StoreError]] = {
    "StoreNotFound": StoreNotFound,
    "NotAStore": NotAStore,
    "SchemaTooNew": SchemaTooNew,
    "SchemaTooOld": SchemaTooOld,
    "StoreError": StoreError,
}


class AgentConnectionError(ConnectionError):
    """The stream to the agent broke (EOF, bad frame, agent died): reconnect and resume."""


class AgentRemoteError(RuntimeError):
    """The agent answered with an error that is not about a store (bad request, agent bug)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass
class PointBatch:
    """Live points in id order: store-local run and key ids, steps, walls, values (NaN
    restored)."""

    run_ids: np.ndarray  # int64
    key_ids: np.ndarray  # int64
    steps: np.ndarray  # int64
    walls: np.ndarray  # float64
    values: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.steps)


def _layout_dtype(layout: str) -> np.dtype:
    codes = {"q": "<i8", "d": "<f8", "B": "u1"}
    return np.dtype(
        [(name, codes[code]) for name, code in (f.split(":") for f in layout.split(","))]
    )


LAYOUTS = {layout: _layout_dtype(layout) for layout in (*POINT_LAYOUTS, *ROW_LAYOUTS)}
_EMPTY_I, _EMPTY_F = np.empty(0, np.int64), np.empty(0, np.float64)
EMPTY_BATCH = PointBatch(_EMPTY_I, _EMPTY_I, _EMPTY_I, _EMPTY_F, _EMPTY_F)


def rows_table(about: dict, data: bytes, layouts=tuple(LAYOUTS)) -> np.ndarray:
    """A packed-rows section as a structured array (read-only when it is the payload's own
    buffer), unshuffled if the agent shuffled it (wire.Sections.shuffle)."""
    layout = about.get("layout", "")
    if layout not in layouts:
        raise AgentRemoteError("ProtocolError", f"unknown {about.get('name')} layout {layout!r}")
    dtype = LAYOUTS[layout]
    n = int(about.get("rows", 0))
    if len(data) != n * dtype.itemsize:
        name = about.get("name")
        raise AgentConnectionError(f"section {name} has {len(data)} bytes for {n} rows")
    if about.get("shuffled"):
        planes = np.frombuffer(data, dtype=np.uint8).reshape(dtype.itemsize, n)
        data = np.ascontiguousarray(planes.T).tobytes()
    return np.frombuffer(data, dtype=dtype)


def decode_points(sections: dict) -> PointBatch:
    """The live points of a reply (its "points" section; none: an empty batch)."""
    if "points" not in sections:
        return EMPTY_BATCH
    about, data = sections["points"]
    table = rows_table(about, data, POINT_LAYOUTS)
    if "rkn" in table.dtype.names:
        run_ids = table["rkn"] >> (KEY_BITS + 1)
        keyflag = table["rkn"] & ((1 << (KEY_BITS + 1)) - 1)
    else:
        run_ids = table["run"].astype(np.int64)
        keyflag = table["kn"]
    values = table["value"].astype(np.float64)  # a copy: the payload buffer is read-only
    values[(keyflag & 1).astype(bool)] = np.nan  # NULL in the store means NaN
    return PointBatch(
        run_ids=run_ids,
        key_ids=keyflag >> 1,
        steps=table["step"].astype(np.int64),
        walls=table["wall"].astype(np.float64),
        values=values,
    )


def decode_columns(section: tuple) -> dict[str, np.ndarray]:
    """{column name: array} of a columnar section (wire.Sections.add_columns)."""
    about, data = section
    n = int(about.get("rows", 0))
    out, at = {}, 0
    for spec in about.get("columns", []):
        name, code = spec.split(":")
        dtype = np.dtype("<i8" if code == "q" else "<f8")
        size = n * dtype.itemsize
        if at + size > len(data):
            raise AgentConnectionError(f"section {about.get('name')} is shorter than its rows")
        out[name] = np.frombuffer(data, dtype=dtype, count=n, offset=at).astype(
            dtype.newbyteorder("=")
        )
        at += size
    if at != len(data):
        raise AgentConnectionError(f"section {about.get('name')} has {len(data) - at} extra bytes")
    return out


def decode_rows(section: tuple) -> dict[str, np.ndarray]:
    """{column name: array} of a packed-rows section ("buckets" or "raw", docs/protocol.md), with
    the store's NULLs back as NaN: the agent coalesces them to 0 and flags the ones the counts
    cannot tell in `nulls` (buckets) or `null` (raw)."""
    about, data = section
    return table_columns(rows_table(about, data, ROW_LAYOUTS))


def table_columns(table: np.ndarray) -> dict[str, np.ndarray]:
    """decode_rows() of rows already in a structured array (a slice of a section's)."""
    names = table.dtype.names
    # One copy a column, in native order and writable (the payload buffer is read-only).
    out = {name: table[name].astype(table.dtype[name].newbyteorder("=")) for name in names}
    if "null" in out:  # raw points
        out["value"][out.pop("null") != 0] = np.nan
        return out
    nulls = out.pop("nulls")
    out["vsum"][(nulls & 1) != 0] = np.nan
    out["last"][(nulls & 2) != 0] = np.nan
    no_finite = out["n"] - out["nan"] - out["posinf"] - out["neginf"] == 0
    out["vmin"][no_finite] = np.nan
    out["vmax"][no_finite] = np.nan
    return out


class AgentClient:
    """Requests and replies over (rfile, wfile); one outstanding request at a time, or several
    pipelined with send()/receive() in order."""

    def __init__(self, rfile: BinaryIO, wfile: BinaryIO, *, compress: bool = False) -> None:
        self.rfile, self.wfile = _CountingReader(rfile), wfile
        self.compress = compress
        self._ids = itertools.count(1)
        self._sent_at: dict[int, float] = {}
        self.bytes_sent = 0
        self.rtt_ms: float | None = None
        self.info: dict[str, Any] = {}
        self.closed = False

    @property
    def bytes_received(self) -> int:
        return self.rfile.count

    # -- raw frames ---------------------------------------------------------------------------
    def boot(self) -> None:
        """Send the agent's archive, which the launcher (reslog.agent.bundle) reads from stdin
        before the first frame."""
        with self._explained():
            try:
                self.bytes_sent += self.wfile.write(boot_bytes()) or 0
                self.wfile.flush()
            except (OSError, ValueError) as exc:
                raise AgentConnectionError(f"cannot send the agent: {exc}") from exc

    def explain(self, exc: AgentConnectionError) -> str | None:
        """What a broken connection says beyond `exc` (None: nothing): a subclass that knows the
        agent's process or channel tells how it ended, on a send too (a send can be what first
        meets a dead agent: a broken pipe)."""
        return None

    @contextlib.contextmanager
    def _explained(self) -> Iterator[None]:
        try:
            yield
        except AgentConnectionError as exc:
            why = self.explain(exc)
            if why is None:
                raise
            raise AgentConnectionError(why) from exc

    def send(self, op: str, **args: Any) -> int:
        with self._explained():
            return self._send(op, **args)

    def receive(self, rid: int) -> tuple[dict[str, Any], dict]:
        """(reply header, {section name: (description, bytes)}) of request `rid`."""
        with self._explained():
            return self._receive(rid)

    def _send(self, op: str, **args: Any) -> int:
        rid = next(self._ids)
        header = {"op": op, "id": rid, **args}
        if self.compress:
            header["compress"] = True
        try:
            self.bytes_sent += wire.write_frame(self.wfile, header)
        except (OSError, ValueError) as exc:  # ValueError: write to a closed file
            raise AgentConnectionError(f"cannot send to the agent: {exc}") from exc
        self._sent_at[rid] = time.perf_counter()
        return rid

    def _receive(self, rid: int) -> tuple[dict[str, Any], dict]:
        try:
            frame = wire.read_frame(self.rfile)
        except wire.ProtocolError as exc:
            raise AgentConnectionError(f"broken frame from the agent: {exc}") from exc
        except wire.AgentError as exc:
            raise AgentConnectionError(f"unreadable frame from the agent: {exc}") from exc
        except (OSError, ValueError) as exc:
            raise AgentConnectionError(f"cannot read from the agent: {exc}") from exc
        if frame is None:
            raise AgentConnectionError("the agent closed the connection")
        header, payload = frame
        sent = self._sent_at.pop(rid, None)
        if sent is not None:
            self.rtt_ms = (time.perf_counter() - sent) * 1000.0
        if header.get("id") != rid:
            kind = (header.get("error") or {}).get("type")
            if kind == "ProtocolError":
                raise AgentConnectionError(header["error"].get("message", "protocol error"))
            raise AgentConnectionError(f"reply {header.get('id')} out of order (wanted {rid})")
        if not header.get("ok"):
            err = header.get("error") or {}
            kind, message = str(err.get("type", "AgentError")), str(err.get("message", ""))
            exc_type = ERRORS.get(kind)
            if exc_type is not None:
                raise exc_type(message)
            raise AgentRemoteError(kind, message)
        if header.get("z"):
            payload = zlib.decompress(payload)
        try:
            sections = wire.split_sections(header, payload)
        except wire.ProtocolError as exc:
            raise AgentConnectionError(f"broken reply from the agent: {exc}") from exc
        return header, sections

    def call(self, op: str, **args: Any) -> tuple[dict[str, Any], dict]:
        return self.receive(self.send(op, **args))

    # -- requests -----------------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        return self.hello_reply(self.send("hello"))

    def hello_reply(self, rid: int) -> dict[str, Any]:
        """The agent's answer to hello request `rid` (sent, maybe with others behind it)."""
        info, _ = self.receive(rid)
        if info.get("protocol") != PROTOCOL:
            raise AgentRemoteError(
                "ProtocolMismatch",
                f"agent speaks protocol {info.get('protocol')}, this resplot {PROTOCOL}",
            )
        self.info = info
        return info

    def discover(self, patterns: list[str]) -> tuple[list[str], list[str]]:
        return self.discover_reply(self.send("discover", patterns=list(patterns)))

    def discover_reply(self, rid: int) -> tuple[list[str], list[str]]:
        reply, _ = self.receive(rid)
        return list(reply["stores"]), list(reply["missing"])

    def send_poll(
        self,
        store: str,
        cursor: Any,
        *,
        limit: int,
        series: bool | list[list[int]] = False,
        tiles: list[list[int]] | None = None,
    ) -> int:
        """Ask for everything new after `cursor` (sources.base.StoreCursor) in one round trip,
        with series rows (all, or [run_id, key_id] pairs) and tiles [run_id, key_id, level,
        index] read in the same snapshot."""
        args: dict[str, Any] = {}
        if series:
            args["series"] = series
        if tiles:
            args["tiles"] = tiles
        return self.send(
            "poll",
            store=store,
            runs_fp=cursor.runs_fp,
            beats_fp=cursor.beats_fp,
            keys_after=cursor.keys,
            points_after=cursor.points,
            events_after=cursor.events,
            limit=limit,
            **args,
        )

    def points(self, store: str, after: int = 0, *, limit: int = 1_000_000) -> tuple:
        """(PointBatch, cursor, more) of points after an id cursor."""
        header, sections = self.call("points", store=store, after=after, limit=limit)
        return decode_points(sections), int(header["points_cursor"]), bool(header["more"])

    def raw(
        self,
        store: str,
        run_id: int,
        key_id: int,
        start: int,
        stop: int,
        *,
        after_id: int | None = None,
        limit: int = 200_000,
    ) -> tuple[dict[str, np.ndarray], tuple[int, int] | None, bool]:
        """One page of a series' raw points with start <= step < stop: (columns step, wall,
        value, id; (step, id) of the last point, to go on from; more)."""
        header, sections = self.call(
            "raw",
            store=store,
            run_id=run_id,
            key_id=key_id,
            start=start,
            stop=stop,
            after_id=after_id,
            limit=limit,
        )
        last = header.get("last")
        return decode_rows(sections["raw"]), (tuple(last) if last else None), header["more"]

    def close(self) -> None:
        """Say goodbye (best effort) and close both streams; idempotent."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError, ValueError):
            wire.write_frame(self.wfile, {"op": "bye", "id": 0})
        for stream in (self.wfile, self.rfile):
            with contextlib.suppress(OSError, ValueError):
                stream.close()


class _CountingReader:
    """Counts the bytes read, so a poll's cost on the wire can be reported and tested."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.count = 0

    def read(self, n: int) -> bytes:
        data = self.raw.read(n)
        if data:
            self.count += len(data)
        return data

    def close(self) -> None:
        self.raw.close()
