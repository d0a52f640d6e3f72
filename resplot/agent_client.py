"""The client side of the agent protocol (docs/protocol.md) over any pair of binary streams.

The transport is not this module's business: LocalSource hands it a subprocess's pipes, the SSH
source an exec channel's stdin/stdout. Framing is imported from reslog.agent itself, so both
ends share one implementation and the local path tests the remote one.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import time
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from reslog import agent as wire
from schema.errors import NotAStore, SchemaTooNew, SchemaTooOld, StoreError, StoreNotFound

AGENT_PATH = Path(wire.__file__).resolve()
PROTOCOL = wire.PROTOCOL

ERRORS: dict[str, type[StoreError]] = {
    "StoreNotFound": StoreNotFound,
    "NotAStore": NotAStore,
    "SchemaTooNew": SchemaTooNew,
    "SchemaTooOld": SchemaTooOld,
    "StoreError": StoreError,
}


@cache
def agent_source() -> bytes:
    """The agent file's bytes: what gets uploaded to a remote host."""
    return AGENT_PATH.read_bytes()


@cache
def agent_hash() -> str:
    """sha256 prefix of the agent's content; an uploaded agent-<hash>.py is never stale."""
    return hashlib.sha256(agent_source()).hexdigest()[:16]


class AgentConnectionError(ConnectionError):
    """The stream to the agent broke (EOF, bad frame, agent died): reconnect and resume."""


class AgentRemoteError(RuntimeError):
    """The agent answered with an error that is not about a store (bad request, agent bug)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


@dataclass
class PointBatch:
    """Points in id order: store-local run and key ids, steps, walls, values (NaN restored)."""

    run_ids: np.ndarray  # int64
    key_ids: np.ndarray  # int64
    steps: np.ndarray  # int64
    walls: np.ndarray  # float64
    values: np.ndarray  # float64
    cursor: int
    more: bool

    def __len__(self) -> int:
        return len(self.steps)


def decode_points(header: dict[str, Any], payload: bytes) -> PointBatch:
    n = int(header.get("n", 0))
    cursor, more = int(header.get("points_cursor", 0)), bool(header.get("more", False))
    if n == 0:
        empty_i, empty_f = np.empty(0, np.int64), np.empty(0, np.float64)
        return PointBatch(empty_i, empty_i, empty_i, empty_f, empty_f, cursor, more)
    dtype = LAYOUTS.get(header.get("layout", ""))
    if dtype is None:
        raise AgentRemoteError("ProtocolError", f"unknown points layout {header.get('layout')!r}")
    if len(payload) != n * dtype.itemsize:
        raise AgentConnectionError(f"points payload has {len(payload)} bytes for {n} rows")
    table = np.frombuffer(payload, dtype=dtype)
    if "rkn" in dtype.names:
        run_ids = table["rkn"] >> (wire.KEY_BITS + 1)
        keyflag = table["rkn"] & ((1 << (wire.KEY_BITS + 1)) - 1)
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
        cursor=cursor,
        more=more,
    )


def _dtype(layout: str) -> np.dtype:
    codes = {"q": "<i8", "d": "<f8"}
    return np.dtype(
        [(name, codes[code]) for name, code in (f.split(":") for f in layout.split(","))]
    )


LAYOUTS = {layout: _dtype(layout) for layout in (wire.LAYOUT_PACKED, wire.LAYOUT_WIDE)}


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
    def send(self, op: str, **args: Any) -> int:
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

    def receive(self, rid: int) -> tuple[dict[str, Any], bytes]:
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
        return header, payload

    def call(self, op: str, **args: Any) -> tuple[dict[str, Any], bytes]:
        return self.receive(self.send(op, **args))

    # -- requests -----------------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        info, _ = self.call("hello")
        if info.get("protocol") != PROTOCOL:
            raise AgentRemoteError(
                "ProtocolMismatch",
                f"agent speaks protocol {info.get('protocol')}, this resplot {PROTOCOL}",
            )
        self.info = info
        return info

    def discover(self, patterns: list[str]) -> tuple[list[str], list[str]]:
        reply, _ = self.call("discover", patterns=list(patterns))
        return list(reply["stores"]), list(reply["missing"])

    def runs(self, store: str) -> list[dict[str, Any]]:
        return self.call("runs", store=store)[0]["runs"]

    def keys(self, store: str, after: int = 0) -> dict[int, str]:
        return {int(i): name for i, name in self.call("keys", store=store, after=after)[0]["keys"]}

    def points(
        self,
        store: str,
        after: int = 0,
        *,
        run_ids: list[int] | None = None,
        limit: int = wire.DEFAULT_LIMIT,
    ) -> PointBatch:
        header, payload = self.call(
            "points", store=store, after=after, run_ids=run_ids, limit=limit
        )
        return decode_points(header, payload)

    def events(
        self, store: str, after: int = 0, *, run_ids: list[int] | None = None
    ) -> tuple[list[list[Any]], int, bool]:
        reply, _ = self.call("events", store=store, events_after=after, run_ids=run_ids)
        return reply["events"], int(reply["events_cursor"]), bool(reply["events_more"])

    def send_poll(
        self,
        store: str,
        cursor: Any,
        *,
        limit: int = wire.DEFAULT_LIMIT,
        jobs: int = 1,
        overview: int = 0,
        overview_min: int = wire.OVERVIEW_MIN,
    ) -> int:
        """Ask for everything new in one round trip (see sources.base.StoreCursor).

        `overview` > 0: if more than `overview_min` points wait, answer with a sample of about
        `overview` points instead (docs/protocol.md, "Overview first")."""
        args: dict[str, Any] = {}
        if overview > 0:
            args["overview"] = overview
            args["overview_min"] = overview_min
        return self.send(
            "poll",
            store=store,
            runs_fp=cursor.runs_fp,
            beats_fp=cursor.beats_fp,
            keys_after=cursor.keys,
            points_after=cursor.points,
            events_after=cursor.events,
            limit=limit,
            jobs=jobs,
            **args,
        )

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
