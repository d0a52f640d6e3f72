"""The `reslog` commands that read a store: ls, show, tail, watch, export; and notify (the
parser and `main` are reslog/tools/cli.py's)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
import time
from typing import TYPE_CHECKING

from reslog import text
from reslog.tools.cli_store import open_store, opened, printed_warnings, read_kw
from reslog.tools.quick_read import Snapshot
from schema.rules.compare import duration_s, last_step, select_keys
from schema.store.errors import AmbiguousRun
from schema.store.records import RunInfo
from schema.store.rollup import WALL_HI
from schema.store.status import LIVE_STATUSES

if TYPE_CHECKING:
    from schema.store import read

EXPORT_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".md": "md", ".tex": "latex"}
POINT_FORMATS = ("csv", "csv-wide", "parquet")
TABLE_FORMATS = {"md": "md", "latex": "latex", "table-csv": "csv"}


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
