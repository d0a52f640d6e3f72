"""Opening a store: URL resolution, the one SQLite connect hook, and the schema version check.

A store is a SQLite file (the default) or any SQLAlchemy URL (PostgreSQL when many hosts share
one server). Read commands never create a file; an older schema is refused with the command
that upgrades it; a newer one is refused rather than misread.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError, ProgrammingError

from schema.store.errors import NotAStore, SchemaTooNew, SchemaTooOld, StoreError, StoreNotFound
from schema.store.revision import HEAD_REVISION
from schema.store.sqlite_file import (
    DEFAULT_STORE,
    NETWORK_FS,
    connect_readonly,
    create_file,
    filesystem_type,
    make_folders,
)
from schema.store.tables import metadata
from schema.store.user_files import check_not_planted

BUSY_TIMEOUT_MS = 30_000
STORE_TABLES = frozenset({"alembic_version", "runs"})  # what makes a SQLite file a reslog store


def resolve_store(store: str | os.PathLike[str] | None = None) -> str:
    """Store argument → SQLAlchemy URL: explicit value, else $RESLOG_STORE, else runs/reslog.db."""
    if store is None or store == "":
        store = os.environ.get("RESLOG_STORE") or DEFAULT_STORE
    store = os.fspath(store)
    if "://" in store:
        return store
    # Built, not concatenated: "?", "#" and "%" in a path are escaped, so "runs/q?a/x.db"
    # stays that file instead of becoming "runs/q" with a query string.
    path = str(Path(store).expanduser().absolute())
    return URL.create("sqlite", database=path).render_as_string()


def sqlite_path(url: str) -> Path | None:
    """The file behind a SQLite URL, None for another backend or an in-memory database."""
    if not url.startswith("sqlite"):
        return None
    try:
        database = make_url(url).database
    except ArgumentError:
        return None
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def _install_sqlite_hook(engine: Engine, *, readonly: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        # Autocommit at the driver level; transactions are begun explicitly below, so a writer
        # takes the write lock up front (BEGIN IMMEDIATE) and busy_timeout can do its job
        # instead of failing with "database is locked" on a read-to-write upgrade.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        if not readonly:
            # WAL is a setting of the file: switched on only for an empty file or a reslog
            # store, never for another program's database (which would keep it, and get a
            # -wal and a -shm beside it) that stored_revision then refuses.
            names = {r[0] for r in cur.execute("SELECT name FROM sqlite_master")}
            if not names or names >= STORE_TABLES:
                cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")


# libpq settings for a store on a server, unless the URL's query sets them: a server that
# stops answering becomes an error (and a reconnect) within about a minute, never a hang.
PG_DEFAULTS = {
    "connect_timeout": "10",  # s: a server that accepts and never answers
    "keepalives": "1",
    "keepalives_idle": "30",  # s of silence before the first probe
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",  # ms: data sent and never acknowledged (Linux)
}
PG_STATEMENT_TIMEOUT_MS = 60_000
# Seconds a write may hang before the writer's watchdog breaks the connection (see
# reslog/training/writer.py); `write_timeout=S` in the URL's query sets it and is not passed to
# libpq.
DEFAULT_WRITE_TIMEOUT_S = 90.0


def server_connect_args(url: URL) -> tuple[URL, dict[str, str]]:
    """(the URL without reslog's own query options, libpq defaults it does not set)."""
    query = dict(url.query)
    query.pop("write_timeout", None)
    args = {k: v for k, v in PG_DEFAULTS.items() if k not in query}
    if "options" not in query:
        args["options"] = f"-c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    if not url.drivername.startswith("postgresql"):
        args = {}
    return url.set(query=query), args


def write_timeout(url: URL) -> float:
    value = url.query.get("write_timeout")
    try:
        return float(value) if value is not None else DEFAULT_WRITE_TIMEOUT_S
    except (TypeError, ValueError):
        raise StoreError(f"write_timeout in the store URL must be seconds, got {value!r}") from None


def make_engine(url: str, *, readonly: bool = False) -> Engine:
    """An Engine with the store's connection settings; does not touch the schema."""
    path = sqlite_path(url)
    if path is None and url.startswith("sqlite"):
        engine = create_engine(url)
        _install_sqlite_hook(engine, readonly=readonly)
        return engine
    if path is None:
        try:
            parsed, connect_args = server_connect_args(make_url(url))
            return create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
        except ImportError as exc:  # the URL names a driver that is not installed
            shown = make_url(url).render_as_string(hide_password=True)
            raise StoreError(f"cannot open {shown}: driver not installed ({exc})") from None
    if readonly:
        # mode=ro: a reader can never create, lock out or modify the training run's file.
        engine = create_engine(
            URL.create("sqlite", database=str(path)),
            creator=lambda: connect_readonly(path, check_same_thread=False),
        )
    else:
        engine = create_engine(url, connect_args={"check_same_thread": False})
    _install_sqlite_hook(engine, readonly=readonly)
    return engine


def url_label(url: str | URL) -> str:
    """How messages, the CLI and run tables name a store: the SQLite file path, or the URL
    without its password."""
    url = make_url(url)
    database = url.database if url.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:":
        return url.render_as_string(hide_password=True)
    if database.startswith("file:"):  # a URI filename: the path ends where its query starts
        return database.removeprefix("file:").split("?", 1)[0]
    return str(Path(database))


def store_label(store: str | os.PathLike[str] | None) -> str:
    """url_label of a store argument (a path, a URL, or None for $RESLOG_STORE / the default)."""
    return url_label(resolve_store(store))


def engine_label(engine: Engine) -> str:
    """url_label of an open store."""
    return url_label(engine.url)


def stored_revision(engine: Engine, verb: str = "read") -> str | None:
    """The store's Alembic revision; None for an empty database. Raises NotAStore, or
    StoreError saying what could not be done (`verb`: read, create...)."""
    try:
        with engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            if not names:
                return None
            if "alembic_version" not in names or "runs" not in names:
                raise NotAStore(
                    f"{engine_label(engine)} is not a reslog store "
                    f"(tables: {', '.join(sorted(names)) or 'none'})"
                )
            rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except DBAPIError as exc:
        if "file is not a database" in str(exc) or "not a database" in str(exc):
            raise NotAStore(f"{engine_label(engine)} is not a SQLite database") from None
        raise StoreError(f"cannot {verb} {engine_label(engine)}: {exc.orig}") from None
    if rev is None:
        raise NotAStore(f"{engine_label(engine)} has no schema revision")
    return str(rev)


def check_revision(engine: Engine, revision: str | None, where: str) -> None:
    if revision == HEAD_REVISION:
        return
    from schema.store.migrate import known_revisions  # Alembic: half of a read command's start

    if revision in known_revisions():
        raise SchemaTooOld(
            f"{where} uses store schema {revision}, this reslog needs {HEAD_REVISION}; "
            f"upgrade it with: reslog upgrade {where}"
        )
    raise SchemaTooNew(
        f"{where} was written by a newer reslog (schema {revision}, this one knows up to "
        f"{HEAD_REVISION}); upgrade reslog to read it"
    )


def refuse_odd_file(path: Path) -> None:
    """NotAStore for a directory, FIFO, socket or device at a store's path: SQLite would block
    on a FIFO forever, or fail later with a less clear message."""
    if path.is_dir():
        raise NotAStore(f"{path} is a directory, not a store file")
    if path.exists() and not path.is_file():
        raise NotAStore(f"{path} is not a regular file (a FIFO, socket or device): not a store")


def open_store(
    store: str | os.PathLike[str] | None = None,
    *,
    create: bool = False,
    readonly: bool = False,
) -> Engine:
    """Open a store checked against this code's schema.

    create=True makes the file and tables when missing (the writer's path); otherwise a missing
    SQLite file is StoreNotFound and never created (every read command's path).
    """
    url = resolve_store(store)
    path = sqlite_path(url)
    where = str(path) if path is not None else url
    if path is not None:
        if create and not readonly:
            try:  # a writer follows no link another user put at the store's name
                check_not_planted(path)
            except PermissionError as exc:
                raise StoreError(f"cannot write {path}: it {exc.strerror}") from None
        refuse_odd_file(path)
        if not path.exists():
            if not create:
                raise StoreNotFound(f"no store at {path}")
            try:
                make_folders(path.parent)  # private unless RESLOG_STORE_MODE says otherwise
            except OSError as exc:
                failed = exc.filename or path.parent
                why = (
                    "is a file, not a folder" if isinstance(exc, FileExistsError) else exc.strerror
                )
                raise StoreError(f"cannot create {path}: {failed} {why}") from None
        fstype = filesystem_type(path.parent)
        if fstype in NETWORK_FS:
            warnings.warn(
                f"{path} is on a network file system ({fstype}); SQLite locking is unreliable "
                "there. Keep the store on a local disk or use a PostgreSQL URL.",
                RuntimeWarning,
                stacklevel=2,
            )
    creating = create and not readonly and path is not None and not path.exists()
    if creating:
        assert path is not None
        try:
            create_file(path)  # before SQLite does, with its mode (0600 by default)
        except OSError as exc:
            raise StoreError(f"cannot create {path}: {exc.strerror}") from None
    # Processes started together (torchrun's ranks) race to create one file: SQLite can answer
    # "locked" at once, without waiting, while another one switches it to WAL or creates the
    # tables. That is worth waiting out, as the busy timeout does for every other lock.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        engine = make_engine(url, readonly=readonly and path is not None)
        try:
            return _checked(engine, where, create=create, readonly=readonly, creating=creating)
        except StoreError as exc:
            engine.dispose()
            racing = create and path is not None and "locked" in str(exc)
            if not racing or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _checked(engine: Engine, where: str, *, create: bool, readonly: bool, creating: bool) -> Engine:
    """`engine` once its store is at this code's revision (created when empty and `create`)."""
    try:
        revision = stored_revision(engine, "create" if creating else "open")
        if revision is None:
            if not create or readonly:
                raise NotAStore(f"{where} is empty: no reslog store there")
            from schema.store.migrate import upgrade

            upgrade(engine)
            return engine
        check_revision(engine, revision, where)
    except OperationalError as exc:
        raise StoreError(f"cannot open {where}: {exc.orig}") from None
    except ProgrammingError as exc:
        hint = privilege_hint(exc)
        raise StoreError(f"cannot create the store's tables in {where}: {hint}") from None
    return engine


def privilege_hint(exc: DBAPIError) -> str:
    """A server's "permission denied" as what the role lacks and how to grant it."""
    detail = str(exc.orig).strip().splitlines()[0]
    match = re.search(r"permission denied for (schema|table|database) (\S+)", detail)
    if match is None:
        return detail
    kind, name = match.groups()
    need = {"schema": "CREATE", "database": "CREATE", "table": "INSERT, UPDATE"}[kind]
    return (
        f"{detail}; the role needs {need} on {kind} {name} "
        f"(as the owner: GRANT {need} ON {kind.upper()} {name} TO <role>)"
    )


def create_all_for_test(engine: Engine) -> None:
    """Tables straight from the metadata (no Alembic): the golden-dump test compares both."""
    metadata.create_all(engine)
