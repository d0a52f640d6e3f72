"""Alembic, driven from code: the migrations ship inside the package, no alembic.ini needed."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from schema.store.revision import MIGRATION_LOCK_KEY

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if engine is not None:
        # ConfigParser interpolates "%": a path like "runs/100%" or a password with "%" in it
        # would otherwise break every migration.
        url = engine.url.render_as_string(hide_password=False)
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@cache
def known_revisions() -> frozenset[str]:
    scripts = ScriptDirectory.from_config(alembic_config())
    return frozenset(rev.revision for rev in scripts.walk_revisions())


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


# Revisions whose stores hold no rollups at today's bucket widths: from before them (0001), or
# cut at 64-step first-level buckets (0002-0004, deleted by 0005). A store coming from one of
# them gets its rollups built from its points.
NO_ROLLUPS_AT_TODAYS_WIDTHS = frozenset({"0001", "0002", "0003", "0004"})
# Revisions whose points are rows only: from 0006 on, `reslog upgrade` converts them to chunks.
ROWS_ONLY = frozenset({*NO_ROLLUPS_AT_TODAYS_WIDTHS, "0005"})


def upgrade(
    engine: Engine,
    revision: str = "head",
    progress: Callable[[int, int], None] | None = None,
    converting: Callable[[int, int], None] | None = None,
):
    """Migrate the store to `revision`, and build the rollups of the points already stored when
    it comes from before them or from other bucket widths: one transaction, so a failure leaves
    the store as it was. Then, at 0006 or later, convert the rows of `points` into chunks run
    by run (schema/store/chunk_convert.py, `converting` hears its progress): a failure there leaves
    the runs converted so far converted, the others as rows, and calling this again resumes.
    Returns what the conversion did (schema.store.chunk_convert.Converted), None before 0006."""
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Processes starting together on an empty database would all create the tables;
            # the lock makes the later ones wait and then find the schema at head (a no-op).
            # SQLite gets the same from BEGIN IMMEDIATE (schema.store.connect).
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        before = _current(conn)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        rebuild = NO_ROLLUPS_AT_TODAYS_WIDTHS
        if before in rebuild and _current(conn) not in rebuild:
            from schema.store.rollup_repair import backfill

            backfill(conn, progress)
        after = _current(conn)
    if after in ROWS_ONLY:
        return None
    from schema.store.chunk_convert import convert

    return convert(engine, converting)


def _current(conn) -> str | None:
    from sqlalchemy import inspect

    if "alembic_version" not in inspect(conn).get_table_names():
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
