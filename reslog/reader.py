"""`reslog.open(store)`: read a store from a notebook or a script, read-only.

    import reslog
    with reslog.open("runs/reslog.db") as store:          # a path or a SQLAlchemy URL
        store.runs()                                        # one row per run
        store.keys("wsd-0.5")                               # the run's series, summarised
        df = store.history("wsd-0.5", ["train/loss", "valid/loss"], samples=1000)
        for chunk in store.scan("wsd-0.5", "train/loss"):   # every raw point, in chunks
            ...

`history` is what wandb's `Api().run().history(samples=...)` gives, without losing extremes:
one row per bucket with its exact min, max and last value, from the store's rollups, so it
costs O(samples) however long the run is; a range holding at most `samples` points comes back
point by point (count 1, min = max = last). `scan` streams the raw points for full-fidelity
analysis. Both leave out points superseded by a restart (docs/reslog.md, "Resume").
The DataFrames need pandas (`pip install 'reslog[analysis]'`); nothing else here does.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from schema.compare import duration_s, highest, last_step, lowest
from schema.envelope import agg_of, merge_to
from schema.errors import UnknownKey
from schema.records import RunInfo
from schema.rollup import LAST, NAN, STEP_HI, STEP_LO, WALL_HI, N, mean
from schema.store import open_store, store_label
from schema.store_reader import StoreReader

HISTORY_COLUMNS = ["key", "step", "min", "max", "last", "count", "wall"]
RUN_COLUMNS = [
    "uid", "name", "project", "group", "job_type", "status", "host", "created_at", "ended_at",
    "duration_s", "world_size", "last_step", "tags", "config", "summary",
]  # fmt: skip
SCAN_COLUMNS = ["key", "step", "wall", "value"]
_NAN = float("nan")


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "reslog.open() returns pandas DataFrames: pip install 'reslog[analysis]' (or pandas)"
        ) from None
    return pandas


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
        rows = self._store.series_rows([row_id]).get(row_id, {})
        present = {name: int(r[1]) for name, r in rows.items()}
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
        """A long DataFrame (key, step, min, max, last, count, wall), sorted by key then step.

        Per key, at most `samples` rows, each summing up consecutive points (read from the
        coarsest rollup level that still gives `samples` buckets, adjacent buckets combined
        down to `samples`): `step` is the first step holding a point in the row, `wall` the
        time its last point was logged, `count` its points, min and max are exact (±inf
        included, NaN left out; NaN when every value was), `last` the value at its last step.
        A range holding at most `samples` points comes back at full resolution (count 1,
        min = max = last). `start` and `stop` bound the steps (stop exclusive); the rows' ends
        are exact, never rounded out to bucket edges. `df.attrs["levels"]` says which rollup
        level each key was read from (0: raw points)."""
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
            raise ValueError(f"samples must be a positive int, got {samples!r}")
        for name, bound in (("start", start), ("stop", stop)):
            if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
                raise ValueError(f"{name} must be an int step or None, got {bound!r}")
        row_id, key_ids = self._series(run, keys)
        columns: dict[str, list] = {c: [] for c in HISTORY_COLUMNS}
        levels = {}
        for key, key_id in key_ids.items():
            level, aggs = self._store.envelope(row_id, key_id, start, stop, samples)
            aggs = merge_to(aggs, samples)
            levels[key] = level
            columns["key"] += [key] * len(aggs)
            columns["step"] += [a[STEP_LO] for a in aggs]
            columns["min"] += [lowest(a) for a in aggs]
            columns["max"] += [highest(a) for a in aggs]
            columns["last"] += [_NAN if a[LAST] is None else float(a[LAST]) for a in aggs]
            columns["count"] += [a[N] for a in aggs]
            columns["wall"] += [a[WALL_HI] for a in aggs]
        pd = _pandas()
        frame = pd.DataFrame(
            {
                "key": pd.Series(columns["key"], dtype=object),
                "step": pd.Series(columns["step"], dtype="int64"),
                "min": pd.Series(columns["min"], dtype="float64"),
                "max": pd.Series(columns["max"], dtype="float64"),
                "last": pd.Series(columns["last"], dtype="float64"),
                "count": pd.Series(columns["count"], dtype="int64"),
                "wall": pd.Series(columns["wall"], dtype="float64"),
            }
        )
        frame.attrs["levels"] = levels
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
        constant memory however long the run. NaN values are NaN."""
        if not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive int, got {batch!r}")
        row_id, key_ids = self._series(run, keys)
        pd = _pandas()
        for key, key_id in key_ids.items():
            for chunk in self._store.scan(row_id, key_id, start, stop, batch):
                steps, walls, values = zip(*chunk, strict=True)
                yield pd.DataFrame(
                    {
                        "key": pd.Series([key] * len(chunk), dtype=object),
                        "step": pd.Series(steps, dtype="int64"),
                        "wall": pd.Series(walls, dtype="float64"),
                        "value": pd.Series(values, dtype="float64"),
                    }
                )

    def points(self, run: str, keys: str | Sequence[str] | None = None, *,
               start: int | None = None, stop: int | None = None):  # fmt: skip
        """scan() in one DataFrame (for ranges that fit in memory)."""
        pd = _pandas()
        chunks = list(self.scan(run, keys, start=start, stop=stop))
        if not chunks:
            return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in
                                 zip(SCAN_COLUMNS, [object, "int64", "float64", "float64"],
                                     strict=True)})  # fmt: skip
        return pd.concat(chunks, ignore_index=True)
