"""Rollups at 128-step first-level buckets (64 before): the stored rollups are thrown away and
`reslog upgrade` (schema.store.migrate.upgrade) builds them again from the points, in the same
transaction, with schema.store.rollup_repair.backfill.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

No table changes: bucket b of level l means other steps now (schema/store/buckets.py), so rollups
cut at the old widths would be misread, not merely coarse. Takes go too: the backfill finds the
restarts again from the points by id, as `reslog check --fix` does.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("rollups", "series", "takes"):
        op.execute(f"DELETE FROM {table}")


def downgrade() -> None:
    # 0004's widths cannot be computed here: the older reslog rebuilds them with
    # `reslog check --fix` (which reports every series without rollups until then). Takes do
    # not depend on the widths and stay, so readers still leave superseded points out.
    for table in ("rollups", "series"):
        op.execute(f"DELETE FROM {table}")
