"""A store read through SQLAlchemy (SQLite or PostgreSQL): runs, series summaries, envelopes and
raw points. `reslog.open`, the CLI and the exports all read through it; resplot's agent reads
remote SQLite files with the same schema.store.envelope functions.

Every method is one read transaction. Nothing here is O(points) unless it returns the points:
summaries come from the `series` rows, envelopes from the rollups.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Connection, Engine

from schema.store import chunk_read, envelope
from schema.store.chunk_read import Page, Series
from schema.store.connect import engine_label
from schema.store.gc_pause import gc_paused
from schema.store.read import fetch_events, find_run, key_names, list_runs
from schema.store.records import Event, RunInfo, RunRef, run_info
from schema.store.rollup import STEP_HI, STEP_LO
from schema.store.tables import runs

Point = tuple[int, float, float]  # step, wall, value (NaN for a stored NULL)
_NAN = float("nan")
MMAP_BYTES = 1 << 30  # SQLite maps at most this much of the file (its own cap is 2 GB)
_RUN_COLUMNS = ", ".join(c.name for c in runs.c)


class StoreReader:
    def __init__(self, engine: Engine, *, source: str = "local", store: str | None = None):
        self.engine = engine
        self.source = source
        self.store = store if store is not None else engine_label(engine)
        self.p = envelope.marker(engine.dialect.paramstyle)

    def _cursor(self, conn: Connection):
        return conn.connection.dbapi_connection.cursor()

    # -- runs and keys ----------------------------------------------------------------------------

    def runs(self, project: str | None = None) -> list[tuple[int, RunInfo]]:
        """(row id, run) for every run, oldest first."""
        with self.engine.connect() as conn:
            return list_runs(conn, source=self.source, store=self.store, project=project)

    def find(self, ident: str) -> tuple[int, RunInfo]:
        """A run by uid, unique uid prefix or unique name (UnknownRun otherwise)."""
        with self.engine.connect() as conn:
            # A whole uid or a name matching one run is that run, as find_run decides, in one
            # statement through the DBAPI cursor and without reading every run of the store
            # (SQLAlchemy's two selects cost ~7 ns a point of a 100k-point scan()); anything
            # else (a prefix, several runs of one name) goes through find_run, its errors
            # included.
            cur = self._cursor(conn)
            cur.execute(
                f"SELECT {_RUN_COLUMNS} FROM runs WHERE uid = {self.p} OR name = {self.p}",
                (ident, ident),
            )
            names = [d[0] for d in cur.description]
            found = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            for column in ("uid", "name"):
                matches = [m for m in found if m[column] == ident]
                if len(matches) == 1:
                    m = matches[0]
                    return int(m["id"]), run_info(m, self.source, self.store)
                if matches:
                    break
            return find_run(conn, ident, source=self.source, store=self.store)

    def key_names(self) -> dict[int, str]:
        with self.engine.connect() as conn:
            return key_names(conn)

    def series_keys(self, run_id: int) -> dict[str, int]:
        """{key name: key id} of the run's series, in one statement (what a read of some keys
        needs before their points: not every series row and every key of the store)."""
        with self.engine.connect() as conn:
            cur = self._cursor(conn)
            cur.execute(
                "SELECT k.name, s.key_id FROM series s JOIN keys k ON k.id = s.key_id"
                f" WHERE s.run_id = {self.p}",
                (run_id,),
            )
            return {name: int(key_id) for name, key_id in cur.fetchall()}

    def series_rows(self, run_ids=None) -> dict[int, dict[str, tuple]]:
        """{run id: {key name: series row in envelope.SERIES_COLUMNS order}}."""
        with self.engine.connect() as conn:
            names = key_names(conn)
            rows = envelope.series_rows(self._cursor(conn), self.p, run_ids)
        out: dict[int, dict[str, tuple]] = {}
        for row in rows:
            out.setdefault(int(row[0]), {})[names[int(row[1])]] = tuple(row)
        return out

    def summaries(self, run_id: int) -> dict[str, tuple]:
        """{key name: aggregate (schema.store.rollup)} of one run's series."""
        rows = self.series_rows([run_id]).get(run_id, {})
        return {name: envelope.agg_of(row, 2) for name, row in rows.items()}

    def events(self, run_id: int, ref: RunRef, after: int = 0) -> list[Event]:
        with self.engine.connect() as conn:
            return fetch_events(conn, run_id, ref, after=after)

    # -- one series ---------------------------------------------------------------------------

    def sample(
        self, run_id: int, key_id: int, start: int | None, stop: int | None, samples: int
    ) -> tuple[int, int, list[tuple], dict[int, float | None]]:
        """(level, width, rows, firsts) of one series over [start, stop) in at most `samples`
        exact rows (envelope.SeriesReader.sample); `firsts` maps each row's first step to the
        value of its first point there (None: NaN)."""
        with self.engine.connect() as conn, gc_paused():
            cur = self._cursor(conn)
            row = envelope.series_row(cur, self.p, run_id, key_id)
            reader = envelope.SeriesReader(
                cur,
                self.engine.dialect.paramstyle,
                run_id,
                key_id,
                has_takes=envelope.has_takes(cur, self.p, run_id, key_id),
            )
            return reader.sample(row, start, stop, samples)

    def _scan_range(
        self, cur, run_id: int, key_id: int, start: int | None, stop: int | None
    ) -> tuple[bool, int, int] | None:
        """(has takes, first step, stop) of a scan of the series, clipped to its steps; None: no
        such series."""
        row = envelope.series_row(cur, self.p, run_id, key_id)
        if row is None:
            return None
        has_takes = envelope.has_takes(cur, self.p, run_id, key_id)
        agg = envelope.agg_of(row, 2)
        lo = agg[STEP_LO] if start is None else max(int(start), agg[STEP_LO])
        hi = agg[STEP_HI] + 1 if stop is None else min(int(stop), agg[STEP_HI] + 1)
        return has_takes, lo, hi

    def _pages(
        self, run_id: int, key_id: int, start: int | None, stop: int | None, batch: int, read
    ) -> Iterator:
        """The paging of scan(): the series' points with start <= step < stop in pages of at
        most `batch`, each page one read transaction going on after the last (by step and id),
        so memory stays bounded however long the series is. `read(series, lo, hi, page)` gives
        (n, head, last): the n points it read, head(m) the first m as the caller yields them,
        last(i) the (step, id) of point i. A page asks for one point more than it yields, so a
        series of exactly `batch` points is one read, not a second, empty one."""
        found, after = None, None
        while True:
            with self.engine.connect() as conn:
                cur = self._cursor(conn)
                if found is None:  # the series' range, in the first page's connection
                    found = self._scan_range(cur, run_id, key_id, start, stop)
                    if found is None:
                        return
                    has_takes, lo, hi = found
                if lo >= hi:
                    return
                series = Series(cur, self.p, run_id, key_id, has_takes)
                n, head, last = read(series, lo, hi, Page(after_id=after, limit=batch + 1))
            if not n:
                return
            if n <= batch:
                yield head(n)
                return
            yield head(batch)
            lo, after = last(batch - 1)

    def scan(
        self,
        run_id: int,
        key_id: int,
        start: int | None = None,
        stop: int | None = None,
        batch: int = 100_000,
        *,
        columns: bool = False,
    ) -> Iterator:
        """The series' current points with start <= step < stop, by step, in pages of at most
        `batch` points (_pages): lists of (step, wall, value) points (NaN for a stored NULL),
        or with `columns` (steps, walls, values) numpy arrays decoded straight from the chunks
        (schema/store/chunk_read.series_columns), the same points in the same order. Points
        logged while a scan runs may or may not be in it."""
        read = self._column_page if columns else _row_page
        return self._pages(run_id, key_id, start, stop, batch, read)

    def _column_page(self, series: Series, lo: int, hi: int, page: Page) -> tuple:
        """A page of scan(columns=True), as _pages reads it."""
        if self.engine.dialect.name == "sqlite":
            # Reading one key's streams hops through its chunks' overflow pages; mapped, a
            # page costs a pointer instead of a read() into the page cache (2 MB by default: a
            # scan of a long run never hits it). Read-only: SQLite writes through write()
            # whatever this says.
            series.cur.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        p = chunk_read.series_points(series, lo, hi, page)
        steps, walls, values = p.steps, p.walls, p.values

        def head(m: int) -> tuple:
            return (steps, walls, values) if m == len(steps) else (steps[:m], walls[:m], values[:m])

        # The ids only for the page's end (a scan longer than a page): none decoded otherwise.
        return len(steps), head, lambda i: (int(steps[i]), int(p.ids()[i]))


def _row_page(series: Series, lo: int, hi: int, page: Page) -> tuple:
    """A page of scan() as (step, wall, value) points, as _pages reads it."""
    found = envelope.raw_points(series, lo, hi, page)
    return (
        len(found),
        lambda m: [(s, w, _NAN if v is None else v) for _id, s, w, v in found[:m]],
        lambda i: (found[i][1], found[i][0]),
    )
