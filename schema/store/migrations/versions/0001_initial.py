"""Initial store: runs, keys, points, events.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("uid", sa.String(32), nullable=False),
        sa.Column("project", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float, nullable=True),
        sa.Column("host", sa.String(255), nullable=False, server_default=""),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("rank", sa.Integer, nullable=False, server_default="0"),
        sa.Column("world_size", sa.Integer, nullable=False, server_default="1"),
        sa.Column("command", sa.Text, nullable=False, server_default=""),
        sa.Column("git_commit", sa.String(64), nullable=True),
        sa.Column("config", sa.Text, nullable=False, server_default="{}"),
        sa.Column("summary", sa.Text, nullable=False, server_default="{}"),
        sa.Column("tags", sa.Text, nullable=False, server_default="[]"),
        sa.Column("notes", sa.Text, nullable=False, server_default=""),
        sa.Column("heartbeat_interval", sa.Float, nullable=False, server_default="1.0"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("uid", name="uq_runs_uid"),
        sa.CheckConstraint(
            "status IN ('running', 'finished', 'failed', 'killed', 'crashed')",
            name="status",
        ),
    )
    op.create_index("ix_runs_project_created_at", "runs", ["project", "created_at"])

    op.create_table(
        "keys",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(500), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_keys"),
        sa.UniqueConstraint("name", name="uq_keys_name"),
    )

    op.create_table(
        "events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("run_id", BigId, nullable=False),
        sa.Column("wall", sa.Float, nullable=False),
        sa.Column("step", sa.BigInteger, nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("level", sa.String(8), nullable=False, server_default="info"),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("body", sa.Text, nullable=False, server_default=""),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_events_run_id_runs", ondelete="CASCADE"
        ),
        sa.CheckConstraint("level IN ('info', 'warning', 'error')", name="level"),
    )
    op.create_index("ix_events_run_id_id", "events", ["run_id", "id"])

    op.create_table(
        "points",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("run_id", BigId, nullable=False),
        sa.Column("key_id", BigId, nullable=False),
        sa.Column("step", sa.BigInteger, nullable=False),
        sa.Column("wall", sa.Float, nullable=False),
        sa.Column("value", sa.Float, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_points"),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_points_run_id_runs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["key_id"], ["keys.id"], name="fk_points_key_id_keys"),
    )
    op.create_index("ix_points_run_id_id", "points", ["run_id", "id"])
    op.create_index("ix_points_run_id_key_id_step", "points", ["run_id", "key_id", "step"])


def downgrade() -> None:
    op.drop_table("points")
    op.drop_table("events")
    op.drop_table("keys")
    op.drop_table("runs")
