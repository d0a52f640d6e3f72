"""`reslog.open(store)`: read a store from a notebook or a script, read-only.

    import reslog
    with reslog.open("runs/reslog.db") as store:          # a path or a SQLAlchemy URL
        store.runs()                                        # one row per run
        store.keys("wsd-0.5")                               # the run's series, summarised
        df = store.history("wsd-0.5", ["train/loss", "valid/loss"], samples=1000)
        for chunk in store.scan("wsd-0.5", "train/loss"):   # every raw point, in chunks
            ...

`history` is what wandb's `Api().run().history(samples=...)` gives, without losing extremes:
between samples/2 and `samples` rows, each the exact first, min, max and last value of
consecutive points with their steps, from the store's rollups (or, for a range narrower than
128 steps a row, from its raw points), so it costs O(samples) however long the run is; a
range holding at most `samples` points comes back point by point (count 1, min = max = last).
`scan` streams the raw points for full-fidelity analysis. Both leave out points superseded by
a restart (docs/reslog.md, "Resume").
The DataFrames need pandas (`pip install 'reslog[analysis]'`); nothing else here does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from schema.rules.compare import duration_s, highest, last_step, lowest
from schema.store.connect import open_store, store_label
from schema.store.envelope import agg_of
from schema.store.errors import UnknownKey
from schema.store.reader import StoreReader
from schema.store.records import RunInfo
from schema.store.rollup import (
    LAST,
    MAX_AT,
    MIN_AT,
    NAN,
    NEGINF,
    POSINF,
    STEP_HI,
    STEP_LO,
    WALL_HI,
    N,
    mean,
)

HISTORY_COLUMNS = [
    "key",
    "step",
    "first",
    "min",
    "max",
    "last",
    "count",
    "min_step",
    "max_step",
    "last_step",
    "wall",
]
RUN_COLUMNS = [
    "uid",
    "name",
    "project",
    "group",
    "job_type",
    "status",
    "host",
    "created_at",
    "ended_at",
    "duration_s",
    "world_size",
    "last_step",
    "tags",
    "config",
    "summary",
]
SCAN_COLUMNS = ["key", "step", "wall", "value"]
_NAN = float("nan")


def _frame(pd, pieces: list[tuple]):
    """One DataFrame (key, step, wall, value) of (key, steps, walls, values) pieces in order."""
    if len(pieces) == 1:
        key, steps, walls, values = pieces[0]
        keys = pd.Series(key, index=pd.RangeIndex(len(steps)), dtype=object)
    else:
        import numpy as np  # pandas' own dependency

        keys = pd.Series(
            np.repeat(np.array([p[0] for p in pieces], dtype=object), [len(p[1]) for p in pieces]),
            dtype=object,
        )
        steps, walls, values = (np.concatenate([p[i] for p in pieces]) for i in (1, 2, 3))
    # Columns decoded from the chunks go into the frame as they are (copy=False: no block of
    # walls and values stacked), the key as objects (dtype object: pandas would otherwise
    # infer a string dtype, ~100 ns a point): no Python object a point beyond the key's
    # reference (docs/store.md, "Points as compressed columns").
    return pd.DataFrame(
        {"key": keys, "step": steps, "wall": walls, "value": values},  # int64, float64, float64
        copy=False,
    )


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "reslog.open() returns pandas DataFrames: pip install 'reslog[analysis]' (or pandas)"
        ) from None
    return pandas


def _value(v) -> float:
    """A stored value as a float (None, the store's NaN, as NaN)."""
    return _NAN if v is None else float(v)


def open(store: str | os.PathLike[str] | None = None) -> Reader:
    """A read-only handle on a store (a SQLite path or URL; default $RESLOG_STORE, else
    runs/reslog.db). Never creates or modifies anything."""
    return Reader(store)


class Reader:
    def __init__(self, store: str | os.PathLike[str] | None = None) -> None:
        self.where = store_label(store)
        self._engine = open_store(store, readonly=True)
        self._store = StoreReader(self._engine, store=self.where)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<reslog.Reader {self.where}>"

    # -- runs -------------------------------------------------------------------------------

    def run(self, run: str) -> RunInfo:
        """A run by uid, unique uid prefix or unique name (UnknownRun otherwise)."""
        return self._store.find(run)[1]

    def runs(self, project: str | None = None):
        """A DataFrame with one row per run, oldest first: uid, name, project, status, host,
        created_at, ended_at, duration_s, world_size, last_step, tags, config, summary."""
        listed = self._store.runs(project=project)
        rows = self._store.series_rows([i for i, _ in listed])
        records = []
        for row_id, run in listed:
            aggs = {k: agg_of(r, 2) for k, r in rows.get(row_id, {}).items()}
            records.append(
                {
                    "uid": run.ref.uid,
                    "name": run.name,
                    "project": run.project,
                    "group": run.group,
                    "job_type": run.job_type,
                    "status": run.status,
                    "host": run.host,
                    "created_at": run.created_at,
                    "ended_at": run.ended_at,
                    "duration_s": duration_s(run),
                    "world_size": run.world_size,
                    "last_step": last_step(aggs),
                    "tags": run.tags,
                    "config": run.config,
                    "summary": run.summary,
                }
            )
        return _pandas().DataFrame.from_records(records, columns=RUN_COLUMNS)

    def keys(self, run: str):
        """A DataFrame with one row per series of a run, from its summary row: key, points,
        nan, first_step, last_step, last, min, max (±inf included), mean (finite values)."""
        row_id, _info = self._store.find(run)
        records = []
        for key, agg in sorted(self._store.summaries(row_id).items()):
            records.append(
                {
                    "key": key,
                    "points": agg[N],
                    "nan": agg[NAN],
                    "first_step": agg[STEP_LO],
                    "last_step": agg[STEP_HI],
                    "last": _NAN if agg[LAST] is None else agg[LAST],
                    "min": lowest(agg),
                    "max": highest(agg),
                    "mean": mean(agg),
                }
            )
        columns = ["key", "points", "nan", "first_step", "last_step", "last", "min", "max", "mean"]
        return _pandas().DataFrame.from_records(records, columns=columns)

    def _series(self, run: str, keys: str | Sequence[str] | None) -> tuple[int, dict[str, int]]:
        row_id, info = self._store.find(run)
        present = self._store.series_keys(row_id)
        if keys is None:
            return row_id, dict(sorted(present.items()))
        wanted = [keys] if isinstance(keys, str) else list(keys)
        missing = [k for k in wanted if k not in present]
        if missing:
            shown = ", ".join(sorted(present)[:20]) + (" ..." if len(present) > 20 else "")
            raise UnknownKey(
                f"run {info.name} ({info.ref.uid[:8]}) has no key "
                f"{', '.join(repr(k) for k in missing)}; its keys: {shown or 'none'}"
            )
        return row_id, {k: present[k] for k in sorted(set(wanted))}

    # -- series -----------------------------------------------------------------------------

    def history(
        self,
        run: str,
        keys: str | Sequence[str],
        *,
        samples: int = 1000,
        start: int | None = None,
        stop: int | None = None,
    ):
        """A long DataFrame, sorted by key then step, one row per run of consecutive points:

            key, step, first, min, max, last, count, min_step, max_step, last_step, wall

        When the range holds more than `samples` points of a key, between samples/2 and
        `samples` rows of it (fewer only where it holds fewer distinct steps: a row never
        splits a step), each exact: `step` and `first` are its first step and the value of its
        first point there, `min` and `max` its extremes (±inf included, NaN left out; NaN when
        every value was) at `min_step` and `max_step` (the first step holding a finite
        extreme; <NA> when the extreme is not finite), `last` the value at its last step
        `last_step`, `count` its points, `wall` the time its last point was logged. A range
        holding at most `samples` points comes back point by point (count 1, first = min = max
        = last). `start` and `stop` bound the steps (stop exclusive); the rows' ends are exact,
        never rounded out to bucket edges.

        `df.attrs["levels"]` says which level each key was read from (0: raw points; a negative
        level: buckets of 2**-level steps folded from the raw points; 1 and up: the stored
        rollups), `df.attrs["widths"]` the steps each row spans where the key has no gap (1 at
        full resolution)."""
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
            raise ValueError(f"samples must be a positive int, got {samples!r}")
        for name, bound in (("start", start), ("stop", stop)):
            if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
                raise ValueError(f"{name} must be an int step or None, got {bound!r}")
        row_id, key_ids = self._series(run, keys)
        columns: dict[str, list] = {c: [] for c in HISTORY_COLUMNS}
        levels, widths = {}, {}
        for key, key_id in key_ids.items():
            level, width, aggs, firsts = self._store.sample(row_id, key_id, start, stop, samples)
            levels[key], widths[key] = level, width
            columns["key"] += [key] * len(aggs)
            columns["step"] += [a[STEP_LO] for a in aggs]
            columns["first"] += [_value(firsts.get(a[STEP_LO])) for a in aggs]
            columns["min"] += [lowest(a) for a in aggs]
            columns["max"] += [highest(a) for a in aggs]
            columns["last"] += [_value(a[LAST]) for a in aggs]
            columns["count"] += [a[N] for a in aggs]
            columns["min_step"] += [None if a[NEGINF] else a[MIN_AT] for a in aggs]
            columns["max_step"] += [None if a[POSINF] else a[MAX_AT] for a in aggs]
            columns["last_step"] += [a[STEP_HI] for a in aggs]
            columns["wall"] += [a[WALL_HI] for a in aggs]
        pd = _pandas()
        types = {
            "key": object,
            "step": "int64",
            "count": "int64",
            "last_step": "int64",
            "min_step": "Int64",
            "max_step": "Int64",
        }
        frame = pd.DataFrame(
            {c: pd.Series(columns[c], dtype=types.get(c, "float64")) for c in HISTORY_COLUMNS}
        )
        frame.attrs["levels"] = levels
        frame.attrs["widths"] = widths
        return frame

    def scan(
        self,
        run: str,
        keys: str | Sequence[str] | None = None,
        *,
        start: int | None = None,
        stop: int | None = None,
        batch: int = 100_000,
    ) -> Iterator:
        """Every current raw point of the run's keys (None: all) with start <= step < stop,
        key by key and by step, as DataFrames (key, step, wall, value) of about `batch` rows:
        constant memory however long the run. A long key comes in several frames; short keys
        share one, up to `batch` rows (a frame a key cost ~0.3 ms of pandas each: most of a
        100-key run's scan). NaN values are NaN."""
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        row_id, key_ids = self._series(run, keys)
        pd = _pandas()
        pieces: list[tuple] = []
        rows = 0
        for key, key_id in key_ids.items():
            for steps, walls, values in self._store.scan(
                row_id, key_id, start, stop, batch, columns=True
            ):
                if rows and rows + len(steps) > batch:
                    yield _frame(pd, pieces)
                    pieces, rows = [], 0
                pieces.append((key, steps, walls, values))
                rows += len(steps)
        if pieces:
            yield _frame(pd, pieces)

    def points(
        self,
        run: str,
        keys: str | Sequence[str] | None = None,
        *,
        start: int | None = None,
        stop: int | None = None,
    ):
        """scan() in one DataFrame (for ranges that fit in memory)."""
        pd = _pandas()
        chunks = list(self.scan(run, keys, start=start, stop=stop))
        if not chunks:
            return pd.DataFrame(
                {
                    c: pd.Series([], dtype=t)
                    for c, t in zip(
                        SCAN_COLUMNS, [object, "int64", "float64", "float64"], strict=True
                    )
                }
            )
        return pd.concat(chunks, ignore_index=True)
