"""What `log()` accepts, checked without importing torch or numpy, and the bulk conversion.

The training thread pays for a type check per value; anything it cannot turn into a float
cheaply and without a GPU sync (a CUDA tensor) is kept as is and converted at flush time, in the
writer thread, with one device-to-host copy per device and dtype.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Mapping
from typing import Any

MAX_KEY_LEN = 500  # keys.name is String(500); PostgreSQL enforces it
MIN_STEP, MAX_STEP = -(2**63), 2**63 - 2  # points.step is a BIGINT; run.step = step + 1 too

# Values whose type is in here are stored as they are; checked with one set lookup per value.
PLAIN: frozenset[type] = frozenset({float, int})

# Decided once per type: "float" (convert now with float()), "tensor" (torch: decide per value),
# "numpy" (numpy scalar or array: decide per value) or None (rejected).
_KIND: dict[type, str | None] = {bool: "float"}


def _kind_of(tp: type) -> str | None:
    kind = _KIND.get(tp, "?")
    if kind != "?":
        return kind
    module = getattr(tp, "__module__", "") or ""
    root = module.split(".", 1)[0]
    if root == "torch" and any(c.__name__ == "Tensor" for c in tp.__mro__):
        kind = "tensor"
    elif root == "numpy":
        kind = "numpy"
    elif issubclass(tp, (int, float)):
        kind = "float"  # int/float subclasses (IntEnum, user subclasses)
    else:
        kind = None
    _KIND[tp] = kind
    return kind


def _reject(key: str, value: Any, why: str = "") -> TypeError:
    what = type(value).__module__ + "." + type(value).__qualname__
    detail = f" ({why})" if why else ""
    return TypeError(
        f"reslog: cannot log key {key!r}: value of type {what}{detail}; expected int, float, "
        "bool, a numpy scalar or a one-element torch tensor"
    )


def convert(key: str, value: Any) -> Any:
    """A storable form of one value: a float, or a device tensor for the writer to convert.

    Raises TypeError naming the key for anything else.
    """
    tp = type(value)
    if tp in PLAIN:
        return value
    kind = _kind_of(tp)
    if kind == "float":
        return float(value)
    if kind == "numpy":
        dtype_kind = getattr(getattr(value, "dtype", None), "kind", "")
        if dtype_kind not in ("b", "i", "u", "f") or getattr(value, "size", 0) != 1:
            raise _reject(key, value, "numpy value must be one real number")
        return float(value.reshape(()) if getattr(value, "ndim", 0) else value)
    if kind == "tensor":
        if value.numel() != 1 or value.is_complex():
            raise _reject(key, value, f"tensor of shape {tuple(value.shape)}, dtype {value.dtype}")
        if value.device.type == "cpu":
            # A CPU read is cheap and cannot sync a GPU; reading now also means a later in-place
            # change of the tensor does not change what was logged.
            return float(value.detach().reshape(()).item())
        return value.detach()  # converted at flush time (see to_floats)
    raise _reject(key, value)


def check_key(key: Any) -> str:
    """A key name as stored; ValueError/TypeError with the reason otherwise."""
    if not isinstance(key, str):
        raise TypeError(f"reslog: metric keys must be str, got {type(key).__name__} {key!r}")
    if len(key) > MAX_KEY_LEN:
        raise ValueError(f"reslog: metric key longer than {MAX_KEY_LEN} characters: {key[:60]!r}…")
    if "\x00" in key:
        raise ValueError(f"reslog: metric key contains a NUL character: {key!r}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"reslog: metric key is not valid unicode text: {key!r}") from None
    return str(key)


# How long each text of a run row may be (characters): the columns' own sizes
# (schema/store/tables.py; PostgreSQL enforces them), so SQLite takes no more. A 1 MiB name made
# `reslog ls` print 10 MB and every `reslog watch --exec` hook of the run fail (an environment value
# over 128 KiB).
TEXT_LIMITS = {
    "project": 200,
    "name": 200,
    "group": 200,
    "job_type": 64,
    "tag": 128,
    "notes": 65_536,
}


def check_run_text(**texts: Any) -> None:
    """ValueError naming the argument when a run's project, name, group, job type, tag or notes
    is too long, holds a NUL (no C string, file name or environment variable can) or is not
    valid unicode. `tags` is a list."""
    for arg, value in texts.items():
        values = value if arg == "tags" else [value]
        kind = "tag" if arg == "tags" else arg
        for v in values:
            if v is None:
                continue
            v = str(v)
            if len(v) > TEXT_LIMITS[kind]:
                raise ValueError(
                    f"reslog: init({arg}=...) is {len(v)} characters; at most "
                    f"{TEXT_LIMITS[kind]}: {v[:60]!r}…"
                )
            if "\x00" in v:
                raise ValueError(f"reslog: init({arg}=...) contains a NUL character: {v[:80]!r}")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                why = f"reslog: init({arg}=...) is not valid unicode: {v[:80]!r}"
                raise ValueError(why) from None


def check_step(step: Any) -> int:
    """A step as stored; TypeError (not an int, or a bool) or ValueError (beyond 64 bits)."""
    if isinstance(step, bool):  # operator.index(True) is 1: a bug in the caller, not step 1
        raise TypeError(f"reslog: step must be an int, got bool {step!r}")
    try:
        value = operator.index(step)
    except TypeError:
        raise TypeError(
            f"reslog: step must be an int, got {type(step).__name__} {step!r}"
        ) from None
    if not MIN_STEP <= value <= MAX_STEP:
        raise ValueError(f"reslog: step {value} does not fit in 64 bits")
    return value


def storable_text(value: Any) -> str:
    """str(value) as every backend stores it: lone surrogates (SQLite and PostgreSQL reject
    them) and NUL (PostgreSQL rejects it) written as backslash escapes."""
    text = str(value)
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def checked(metrics: Mapping[Any, Any], known: set[str]) -> dict[str, Any]:
    """The slow path of log(): check every key and value, converting what needs it.

    Builds a new dict, so a rejected call leaves no trace. New good keys join `known`.
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(f"reslog: log() takes a dict of metrics, got {type(metrics).__name__}")
    out: dict[str, Any] = {}
    new: list[str] = []
    for key, value in metrics.items():
        if key not in known:
            key = check_key(key)
            new.append(key)
        out[key] = convert(key, value)
    known.update(new)
    return out


def to_floats(values: list[Any], nan_as_none: bool = True) -> list[Any]:
    """Stored values: floats, NaN as None (the store's NaN convention; see schema.store.tables).

    Device tensors are gathered per (device, dtype), stacked and copied to the host once per
    group. Runs in the writer thread.
    """
    pending = [i for i, v in enumerate(values) if type(v) not in PLAIN]
    if pending:
        values = list(values)
        for idx, val in zip(pending, _tensors_to_floats([values[i] for i in pending]), strict=True):
            values[idx] = val
    try:
        floats = list(map(float, values))
    except OverflowError:  # an int beyond float range: store it as ±inf rather than lose a flush
        floats = [_safe_float(v) for v in values]
    return [v if v == v else None for v in floats] if nan_as_none else floats


def _safe_float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _cuda_to_host(t: Any) -> Any:
    """``t.cpu()`` without what torch counts as a synchronisation: an asynchronous copy into
    pinned memory, then an event polled until the copy is done. A user hunting syncs in their
    loop with ``torch.cuda.set_sync_debug_mode("warn"/"error")`` (process-wide) is then never
    pointed at, or stopped by, this thread."""
    import torch

    with torch.cuda.device(t.device):
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        host.copy_(t, non_blocking=True)
        done = torch.cuda.Event()
        done.record()  # on this thread's current stream, the one the copy was queued on
    wait = 1e-4
    while not done.query():
        time.sleep(wait)
        wait = min(wait * 2, 5e-3)  # a few wake-ups per GPU queue, not a spin
    return host


def _tensors_to_floats(tensors: list[Any]) -> list[float]:
    import torch

    groups: dict[tuple[Any, Any], list[int]] = {}
    for i, t in enumerate(tensors):
        groups.setdefault((t.device, t.dtype), []).append(i)
    out: list[float] = [math.nan] * len(tensors)
    with torch.no_grad():
        for (device, _dtype), idx in groups.items():
            stacked = torch.stack([tensors[i].reshape(()) for i in idx])
            stacked = _cuda_to_host(stacked) if device.type == "cuda" else stacked.cpu()
            host = stacked.double().tolist() if stacked.dtype != torch.bool else stacked.tolist()
            for i, v in zip(idx, host, strict=True):
                out[i] = float(v)
    return out


def as_json(value: Any) -> Any:
    """json.dumps default=: numbers from numpy/torch as numbers, anything else as its str()."""
    if _kind_of(type(value)) in ("numpy", "tensor"):
        try:
            if getattr(value, "ndim", 0) == 0 or getattr(value, "numel", lambda: 0)() == 1:
                return value.item()
            return value.tolist()
        except Exception:
            return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
