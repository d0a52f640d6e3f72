"""Points as compressed columnar chunks: the keysets, chunks and point_ids tables.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-28

The tables only, and the id counter set past every stored point, so new points are numbered
after the old ones. The rows of `points` stay where they are and readers take them as one more
source; `reslog upgrade` (schema.store.migrate.upgrade) then converts them run by run, each run in
one transaction (schema/store/chunk_convert.py), so an upgrade killed at any moment leaves a store
that reads whole and resumes where it stopped.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "keysets",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("run_id", BigId, nullable=False),
        sa.Column("key_ids", sa.Text, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_keysets_run_id_runs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_keysets"),
        sa.UniqueConstraint("run_id", "key_ids", name="uq_keysets_run_id_key_ids"),
    )
    op.create_table(
        "chunks",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("run_id", BigId, nullable=False),
        sa.Column("keyset_id", BigId, nullable=False),
        sa.Column("id_lo", sa.BigInteger, nullable=False),
        sa.Column("id_hi", sa.BigInteger, nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("step_lo", sa.BigInteger, nullable=False),
        sa.Column("step_hi", sa.BigInteger, nullable=False),
        sa.Column("sealed", sa.SmallInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_chunks_run_id_runs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["keyset_id"], ["keysets.id"], name="fk_chunks_keyset_id_keysets", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_chunks"),
    )
    op.create_index("ix_chunks_id_hi", "chunks", ["id_hi"])
    op.create_index("ix_chunks_run_id_id_hi", "chunks", ["run_id", "id_hi"])
    op.create_index("ix_chunks_keyset_id_step_lo", "chunks", ["keyset_id", "step_lo"])
    op.create_table(
        "point_ids",
        sa.Column("id", sa.SmallInteger, autoincrement=False, nullable=False),
        sa.Column("next_id", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_point_ids"),
    )
    op.execute("INSERT INTO point_ids (id, next_id) SELECT 1, coalesce(max(id), 0) + 1 FROM points")
    if op.get_bind().dialect.name == "postgresql":
        # Row ids step by 256 point ids (schema/store/chunk_write.py): start past every stored
        # point.
        start = op.get_bind().exec_driver_sql("SELECT coalesce(max(id), 0) FROM points").scalar()
        op.execute(f"CREATE SEQUENCE point_row_ids START WITH {int(start) // 256 + 1}")


def downgrade() -> None:
    # Points already converted to chunks cannot go back to rows here: older code would not see
    # them. The downgrade refuses rather than lose them.
    bind = op.get_bind()
    if bind.exec_driver_sql("SELECT count(*) FROM chunks").scalar():
        raise RuntimeError(
            "this store holds points as chunks; an older reslog cannot read them "
            "(restore the backup `reslog upgrade` wrote before 0006)"
        )
    if bind.dialect.name == "postgresql":
        op.execute("DROP SEQUENCE point_row_ids")
    op.drop_table("point_ids")
    op.drop_index("ix_chunks_keyset_id_step_lo", "chunks")
    op.drop_index("ix_chunks_run_id_id_hi", "chunks")
    op.drop_index("ix_chunks_id_hi", "chunks")
    op.drop_table("chunks")
    op.drop_table("keysets")
