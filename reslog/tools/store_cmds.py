"""The `reslog` commands that check or change a store: check, upgrade, import (the parser and
`main` are reslog/tools/cli.py's; compact is reslog/tools/compact_cmd.py's)."""

from __future__ import annotations

import argparse
import sys

from reslog import text
from reslog.tools.cli_store import EXIT_ERROR, printed_warnings

# ---- check and upgrade -------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    from reslog.tools.maintenance import check_store  # Alembic: half of `reslog ls`'s start

    with printed_warnings():
        report = check_store(
            args.store,
            fix=args.fix,
            full=args.full,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
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
            engine,
            args.kind,
            [Path(p) for p in args.path],
            project=args.project,
            name=args.name,
            replace=args.replace,
            progress=progress,
        )
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
