"""Runs get wandb's grouping: `run_group` and `job_type` (both "" when not given).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

`run_group` rather than `group`: GROUP is an SQL keyword, and the read-only agent builds its
queries as plain text.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("run_group", sa.String(200), nullable=False, server_default=""))
        batch.add_column(sa.Column("job_type", sa.String(64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("job_type")
        batch.drop_column("run_group")
