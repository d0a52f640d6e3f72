"""Frames, binary columns, and every layout and bound of the wire: both ends of the agent
protocol use this one file.

A frame is `>II` (header length, payload length), a UTF-8 JSON header, then the payload bytes.
A reply's payload is a concatenation of sections, each described in the header's `sections`
list by name, row count, byte size and columns, so one poll reply can carry live points,
series rows and tiles together. Columns are little-endian int64 (`q`) or float64 (`d`) arrays,
one after the other; NULLs in float columns travel as NaN (docs/protocol.md says what NaN means
in each column).
"""

from __future__ import annotations

import json
import struct
import sys
from array import array

from schema.store import chunk_read
from schema.store.envelope import BUCKET_LAYOUT, RAW_LAYOUT, RAW_TILE_LAYOUT, SERIES_COLUMNS
from schema.store.rollup import AGG_FLOATS

PROTOCOL = 3  # 3: fine levels (tiles of levels -1 .. -6)
PREFIX = struct.Struct(">II")
# A runs list with big configs can pass 16 MiB. Below 512 MiB still, so a frame prefix made of
# text (a shell rc printing on the channel: bytes >= 0x20) is refused at once, not waited on.
MAX_HEADER = 256 << 20
MAX_PAYLOAD = (1 << 31) - 1
COMPRESS_MIN = 64 << 10
NAN = float("nan")
_SWAP = sys.byteorder != "little"

# What one request may ask for.
DEFAULT_LIMIT = 1_000_000
MAX_LIMIT = 4_000_000
EVENT_LIMIT = 10_000
MAX_TILES = 4096  # per request
# A request's size (header and payload): the largest real one, series pairs of 100 runs x 2,000
# keys, is ~3 MB of JSON.
MAX_REQUEST = 8 << 20
RAW_LIMIT = 1_000_000  # points per `raw` reply


class ProtocolError(Exception):
    """The byte stream is broken (closed mid-frame, bad lengths): it cannot be resynchronised."""


class AgentError(Exception):
    """A request failed; `kind` names the error class the client raises (see docs/protocol.md)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def encode_frame(header: dict, payload: bytes = b"") -> list:
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    if len(head) > MAX_HEADER:
        raise AgentError("StoreError", f"reply too large for a frame ({len(head)} bytes)")
    return [PREFIX.pack(len(head), len(payload)) + head, payload]


def write_frame(wfile, header: dict, payload: bytes = b"") -> int:
    """Write one frame and flush; returns the number of bytes written."""
    first, body = encode_frame(header, payload)
    wfile.write(first)
    if body:
        wfile.write(body)
    wfile.flush()
    return len(first) + len(body)


def _read_exact(rfile, n: int, what: str) -> bytes:
    data = rfile.read(n)
    if data is None:
        data = b""
    if len(data) == n:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = rfile.read(n - got)
        if not more:
            raise ProtocolError(f"stream closed after {got} of {n} bytes of a frame {what}")
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_frame(rfile, max_size: int | None = None):
    """(header, payload) of the next frame; None at a clean end of stream (EOF between frames).

    `max_size` (the agent's MAX_REQUEST): a frame larger than that is read past in pieces and
    refused with an AgentError, the stream still in step; parsing a 64 MiB JSON request once
    cost the agent 1.1 GB."""
    first = rfile.read(PREFIX.size)
    if not first:
        return None
    if len(first) < PREFIX.size:
        first += _read_exact(rfile, PREFIX.size - len(first), "prefix")
    head_len, body_len = PREFIX.unpack(first)
    if head_len == 0 or head_len > MAX_HEADER or body_len > MAX_PAYLOAD:
        raise ProtocolError(f"bad frame prefix (header {head_len} bytes, payload {body_len})")
    if max_size is not None and head_len + body_len > max_size:
        left = head_len + body_len
        while left:
            left -= len(_read_exact(rfile, min(left, 1 << 20), "being skipped"))
        raise AgentError(
            "BadRequest", f"a request of {head_len + body_len} bytes; at most {max_size}"
        )
    head = _read_exact(rfile, head_len, "header")
    body = _read_exact(rfile, body_len, "payload") if body_len else b""
    try:
        header = json.loads(head.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise AgentError("BadRequest", f"frame header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise AgentError("BadRequest", "frame header must be a JSON object")
    return header, body


# -- columns --------------------------------------------------------------------------------


def column_bytes(code: str, values) -> bytes:
    """One column as little-endian bytes: `q` int64 (None as 0), `d` float64 (None as NaN)."""
    if code == "d":
        arr = array("d", [NAN if v is None else v for v in values])
    else:
        arr = array("q", [0 if v is None else v for v in values])
    if _SWAP:
        arr.byteswap()
    return arr.tobytes()


def layout_struct(layout: str) -> struct.Struct:
    """The row of a packed-rows layout ("name:q,name:d,name:B"): little-endian, no padding."""
    return struct.Struct("<" + "".join(f.split(":")[1] for f in layout.split(",")))


# -- layouts ----------------------------------------------------------------------------------

# Live points travel as little-endian rows (run/key/NaN flag packed in one int64, step int64,
# wall float64, value float64): 32 bytes a point, no id per row (the reply has the cursor).
# struct packing straight off the cursor is the cheapest way the stdlib has to turn rows into
# bytes. Stores with ids of 2**31 or more get the wide layout.
LAYOUT_PACKED = "rkn:q,step:q,wall:d,value:d"
LAYOUT_WIDE = "run:q,kn:q,step:q,wall:d,value:d"
KEY_BITS = 31
POINT_LAYOUTS = (LAYOUT_PACKED, LAYOUT_WIDE)  # section "points"
ROW_PACKED = layout_struct(LAYOUT_PACKED)
ROW_WIDE = layout_struct(LAYOUT_WIDE)
# Bucket rows and raw points, packed by schema.store.envelope: sections "buckets" and "raw".
ROW_LAYOUTS = (BUCKET_LAYOUT, RAW_LAYOUT, RAW_TILE_LAYOUT)
BUCKET_ROW = layout_struct(BUCKET_LAYOUT)
RAW_ROW = layout_struct(RAW_LAYOUT)
RAW_TILE_ROW = layout_struct(RAW_TILE_LAYOUT)
# Series rows as columns (Sections.add_columns): "name:d" float64, "name:q" int64.
SERIES_WIRE = [c + (":d" if c in AGG_FLOATS or c == "tail_wall" else ":q") for c in SERIES_COLUMNS]


def shuffle_rows(data: bytes, size: int) -> bytes:
    """Byte k of every row, for k = 0 .. size-1: the bytes of a column lie together, so zlib
    finds the runs (high bytes of steps and counts, repeated walls and flags) that interleaved
    rows hide. With numpy where the agent has imported it already (it never waits on that
    import): a transpose 1,024 rows at a time, ~10x the builtins' slices (11 MB of fine
    buckets: 15 ms against 164), where one transpose of the whole would thrash the cache."""
    np = chunk_read.numpy_if_imported()
    if np is None or len(data) % size:
        return b"".join([data[k::size] for k in range(size)])
    rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, size)
    out = np.empty((size, len(rows)), dtype=np.uint8)
    for i in range(0, len(rows), 1024):
        out[:, i : i + 1024] = rows[i : i + 1024].T
    return out.tobytes()


class Sections:
    """The payload of a reply, built section by section, and their descriptions."""

    def __init__(self) -> None:
        self.parts: list = []
        self.described: list = []
        self.size = 0

    def add(self, name: str, rows: int, data: bytes, **about) -> None:
        self.parts.append(data)
        self.described.append(dict(about, name=name, rows=rows, size=len(data)))
        self.size += len(data)

    def add_columns(self, name: str, columns: list, rows: list, **about) -> None:
        """Rows (sequences) as columns; `columns` names them as "name:q" or "name:d"."""
        cols = list(zip(*rows)) if rows else [()] * len(columns)
        data = b"".join(column_bytes(spec.split(":")[1], col) for spec, col in zip(columns, cols))
        self.add(name, len(rows), data, columns=list(columns), **about)

    def shuffle(self) -> None:
        """Byte-shuffle every packed-rows section (marked `shuffled`; the client undoes it):
        measured on bucket rows, zlib then makes them 7x smaller, in less time."""
        for i, about in enumerate(self.described):
            if about.get("layout") and about["rows"] > 1:
                self.parts[i] = shuffle_rows(self.parts[i], layout_struct(about["layout"]).size)
                about["shuffled"] = True

    def payload(self) -> bytes:
        return b"".join(self.parts)


def split_sections(header: dict, payload: bytes) -> dict:
    """{name: (description, bytes)} of a reply's sections; a size that does not add up is a
    broken stream (ProtocolError)."""
    out = {}
    at = 0
    for about in header.get("sections") or []:
        size = int(about.get("size", 0))
        if at + size > len(payload):
            raise ProtocolError(f"section {about.get('name')} runs past the payload")
        out[about["name"]] = (about, payload[at : at + size])
        at += size
    if at != len(payload):
        raise ProtocolError(f"payload has {len(payload) - at} bytes no section describes")
    return out
