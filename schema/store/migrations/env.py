"""Alembic environment: uses the caller's connection when given (schema.store.migrate.upgrade)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from schema.store.tables import metadata

config = context.config


def run_migrations(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things: batch mode rebuilds the table instead.
        render_as_batch=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run_migrations(connection)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        run_migrations(conn)
