"""Columns packed for the report page: typed arrays as base64, the smallest exact type each.

The page decodes them with `atob` into typed arrays (assets/report.js `unpack`). Integers
(steps) are stored as differences from the previous one (the first absolute) in the narrowest
of int8/int16/int32 that holds them all, else float64 (exact to 2**53). Values are float32 when
every one of them survives float32 unchanged (a loss from a float32 tensor, a GPU telemetry
integer; NaN and infinities survive too), else float64: exact either way.
"""

from __future__ import annotations

import base64

import numpy as np

_INTS = (("i1", np.int8), ("i2", np.int16), ("i4", np.int32))


def _b64(arr: np.ndarray) -> str:
    return base64.b64encode(
        np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()
    ).decode("ascii")


def pack_ints(values: np.ndarray, delta: bool = False) -> dict:
    """Integers (steps, offsets) exactly; `delta`: as differences, for rising columns."""
    v = np.asarray(values, dtype=np.int64)
    first = 0
    if delta and len(v):
        first = int(v[0])
        v = np.diff(v, prepend=v[0])
    lo, hi = (int(v.min()), int(v.max())) if len(v) else (0, 0)
    for name, dtype in _INTS:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return {"t": name, "d": _b64(v.astype(dtype)), "z": int(delta), "f": first}
    return {"t": "f8", "d": _b64(v.astype(np.float64)), "z": int(delta), "f": first}


def exact_in_float32(values: np.ndarray) -> bool:
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        back = v.astype(np.float32).astype(np.float64)
    return bool(np.all((back == v) | (np.isnan(back) & np.isnan(v))))


def pack_floats(values: np.ndarray, exact: bool = True) -> dict:
    """Floats, bit for bit where `exact` (float32 only when that loses nothing), else as
    float32 (walls relative to a run's start, bucket means: drawn, never read back)."""
    v = np.asarray(values, dtype=np.float64)
    if not exact or exact_in_float32(v):
        with np.errstate(over="ignore"):
            return {"t": "f4", "d": _b64(v.astype(np.float32)), "z": 0, "f": 0}
    return {"t": "f8", "d": _b64(v), "z": 0, "f": 0}


def packed_bytes(column: dict) -> int:
    return len(column["d"]) + 24
