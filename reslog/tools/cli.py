"""`reslog`: list, show, tail, export, check, upgrade and import stores from the command line.

Every command takes the store as an optional positional argument (a SQLite path or a
SQLAlchemy URL; default $RESLOG_STORE, else runs/reslog.db). Read commands open the store
read-only and never create it. Errors are one line on stderr with exit code 2, no traceback.
Text from a store (names, keys, config, events) is printed through reslog.text.safe/cell:
controls and bidi marks as visible escapes, table cells cut unless `--full`.

What users run while training writes starts light: `reslog ls` reads a local SQLite store with
the standard library alone (reslog/tools/quick_read.py); SQLAlchemy and the modules built on it
are imported by the commands that need them, when they need them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from reslog import text
from reslog.tools.quick_read import Snapshot, open_snapshot
from schema.rules.compare import duration_s, last_step, select_keys
from schema.store.errors import AmbiguousRun, StoreError
from schema.store.records import RunInfo
from schema.store.rollup import WALL_HI
from schema.store.status import LIVE_STATUSES

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from schema.store import read

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
EXPORT_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".md": "md", ".tex": "latex"}
POINT_FORMATS = ("csv", "csv-wide", "parquet")
TABLE_FORMATS = {"md": "md", "latex": "latex", "table-csv": "csv"}


@contextlib.contextmanager
def printed_warnings() -> Iterator[None]:
    """Warnings raised inside, printed one line each after it instead of Python's format. A
    ResourceWarning stays ignored, as Python's default filters have it: some other object
    the collector frees meanwhile (a test's leaked connection) is not this command's news."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ResourceWarning)
        yield
    for w in caught:
        print(f"reslog: warning: {w.message}", file=sys.stderr)


def open_store(
    store: str | None, *, readonly: bool = True, quick: bool = False
) -> Engine | Snapshot:
    """schema.store.connect.open_store; with `quick`, a local SQLite store at this code's revision
    is opened as a stdlib Snapshot instead (reslog/tools/quick_read.py), without SQLAlchemy."""
    if quick:
        snap = open_snapshot(store)
        if snap is not None:
            return snap
    from schema.store.connect import open_store as open_engine

    return open_engine(store, readonly=readonly)


@contextlib.contextmanager
def opened(store: str | None, *, readonly: bool = True) -> Iterator[Engine]:
    """open_store with its warnings printed as one line each."""
    with printed_warnings():
        engine = open_store(store, readonly=readonly)
    try:
        yield engine
    finally:
        engine.dispose()


def __getattr__(name: str) -> object:
    # PEP 562: schema.store.connect's label, for callers of this module that used to find it here,
    # without importing SQLAlchemy for the commands that never need it.
    if name == "store_label":
        from schema.store.connect import store_label

        return store_label
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_kw(store: str | None) -> dict[str, str]:
    from schema.store.connect import store_label

    return {"source": "local", "store": store_label(store)}


class _NeverRaised(Exception):
    """Stands for an exception class whose module was never imported: nothing raised it."""


def loaded_error(module: str, name: str) -> type[Exception]:
    """The exception class `name` of `module` if that module is loaded, else _NeverRaised: an
    `except` clause that must not import SQLAlchemy to name its errors."""
    loaded = sys.modules.get(module)
    return _NeverRaised if loaded is None else getattr(loaded, name)


# ---- ls ----------------------------------------------------------------------------------------


def last_point(series: dict[str, tuple]) -> tuple[int | None, float | None]:
    """(step, wall) of a run's newest points, from its series aggregates."""
    if not series:
        return None, None
    return last_step(series), max(a[WALL_HI] for a in series.values())


RunList = tuple[str, list[tuple[int, RunInfo]], dict[int, dict[str, tuple]]]


def _selected(args: argparse.Namespace, runs: list[tuple[int, RunInfo]]) -> list:
    return [
        (row_id, run)
        for row_id, run in runs
        if args.group in (None, run.group) and args.job_type in (None, run.job_type)
    ]


def listed(args: argparse.Namespace) -> RunList:
    """(store label, runs, {run id: {key: aggregate}}). A local SQLite store is read from one
    snapshot with the standard library alone (reslog/tools/quick_read.py); a URL, or a file
    that path passes on or stumbles over, through SQLAlchemy, which says what is wrong."""
    with printed_warnings():
        source = open_store(args.store, quick=True)
    if isinstance(source, Snapshot):
        try:
            with source:
                runs = _selected(args, source.runs(project=args.project))
                return source.label, runs, source.series_aggs([r for r, _ in runs])
        except sqlite3.Error:
            with printed_warnings():
                source = open_store(args.store)
    from schema.store.connect import store_label
    from schema.store.envelope import agg_of
    from schema.store.reader import StoreReader

    try:
        label = store_label(args.store)
        reader = StoreReader(source, store=label)
        runs = _selected(args, reader.runs(project=args.project))
        aggs = {
            run_id: {k: agg_of(row, 2) for k, row in per.items()}
            for run_id, per in reader.series_rows([r for r, _ in runs]).items()
        }
    finally:
        source.dispose()
    return label, runs, aggs


def cmd_ls(args: argparse.Namespace) -> int:
    now = time.time()
    label, runs, aggs = listed(args)
    rows = []
    for row_id, run in runs:
        step, wall = last_point(aggs.get(row_id, {}))
        rows.append(
            [
                run.ref.uid[:8],
                run.project + (f" ({run.group})" if run.group else ""),
                run.name,
                run.status,
                "-" if step is None else step,
                text.age(wall, now),
                text.duration(duration_s(run)),
                run.host,
            ]
        )
    if not rows:
        print(f"no runs in {label}")
        return 0
    header = ["uid", "project", "name", "status", "step", "last point", "duration", "host"]
    print(text.table(header, rows, right=frozenset({4}), limit=cell_limit(args)))
    return 0


def cell_limit(args: argparse.Namespace, limit: int = text.CELL_LIMIT) -> int | None:
    return None if getattr(args, "full", False) else limit


# ---- show --------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    from reslog.tools.describe import describe_job, describe_run, format_event, key_stats
    from reslog.tools.jobs import Store, job_report
    from schema.store import read
    from schema.store.connect import store_label
    from schema.store.reader import StoreReader

    with opened(args.store) as engine:
        label = store_label(args.store)
        reader = StoreReader(engine, store=label)
        try:
            row_id, run = reader.find(args.run)
        except AmbiguousRun as exc:  # list them, pick none; the one-line error follows
            rows = [
                [r.ref.uid, text.clock(r.created_at), r.status, r.project, r.name]
                for r in exc.matches
            ]
            print(text.table(["uid", "started", "status", "project", "name"], rows))
            raise
        stats = key_stats(reader.summaries(row_id))
        evs = reader.events(row_id, run.ref)
        report = None
        if run.group and run.world_size > 1:
            with engine.connect() as conn:
                store = Store(conn, label, dict(read.list_runs(conn, store=label)))
                report = job_report(store, run.group)
    print("\n".join(describe_run(run, cell_limit(args, text.VALUE_LIMIT))))
    if report is not None:
        print("\n".join(describe_job(report)))
    print("\nkeys" + ("" if stats else "     (no points)"))
    if stats:
        header = ["key", "points", "nan", "last step", "last", "min", "max"]
        print(text.table(header, stats, right=frozenset(range(1, 7)), limit=cell_limit(args)))
    print(f"\nevents ({len(evs)})" if evs else "\nevents   (none)")
    shown = evs if args.events <= 0 else evs[-args.events :]
    if len(shown) < len(evs):
        print(f"  ... {len(evs) - len(shown)} earlier (--events 0 shows all)")
    for ev in shown:
        print("  " + format_event(ev, cell_limit(args, text.VALUE_LIMIT)))
    return 0


# ---- tail --------------------------------------------------------------------------------------


def print_points(batch: read.PointRows, names: dict[int, str], globs: list[str] | None) -> None:
    """One line per run of consecutive points that share a step: `step 120  loss=2.31  lr=…`."""
    line_step, parts = None, []
    for key_id, step, value in zip(batch.key_ids, batch.steps, batch.values, strict=True):
        name = names[key_id]
        if globs and not select_keys([name], globs):
            continue
        if step != line_step and parts:
            print(f"step {line_step}  " + "  ".join(parts), flush=True)
            parts = []
        line_step = step
        parts.append(f"{text.cell(name)}={text.number(value)}")
    if parts:
        print(f"step {line_step}  " + "  ".join(parts), flush=True)


def cmd_tail(args: argparse.Namespace) -> int:
    from reslog.tools.describe import format_event
    from schema.store import read

    globs = args.keys or None
    with opened(args.store) as engine:
        with engine.connect() as conn:
            row_id, run = read.find_run(conn, args.run, **read_kw(args.store))
            names = read.key_names(conn)
            # Start a few points back so the latest values show at once, then follow by cursor.
            cursor = read.tail_cursor(conn, row_id, args.lines)
            ev_cursor = max((e.id for e in read.fetch_events(conn, row_id, run.ref)), default=0)
        print(f"{text.cell(run.name)} ({run.ref.uid[:8]}) {run.status}", flush=True)
        while True:
            with engine.connect() as conn:
                now = read.run_by_id(conn, row_id, "local", "")
                if now is None:
                    print("run deleted", flush=True)
                    return 0
                status = now.status
                while True:
                    batch = read.fetch_points(conn, [row_id], after=cursor, limit=10_000)
                    if any(k not in names for k in batch.key_ids):
                        names = read.key_names(conn)
                    print_points(batch, names, globs)
                    cursor = batch.cursor
                    if len(batch) < 10_000:
                        break
                for ev in read.fetch_events(conn, row_id, run.ref, after=ev_cursor):
                    print("event  " + format_event(ev), flush=True)
                    ev_cursor = ev.id
            # The status was read before the final fetch, so nothing written before the end
            # is missed.
            if status not in LIVE_STATUSES:
                print(f"run {text.cell(status)}", flush=True)
                return 0
            time.sleep(args.interval)


# ---- watch -------------------------------------------------------------------------------------


def cmd_watch(args: argparse.Namespace) -> int:
    from reslog.tools.watch import watch
    from schema.store.connect import store_label

    first, *others = args.stores or [None]
    with contextlib.ExitStack() as stack:
        engine = stack.enter_context(opened(first))
        more = [(stack.enter_context(opened(o)), store_label(o)) for o in others]
        return watch(
            engine, store_label(first), interval=args.interval, command=args.exec, more=more
        )


# ---- export ------------------------------------------------------------------------------------


def export_format(args: argparse.Namespace) -> str:
    from reslog.tools import export

    if args.format:
        return args.format
    suffix = os.path.splitext(args.output or "")[1].lower()
    if suffix in EXPORT_SUFFIXES:
        return EXPORT_SUFFIXES[suffix]
    raise export.ExportError(
        "give --format csv|csv-wide|parquet|md|latex|table-csv (or an -o name ending in "
        ".csv, .parquet, .md or .tex)"
    )


def cmd_export(args: argparse.Namespace) -> int:
    from reslog.tools import export
    from schema.store.connect import store_label
    from schema.store.reader import StoreReader

    fmt = export_format(args)
    output = args.output or "-"
    with opened(args.store) as engine:
        reader = StoreReader(engine, store=store_label(args.store))
        selected: list[object] | None = args.runs
        if selected is None and args.project is not None:
            selected = [i for i, _ in reader.runs(project=args.project)]
        data = export.load_runs(reader, selected, args.keys if fmt in POINT_FORMATS else None)
        if not data:
            raise export.ExportError(f"no runs to export in {store_label(args.store)}")
        # Points are read as they are written: the store stays open until the file is done.
        if fmt in POINT_FORMATS:
            export.write_points(data, output, fmt, args.keys)
        else:
            export.write_table(data, output, TABLE_FORMATS[fmt], args.metrics)
    if output != "-":
        print(f"wrote {output} ({fmt}, {len(data)} run{'s' * (len(data) != 1)})", file=sys.stderr)
    return 0


def cmd_notify(args: argparse.Namespace) -> int:
    from reslog.tools.notify import notify

    notify(args.kind, args.url)
    return 0


# ---- check and upgrade -------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from reslog.tools.maintenance import check_store  # Alembic: half of `reslog ls`'s start

    with printed_warnings():
        report = check_store(args.store, fix=args.fix, full=args.full,
                             say=lambda line: print(line, file=sys.stderr, flush=True))  # fmt: skip
    for line in report.info:
        print(text.safe(line))
    for line in report.problems:
        print(f"PROBLEM  {text.safe(line)}")
    if report.problems:
        n = len(report.problems)
        print(f"{n} problem{'s' * (n != 1)} in {report.where}")
        return 1
    print(f"OK  {report.where}")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    from reslog.tools.maintenance import progress_bar, upgrade_store

    shown = sys.stderr.isatty() or args.progress
    bar = progress_bar("rollups") if shown else None
    chunks = progress_bar("points to chunks") if shown else None
    packed = progress_bar("compacting") if shown else None
    print(
        upgrade_store(
            args.store,
            backup=not args.no_backup,
            force=args.force,
            progress=bar,
            converting=chunks,
            compacting=packed,
        )
    )
    return 0


# ---- import ------------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from reslog.tools.importers import ImportError_, shown
    from reslog.tools.importers.command import import_runs
    from schema.store.connect import open_store, store_label

    progress = None
    if sys.stderr.isatty() or args.progress:

        def progress(line: str) -> None:
            print(f"\rimport {args.kind}: {line}", end="", file=sys.stderr, flush=True)

    with printed_warnings():
        engine = open_store(args.store, create=True)
    try:
        counts = import_runs(
            engine, args.kind, [Path(p) for p in args.path], project=args.project,
            name=args.name, replace=args.replace, progress=progress,
        )  # fmt: skip
    except ImportError_ as exc:
        if progress is not None:
            print(file=sys.stderr)
        line = text.safe(shown(" ".join(str(exc).split())))
        print(f"reslog: import {args.kind}: {line}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        engine.dispose()
    if progress is not None:
        print(file=sys.stderr)
    print(
        f"{counts.new} run(s), {counts.points:,} points imported into {store_label(args.store)}"
        + (f"; {counts.updated} updated" if counts.updated else "")
        + (f"; {counts.already} already there" if counts.already else "")
        + (f"; {counts.corrupt} corrupt records skipped" if counts.corrupt else "")
    )
    return 0


# ---- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reslog",
        description="Inspect reslog stores: list, show, tail, export, check, upgrade.",
        epilog="STORE: a SQLite path or SQLAlchemy URL; default $RESLOG_STORE, else "
        "runs/reslog.db. RUN: a uid, a unique uid prefix, or a unique run name.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_: str, func) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        return p

    store_help = "SQLite path or URL (default: $RESLOG_STORE, else runs/reslog.db)"

    p = command("ls", "list runs with status, step, last point age, duration, host", cmd_ls)
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument("--project", help="only runs of this project")
    p.add_argument("--group", help="only runs of this group (init(group=...))")
    p.add_argument("--job-type", help="only runs of this job type (init(job_type=...))")
    p.add_argument("--full", action="store_true",
                   help=f"whole cells (default: cut at {text.CELL_LIMIT} characters)")  # fmt: skip

    p = command("show", "one run: config, summary, tags, notes, keys, events", cmd_show)
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument("run", metavar="RUN", help="uid, uid prefix or name")
    p.add_argument("--full", action="store_true",
                   help=f"whole values (default: cut at {text.VALUE_LIMIT} chars)")  # fmt: skip
    p.add_argument(
        "--events",
        type=int,
        default=50,
        metavar="N",
        help="show the last N events (0: all; default 50)",
    )

    p = command("tail", "follow a live run, printing new points as they arrive", cmd_tail)
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument("run", metavar="RUN", help="uid, uid prefix or name")
    p.add_argument("--keys", nargs="+", metavar="GLOB", help="only keys matching these globs")
    p.add_argument("--interval", type=positive_float, default=1.0, help="poll seconds (1)")
    p.add_argument(
        "-n",
        "--lines",
        type=int,
        default=20,
        metavar="N",
        help="start with the last N points (default 20)",
    )

    p = command(
        "watch",
        "follow every run of a store: one line per state change or alert (crashed, stalled, "
        "failed, finished, NaN/inf, throttling, drops, writer errors; a job's stragglers and "
        "hung collectives, naming rank and host)",
        cmd_watch,
    )
    p.add_argument(
        "stores",
        nargs="*",
        metavar="STORE",
        help=store_help + "; several: a job's ranks are joined across them (one per host)",
    )
    p.add_argument(
        "--exec",
        metavar="CMD",
        help="also run CMD (through the shell) for each line, with RESLOG_RUN, RESLOG_RUN_ID, "
        "RESLOG_PROJECT, RESLOG_STATUS, RESLOG_MESSAGE and RESLOG_STORE set",
    )
    p.add_argument("--interval", type=positive_float, default=1.0, help="poll seconds (1)")

    p = command(
        "notify",
        "post a watch hook's notice (RESLOG_* variables) to a webhook, its JSON built safely: "
        "reslog watch --exec 'reslog notify slack \"$SLACK_WEBHOOK_URL\"'",
        cmd_notify,
    )
    p.add_argument("kind", choices=("slack", "feishu", "dingtalk", "json"),
                   help="the body's shape (json: every RESLOG_* field)")  # fmt: skip
    p.add_argument("url", metavar="URL", help="the webhook's URL")

    p = command(
        "export", "runs to CSV/Parquet, or a comparison table to Markdown/LaTeX/CSV", cmd_export
    )
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument("--runs", nargs="+", metavar="RUN", help="runs (default: all)")
    p.add_argument("--project", help="all runs of this project")
    p.add_argument("--keys", nargs="+", metavar="GLOB", help="keys to export (default: all)")
    p.add_argument(
        "--metrics",
        nargs="+",
        metavar="GLOB",
        help="table formats: metrics for last/min columns "
        "(default: train/loss valid/loss valid/ppl)",
    )
    p.add_argument(
        "--format",
        choices=[*POINT_FORMATS, *TABLE_FORMATS],
        help="csv (long), csv-wide (by step), parquet; md, latex, table-csv "
        "(comparison table). Default: from the -o suffix",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")

    p = command("check", "integrity, schema revision, orphan rows, stale running runs", cmd_check)
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument(
        "--fix",
        action="store_true",
        help="mark stale 'running' runs as crashed and rebuild rollups that disagree with the "
        "raw points (writes to the store)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="SQLite's integrity_check instead of quick_check: also matches every index entry "
        "with its row (about 6x slower)",
    )

    p = command("upgrade", "migrate the store to this reslog's schema (Alembic)", cmd_upgrade)
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument(
        "--no-backup",
        action="store_true",
        help="skip the copy STORE.bak-REV made before migrating a SQLite file",
    )
    p.add_argument("--force", action="store_true", help="upgrade even with runs still running")
    p.add_argument(
        "--progress",
        action="store_true",
        help="print the backfill's progress even when stderr is not a terminal",
    )
    from reslog.tools.compact_cmd import add_parser as add_compact

    add_compact(command, store_help)
    p = command(
        "import",
        "bring TensorBoard event files, wandb offline runs, a CSV table or Parquet files (reslog's "
        "own export, the neptune-exporter's) into a store",
        cmd_import,
    )
    p.add_argument(
        "kind", choices=("tensorboard", "wandb", "csv", "parquet"), help="what PATH holds"
    )
    p.add_argument(
        "path",
        metavar="PATH",
        nargs="+",
        help="tensorboard: a log folder (one run per folder of event files; imported again, "
        "what was appended since); wandb: a wandb/ folder or one offline-run-* folder; csv: a "
        "file (long: key,value,step; wide: step and a column per key); parquet: files or "
        "folders of them (long: run,key,step,wall,value; or the neptune-exporter's layout)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="a run imported before is deleted and imported again whole",
    )
    p.add_argument("--store", help=store_help + "; created if missing")
    p.add_argument("--project", help="project of the imported runs (default: the kind, or "
                   "the wandb run's own)")  # fmt: skip
    p.add_argument("--name", help="csv: run name when the file has no 'run' column")
    p.add_argument(
        "--progress",
        action="store_true",
        help="print progress even when stderr is not a terminal",
    )
    return parser


def positive_float(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        f = -1.0
    if not f > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return f


def damage_hint(detail: str, label: str) -> str:
    """What to do about a store SQLite finds damaged (corrupt pages) or cannot grow (a full
    disk), else ""."""
    if "disk is full" in detail:
        return (
            " (free some room and run it again: what was being written was rolled back, the "
            "store is as it was)"
        )
    if "malformed" not in detail and "corrupt" not in detail:
        return ""
    return (
        f" (the file is damaged: `reslog check {label}` says where; restore it from a "
        "backup, or export the runs that still read with --runs)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (StoreError, loaded_error("reslog.tools.export", "ExportError")) as exc:
        from reslog.redact import redact_text  # compiling its patterns: ~8% of `ls`'s start

        print("reslog: " + text.safe(redact_text(" ".join(str(exc).split()))), file=sys.stderr)
    except (loaded_error("sqlalchemy.exc", "SQLAlchemyError"), sqlite3.Error) as exc:
        # sqlite3's own errors come from the read-only connections and the backup, which do
        # not go through SQLAlchemy.
        from reslog.redact import redact_text
        from schema.store.connect import store_label

        detail = redact_text(str(getattr(exc, "orig", None) or exc).strip().splitlines()[0])
        label = store_label(getattr(args, "store", None))
        print(f"reslog: {label}: {text.safe(detail)}{damage_hint(detail, label)}", file=sys.stderr)
    except ValueError as exc:
        # A chunk of points that does not decode (schema/store/chunk_codec.py): its bytes were
        # damaged inside the blob, where SQLite does not look, or a newer reslog wrote it.
        detail = str(exc)
        if not detail.startswith(("corrupt chunk", "chunk format version")):
            raise
        from schema.store.connect import store_label

        label = store_label(getattr(args, "store", None))
        print(f"reslog: {label}: {text.safe(detail)}{damage_hint(detail, label)}", file=sys.stderr)
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):  # `reslog ls | head`
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the exit quiet
            return 0
        print(f"reslog: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
