"""The bookkeeping table of a local mirror (`resplot sync`): how far each source store has been
copied, committed in the same transaction as the copied rows, so a sync cut at any moment
resumes where it stopped and never copies a row twice.

It lives only in mirror stores, on its own MetaData: an ordinary store, its migrations and the
golden schema dump do not have it. A mirror is otherwise an ordinary store (reslog and resplot
read it as any other).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, MetaData, PrimaryKeyConstraint, String, Table

from schema.store.tables import NAMING_CONVENTION

mirror_metadata = MetaData(naming_convention=NAMING_CONVENTION)

mirror_cursors = Table(
    "mirror_cursors",
    mirror_metadata,
    # The source spec as given and the store's path where it lives (one spec, many stores).
    Column("source", String(2000), nullable=False),
    Column("store", String(2000), nullable=False),
    # Which file answered (device:inode): a store deleted and made anew restarts its ids.
    Column("store_id", String(64), nullable=False),
    Column("points_after", BigInteger, nullable=False),  # the source's points.id copied so far
    Column("events_after", BigInteger, nullable=False),
    Column("synced_at", Float, nullable=False),
    PrimaryKeyConstraint("source", "store"),
)
