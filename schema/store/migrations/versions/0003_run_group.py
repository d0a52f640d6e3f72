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
    # Plain ADD COLUMN, not batch mode: rebuilding `runs` on SQLite would drop the table, and
    # with foreign keys on that cascades to every point of every run.
    op.add_column("runs", sa.Column("run_group", sa.String(200), nullable=False, server_default=""))
    op.add_column("runs", sa.Column("job_type", sa.String(64), nullable=False, server_default=""))


def downgrade() -> None:
    # DROP COLUMN as SQL (SQLite >= 3.35, PostgreSQL) for the same reason.
    op.execute("ALTER TABLE runs DROP COLUMN job_type")
    op.execute("ALTER TABLE runs DROP COLUMN run_group")
