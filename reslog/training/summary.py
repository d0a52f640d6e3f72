"""`run.summary`: wandb's summary. Each logged key's last value, `define_metric(summary=...)`'s
aggregates, and what the user sets; the stored form (JSON that never fails).

As in wandb, the newest write wins: `summary["loss"] = 0.1` replaces the last logged value,
and a later `log({"loss": ...})` replaces that again. Logged values are not stored in the
run's summary JSON (the store's series rows hold each key's last value already, and a JSON
of every key would bury what people set in comparison tables); what is stored is every key
set by hand and every aggregate asked for with define_metric. On resume the summary starts
from that JSON and the series' last values (reslog.training.start).
"""

from __future__ import annotations

import fnmatch
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from reslog.training.values import PLAIN, _kind_of, as_json, to_floats

# define_metric(summary=...)'s words, as wandb spells them ("copy" is its old "last").
SUMMARY_OPS = ("min", "max", "mean", "first", "last", "none", "copy", "best")
_MISSING = object()


def summary_ops(spec: str, goal: str | None) -> tuple[str, ...] | None:
    """The aggregates of a define_metric(summary=spec): a tuple of "min", "max", "mean",
    "first", "last", "best:min" or "best:max" ("best", the min or max by `goal`); () for
    "none"; None for "copy"/"last" alone (the plain last value). ValueError naming the word
    for anything else, as wandb."""
    words = [w.strip() for w in str(spec).split(",") if w.strip()]
    bad = [w for w in words if w not in SUMMARY_OPS]
    if bad:
        raise ValueError(
            f"reslog: define_metric(summary=...) takes {', '.join(SUMMARY_OPS)}; got {bad[0]!r}"
        )
    if "none" in words:
        return ()
    out: list[str] = []
    for w in words:
        if w == "best":
            w = "best:max" if str(goal or "").lower() in ("max", "maximize") else "best:min"
        w = "last" if w == "copy" else w
        if w not in out:
            out.append(w)
    return None if out in ([], ["last"]) else tuple(out)


class MetricSummary:
    """The running aggregates of one key. Device tensors wait (no GPU sync on the training
    thread) until a read or the writer's flush settles them; a lock orders the two threads."""

    __slots__ = ("first", "hi", "last", "lo", "lock", "n", "ops", "pending", "shown", "total")

    def __init__(self, ops: tuple[str, ...]) -> None:
        self.ops = ops
        self.n = 0
        self.total = 0.0
        self.lo = self.hi = self.first = self.last = None
        self.pending: list[Any] = []
        self.lock = threading.Lock()
        self.shown: dict[str, Any] = {}

    def add(self, value: Any) -> dict[str, Any]:
        """Fold one logged value; the view (the one before, while a device value waits)."""
        with self.lock:
            if self.pending or type(value) not in PLAIN:
                self.pending.append(value)
                return self.shown
            self._fold(value)
            return self._view()

    def settle(self) -> dict[str, Any]:
        with self.lock:
            if self.pending:
                values, self.pending = self.pending, []
                for v in to_floats(values, nan_as_none=False):
                    self._fold(v)
            return self._view()

    def _fold(self, value: float) -> None:
        value = float(value)
        self.last = value
        if self.first is None:
            self.first = value
        if value != value:
            return  # NaN: the last value, never a min, max or mean
        self.n += 1
        self.total += value
        if self.lo is None or value < self.lo:
            self.lo = value
        if self.hi is None or value > self.hi:
            self.hi = value

    def _view(self) -> dict[str, Any]:
        self.shown = self._values()
        return self.shown

    def _values(self) -> dict[str, Any]:
        values = {
            "min": self.lo,
            "max": self.hi,
            "mean": self.total / self.n if self.n else None,
            "first": self.first,
            "last": self.last,
            "best:min": self.lo,
            "best:max": self.hi,
        }
        return {op.split(":")[0]: values[op] for op in self.ops if values[op] is not None}


class Summary(dict):
    """`run.summary`. The Run folds every stored log() record in (`logged`); `version` counts
    the changes to what is stored (`stored()`), so the writer persists it when it changed."""

    version = 0

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._explicit: set[str] = set(self)  # set by hand (or stored so): kept in the JSON
        self._patterns: list[tuple[str, tuple[str, ...]]] = []  # define_metric(summary=...)
        self._metrics: dict[str, MetricSummary | None] = {}  # key -> its aggregates (cache)
        # Whether logged() has anything to do beyond dict.update. Until it has, the Run's
        # fast path folds a record in with the bare C dict.update; `on_watch` (the Run's) is
        # called once when that changes, so the fast path tests nothing.
        self.watching = bool(self._explicit)
        self.on_watch: Callable[[], None] | None = None

    def _touch(self) -> None:
        self.version += 1

    def _set(self, key: Any) -> None:
        self._explicit.add(key)
        self._watch()
        self._touch()

    def _watch(self) -> None:
        if not self.watching:
            self.watching = True
            if self.on_watch is not None:
                self.on_watch()

    def fold(self, record: dict[str, Any]) -> None:
        """The fast path's fold once `watching`: the values in, then logged()."""
        dict.update(self, record)
        self.logged(record)

    # -- the run's side ---------------------------------------------------------------------------

    def logged(self, record: dict[str, Any]) -> None:
        """After the values of `record` went in with dict.update: a hand-set key logged again
        is a logged key once more, and keys with aggregates get their views."""
        explicit = self._explicit
        if explicit and not explicit.isdisjoint(record):
            explicit.difference_update(record)
            self._touch()
        if not self._patterns:
            return
        metrics = self._metrics
        for key, value in record.items():
            metric = metrics.get(key, _MISSING)
            if metric is _MISSING:
                metric = self._match(key)
            if metric is None:
                continue
            if not metric.ops:
                dict.pop(self, key, None)  # summary="none"
                continue
            dict.__setitem__(self, key, metric.add(value))
            self._touch()

    def define(self, name: str, ops: tuple[str, ...] | None) -> None:
        """define_metric(name, summary=...): aggregates for a key or a glob ("val/*"), from
        the next logged value on; `ops` None puts the key back to its last value."""
        self._patterns = [(p, o) for p, o in self._patterns if p != name]
        if ops is not None:
            self._patterns.append((name, ops))
        for key in [k for k in self._metrics if _matches(k, name)]:
            del self._metrics[key]
        if ops == ():
            for key in [k for k in self if isinstance(k, str) and _matches(k, name)]:
                if key not in self._explicit:
                    dict.pop(self, key)
        self._watch()

    def _match(self, key: str) -> MetricSummary | None:
        ops = None
        for pattern, found in reversed(self._patterns):  # the newest definition wins
            if _matches(key, pattern):
                ops = found
                break
        metric = None if ops is None else MetricSummary(ops)
        self._metrics[key] = metric
        return metric

    def stored(self) -> dict[str, Any]:
        """What the run row keeps: the hand-set keys and the aggregates (settled)."""
        out = {k: dict.get(self, k) for k in list(self._explicit) if dict.__contains__(self, k)}
        for key, metric in list(self._metrics.items()):
            if metric is not None and metric.ops and key not in out:
                # Not written back here (the writer's thread): the training thread's next
                # add() or a read does, in order.
                out[key] = metric.settle()
        return out

    # -- reads: device values as numbers ---------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        metric = self._metrics.get(key) if self._metrics else None
        if metric is not None and metric.ops and key not in self._explicit:
            view = metric.settle()
            dict.__setitem__(self, key, view)
            return view
        return _number(super().__getitem__(key))

    def get(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            return default
        return self[key]

    # -- writes by hand ---------------------------------------------------------------------------

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self._set(key)

    def __delitem__(self, key) -> None:
        super().__delitem__(key)
        self._explicit.discard(key)
        self._touch()

    def update(self, *args, **kw) -> None:
        new = dict(*args, **kw)
        super().update(new)
        for key in new:
            self._set(key)

    def setdefault(self, key, default=None):
        if key in self:
            return self[key]
        self[key] = default
        return default

    def pop(self, key, *default):
        out = super().pop(key, *default)
        self._explicit.discard(key)
        self._touch()
        return out

    def clear(self) -> None:
        super().clear()
        self._explicit.clear()
        self._touch()

    def _resume_last(self, values: Iterable[tuple[str, Any]]) -> None:
        """On resume: the stored series' last values, under keys not set by hand."""
        for key, value in values:
            if not dict.__contains__(self, key):
                dict.__setitem__(self, key, value)


def _matches(key: str, pattern: str) -> bool:
    """define_metric's names: a key, or a glob with "*" ("val/*", "*")."""
    return key == pattern or ("*" in pattern and fnmatch.fnmatchcase(key, pattern))


def _number(value: Any) -> Any:
    """A logged device tensor or numpy scalar, read back: a Python number."""
    if type(value) in PLAIN or isinstance(value, (str, dict, list)):
        return value
    if _kind_of(type(value)) in ("numpy", "tensor"):
        return as_json(value)
    return value


def summary_json(summary: dict) -> str:
    """The summary as stored (Summary.stored()) in JSON; a key or value JSON cannot hold (a
    tuple key, a cycle) is stored as its str() rather than failing every flush from then on."""
    if isinstance(summary, Summary):
        summary = summary.stored()
    try:
        return json.dumps(dict(summary), default=as_json)
    except (TypeError, ValueError):
        pass
    out: dict[str, Any] = {}
    for key, value in list(summary.items()):
        try:
            json.dumps(value, default=as_json)
        except (TypeError, ValueError):
            value = str(value)
        out[key if isinstance(key, str) else str(key)] = value
    return json.dumps(out, default=as_json)
