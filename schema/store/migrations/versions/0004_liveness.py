"""Run liveness and stalls: the process's host identity and start time, the stall threshold.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

Nullable columns only: runs written before this revision have none, and readers keep the
heartbeat rule for them (schema/store/status.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = (
    ("proc_host", sa.String(128)),
    ("proc_start", sa.String(32)),
    ("stall_after", sa.Float),
    ("stalled_since", sa.Float),
)


# Plain ALTER TABLE on both backends (SQLite >= 3.35 drops columns). Never batch mode here: it
# rebuilds `runs`, and dropping the old table with foreign keys on deletes every point.


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("runs", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    for name, _kind in reversed(COLUMNS):
        op.execute(f"ALTER TABLE runs DROP COLUMN {name}")
