"""Rollups: series summary rows, multi-resolution buckets, and the takes a series restarted at.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

The tables only: `reslog upgrade` (schema.store.migrate.upgrade) fills them from the points already
stored, in the same transaction, with schema.store.rollup_repair.backfill.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _agg() -> list[sa.Column]:
    return [
        sa.Column("n", sa.BigInteger, nullable=False),
        sa.Column("nan", sa.BigInteger, nullable=False),
        sa.Column("posinf", sa.BigInteger, nullable=False),
        sa.Column("neginf", sa.BigInteger, nullable=False),
        sa.Column("vmin", sa.Float, nullable=True),
        sa.Column("vmax", sa.Float, nullable=True),
        sa.Column("min_at", sa.BigInteger, nullable=True),
        sa.Column("max_at", sa.BigInteger, nullable=True),
        sa.Column("vsum", sa.Float, nullable=True),
        sa.Column("step_lo", sa.BigInteger, nullable=False),
        sa.Column("step_hi", sa.BigInteger, nullable=False),
        sa.Column("last", sa.Float, nullable=True),
        sa.Column("wall_lo", sa.Float, nullable=False),
        sa.Column("wall_hi", sa.Float, nullable=False),
        sa.Column("bits", sa.BigInteger, nullable=False),
        sa.Column("nonfinite_at", sa.BigInteger, nullable=True),
    ]


def _owner() -> list:
    return [
        sa.Column("run_id", BigId, nullable=False),
        sa.Column("key_id", BigId, nullable=False),
    ]


def _fks(table: str) -> list:
    return [
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=f"fk_{table}_run_id_runs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["key_id"], ["keys.id"], name=f"fk_{table}_key_id_keys"),
    ]


def upgrade() -> None:
    op.create_table(
        "series",
        *_owner(),
        *_agg(),
        sa.Column("levels", sa.SmallInteger, nullable=False),
        sa.Column("tail_step", sa.BigInteger, nullable=False),
        sa.Column("tail_wall", sa.Float, nullable=False),
        *_fks("series"),
        sa.PrimaryKeyConstraint("run_id", "key_id", name="pk_series"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "rollups",
        *_owner(),
        sa.Column("level", sa.SmallInteger, nullable=False),
        sa.Column("bucket", sa.BigInteger, nullable=False),
        *_agg(),
        *_fks("rollups"),
        sa.PrimaryKeyConstraint("run_id", "key_id", "level", "bucket", name="pk_rollups"),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "takes",
        *_owner(),
        sa.Column("since_id", sa.BigInteger, nullable=False),
        sa.Column("step", sa.BigInteger, nullable=False),
        *_fks("takes"),
        sa.PrimaryKeyConstraint("run_id", "key_id", "since_id", name="pk_takes"),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("takes")
    op.drop_table("rollups")
    op.drop_table("series")
