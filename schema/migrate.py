"""Alembic, driven from code: the migrations ship inside the package, no alembic.ini needed."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    if engine is not None:
        cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False))
    return cfg


@cache
def known_revisions() -> frozenset[str]:
    scripts = ScriptDirectory.from_config(alembic_config())
    return frozenset(rev.revision for rev in scripts.walk_revisions())


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head() or ""


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the store to `revision` in one transaction per step (SQLite: batch mode)."""
    cfg = alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
