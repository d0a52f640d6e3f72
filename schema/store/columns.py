"""The columns of the runs and events tables, in table order, as plain names.

Standard library only, Python 3.8 syntax: the agent's archive ships it (reslog/agent/bundle.py)
and reads rows with it, where schema.store.tables (SQLAlchemy) cannot go.
tests/schema/test_schema.py holds these to schema.store.tables.
"""

RUN_COLUMNS = (
    "id",
    "uid",
    "project",
    "name",
    "status",
    "created_at",
    "heartbeat_at",
    "ended_at",
    "host",
    "pid",
    "rank",
    "world_size",
    "command",
    "git_commit",
    "config",
    "summary",
    "tags",
    "notes",
    "heartbeat_interval",
    "run_group",
    "job_type",
    "proc_host",
    "proc_start",
    "stall_after",
    "stalled_since",
)
EVENT_COLUMNS = ("id", "run_id", "wall", "step", "kind", "level", "title", "body")
