"""The store's tables: the one place a table is defined (reslog and resplot import these).

Rows are narrow and typed: one row per (run, key, step) point, never a JSON blob per step.
Times are Unix seconds as floats. Every constraint and index is named so that migrations and
the golden schema dump stay stable across SQLite and PostgreSQL.

NaN convention: SQLite stores a NaN REAL as NULL, so `points.value IS NULL` means NaN on every
backend; +inf and -inf are stored as themselves. Readers turn NULL back into NaN.

Rollups (docs/store.md, "Rollups"): `series` holds one aggregate per (run, key), `rollups` one per
(run, key, level, bucket) of schema.store.buckets, both in schema.store.rollup's AGG_COLUMNS and
kept by the writer in the transaction that inserts the points. `takes` records where a series
started over (a run resumed from an older checkpoint), so that any reader can tell superseded points
apart without reading the whole series.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Sequence,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.schema import SchemaItem

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

EVENT_LEVELS = ("info", "warning", "error")

# BigInteger ids on PostgreSQL; on SQLite an INTEGER PRIMARY KEY is the rowid (64-bit anyway).
BigId = BigInteger().with_variant(Integer(), "sqlite")


def _run_id() -> Column:
    """The run a row belongs to: deleting the run deletes the row."""
    return Column("run_id", BigId, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False)


def _of_run(name: str, *items: SchemaItem) -> Table:
    """A table of rows of one run each, numbered store-wide: (id, run_id), then `items`."""
    id_ = Column("id", BigId, primary_key=True, autoincrement=True)
    return Table(name, metadata, id_, _run_id(), *items)


runs = Table(
    "runs",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("uid", String(32), nullable=False),
    Column("project", String(200), nullable=False),
    Column("name", String(200), nullable=False),
    Column("status", String(16), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("ended_at", Float, nullable=True),
    Column("host", String(255), nullable=False, server_default=""),
    Column("pid", Integer, nullable=True),
    Column("rank", Integer, nullable=False, server_default="0"),
    Column("world_size", Integer, nullable=False, server_default="1"),
    Column("command", Text, nullable=False, server_default=""),
    Column("git_commit", String(64), nullable=True),
    Column("config", Text, nullable=False, server_default="{}"),
    Column("summary", Text, nullable=False, server_default="{}"),
    Column("tags", Text, nullable=False, server_default="[]"),
    Column("notes", Text, nullable=False, server_default=""),
    # The writer's own flush period, so readers can judge staleness per run.
    Column("heartbeat_interval", Float, nullable=False, server_default="1.0"),
    # wandb's `group` and `job_type` (init(group=..., job_type=...)); "" when not given.
    Column("run_group", String(200), nullable=False, server_default=""),
    Column("job_type", String(64), nullable=False, server_default=""),
    # Liveness (schema/store/liveness.py): a reader on the run's own host checks its process
    # directly.
    Column("proc_host", String(128), nullable=True),
    Column("proc_start", String(32), nullable=True),
    # Stall detection (docs/reslog.md, "Stalls"): the threshold in use, and since when the run
    # has not logged a step (NULL: it is logging).
    Column("stall_after", Float, nullable=True),
    Column("stalled_since", Float, nullable=True),
    UniqueConstraint("uid"),
    CheckConstraint(
        "status IN ('running', 'finished', 'failed', 'killed', 'crashed')", name="status"
    ),
    Index(None, "project", "created_at"),
)

keys = Table(
    "keys",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("name", String(500), nullable=False),
    UniqueConstraint("name"),
)

# Ids are monotonic: readers page with "id > cursor", so a reconnect neither loses nor repeats
# rows.
points = _of_run(
    "points",
    Column("key_id", BigId, ForeignKey("keys.id"), nullable=False),
    Column("step", BigInteger, nullable=False),
    Column("wall", Float, nullable=False),
    Column("value", Float, nullable=True),  # NULL = NaN (see module docstring)
    Index(None, "run_id", "id"),  # points of run R after cursor C
    Index(None, "run_id", "key_id", "step"),  # points of key K of run R
)

# Points as compressed columnar chunks (docs/store.md, "Points as compressed columns"). The
# writer logs the points of one flush as one head chunk per keyset; a keyset's heads are sealed
# into one chunk of ~4,096 rows. `points` holds rows written before revision 0006 until
# `reslog upgrade` converts them; readers take both (schema/store/chunk_read.py).
keysets = _of_run(
    "keysets",
    # The key ids of the chunks' value columns, in column order: "3,7,9".
    Column("key_ids", Text, nullable=False),
    UniqueConstraint("run_id", "key_ids"),
)

chunks = _of_run(
    "chunks",
    Column("keyset_id", BigId, ForeignKey("keysets.id", ondelete="CASCADE"), nullable=False),
    # Point ids: row i's points have ids ids[i] .. ids[i] + k - 1 in column order, so a point
    # id is unique in the store and readers page with "id > cursor" as with rows.
    Column("id_lo", BigInteger, nullable=False),
    Column("id_hi", BigInteger, nullable=False),
    Column("n", Integer, nullable=False),  # rows; n * k points
    Column("step_lo", BigInteger, nullable=False),
    Column("step_hi", BigInteger, nullable=False),
    Column("sealed", SmallInteger, nullable=False),  # 0: a head chunk, 1: sealed
    Column("data", LargeBinary, nullable=False),  # schema/store/chunk_codec.py, with an ids stream
    Index(None, "id_hi"),  # new since cursor C, store-wide (resplot sync, the agent)
    Index(None, "run_id", "id_hi"),  # new since cursor C, of run R
    Index(None, "keyset_id", "step_lo"),  # a key by step
)

# The next point id (one row): writers reserve ids here, SQLite inside the flush's
# transaction, PostgreSQL in a short one of its own (ids reserved, not committed, are gaps).
point_ids = Table(
    "point_ids",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),
    Column("next_id", BigInteger, nullable=False),
)
# PostgreSQL's: a row takes one value v and its points the ids v * 256 + column
# (schema/store/chunk_write.py). SQLite has no sequences and ignores it.
point_row_ids = Sequence("point_row_ids", metadata=metadata)

events = _of_run(
    "events",
    Column("wall", Float, nullable=False),
    Column("step", BigInteger, nullable=True),
    # alert, checkpoint, note, schedule, resume, drop...: free-form, new kinds need no migration.
    Column("kind", String(32), nullable=False),
    Column("level", String(8), nullable=False, server_default="info"),
    Column("title", Text, nullable=False),
    Column("body", Text, nullable=False, server_default=""),
    CheckConstraint("level IN ('info', 'warning', 'error')", name="level"),
    Index(None, "run_id", "id"),
)


def _series_columns() -> list[Column]:
    """(run_id, key_id): the series a row of series, rollups or takes belongs to."""
    return [
        _run_id(),
        Column("key_id", BigId, ForeignKey("keys.id"), nullable=False),
    ]


def _agg_columns() -> list[Column]:
    """The aggregate columns of schema.store.rollup.AGG_COLUMNS (NULL where rollup.py says None)."""
    return [
        Column("n", BigInteger, nullable=False),
        Column("nan", BigInteger, nullable=False),
        Column("posinf", BigInteger, nullable=False),
        Column("neginf", BigInteger, nullable=False),
        Column("vmin", Float, nullable=True),
        Column("vmax", Float, nullable=True),
        Column("min_at", BigInteger, nullable=True),
        Column("max_at", BigInteger, nullable=True),
        Column("vsum", Float, nullable=True),  # NULL: the finite values summed to NaN (inf - inf)
        Column("step_lo", BigInteger, nullable=False),
        Column("step_hi", BigInteger, nullable=False),
        Column("last", Float, nullable=True),  # NULL = NaN
        Column("wall_lo", Float, nullable=False),
        Column("wall_hi", Float, nullable=False),
        Column("bits", BigInteger, nullable=False),
        Column("nonfinite_at", BigInteger, nullable=True),
    ]


def _per_series(name: str, *columns: Column, key: tuple[str, ...] = ()) -> Table:
    """A table of rows of one series each: (run_id, key_id), then `columns`, clustered on
    (run_id, key_id, *key) (WITHOUT ROWID on SQLite): a series' rows are one contiguous range."""
    return Table(
        name,
        metadata,
        *_series_columns(),
        *columns,
        PrimaryKeyConstraint("run_id", "key_id", *key),
        sqlite_with_rowid=False,
    )


series = _per_series(
    "series",
    *_agg_columns(),
    # Rollup levels kept for this series (1..levels; schema.store.buckets.needed_levels).
    Column("levels", SmallInteger, nullable=False),
    # Step and wall of the newest point by arrival: where a restart is told from (a lower step
    # logged later), also by a writer that resumes the run in another process.
    Column("tail_step", BigInteger, nullable=False),
    Column("tail_wall", Float, nullable=False),
)

# A tile is one contiguous range of the primary key.
rollups = _per_series(
    "rollups",
    Column("level", SmallInteger, nullable=False),
    Column("bucket", BigInteger, nullable=False),
    *_agg_columns(),
    key=("level", "bucket"),
)

# From point id `since_id` on, the series restarted at `step`: its points with a smaller id
# and a step >= `step` are superseded (TensorBoard's purge rule; the store keeps them).
takes = _per_series(
    "takes",
    Column("since_id", BigInteger, nullable=False),
    Column("step", BigInteger, nullable=False),
    key=("since_id",),
)
