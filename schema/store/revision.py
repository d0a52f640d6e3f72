"""The store schema's revision, readable without SQLAlchemy (the agent ships a copy of this file).

HEAD_REVISION is the newest Alembic revision (tests check it against the migrations);
OLDER_REVISIONS are the earlier ones, which readers refuse with the command that upgrades them.
"""

HEAD_REVISION = "0006"
OLDER_REVISIONS = ("0001", "0002", "0003", "0004", "0005")
# PostgreSQL advisory lock taken by a migration and by the conversion of rows to chunks (any
# constant: such locks are keyed by a 64-bit integer).
MIGRATION_LOCK_KEY = 0x7265736C6F67
