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
import os
import sqlite3
import sys
from collections.abc import Sequence

from reslog import text
from reslog.tools.cli_store import EXIT_ERROR
from reslog.tools.read_cmds import (
    POINT_FORMATS,
    TABLE_FORMATS,
    cmd_export,
    cmd_ls,
    cmd_notify,
    cmd_show,
    cmd_tail,
    cmd_watch,
)
from reslog.tools.store_cmds import cmd_check, cmd_import, cmd_upgrade
from schema.store.errors import StoreError

EXIT_INTERRUPTED = 130


def __getattr__(name: str) -> object:
    # PEP 562: schema.store.connect's label, for callers of this module that used to find it here,
    # without importing SQLAlchemy for the commands that never need it.
    if name == "store_label":
        from schema.store.connect import store_label

        return store_label
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _NeverRaised(Exception):
    """Stands for an exception class whose module was never imported: nothing raised it."""


def loaded_error(module: str, name: str) -> type[Exception]:
    """The exception class `name` of `module` if that module is loaded, else _NeverRaised: an
    `except` clause that must not import SQLAlchemy to name its errors."""
    loaded = sys.modules.get(module)
    return _NeverRaised if loaded is None else getattr(loaded, name)


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
    p.add_argument(
        "--full",
        action="store_true",
        help=f"whole cells (default: cut at {text.CELL_LIMIT} characters)",
    )

    p = command("show", "one run: config, summary, tags, notes, keys, events", cmd_show)
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument("run", metavar="RUN", help="uid, uid prefix or name")
    p.add_argument(
        "--full",
        action="store_true",
        help=f"whole values (default: cut at {text.VALUE_LIMIT} chars)",
    )
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
    p.add_argument(
        "kind",
        choices=("slack", "feishu", "dingtalk", "json"),
        help="the body's shape (json: every RESLOG_* field)",
    )
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
    p.add_argument(
        "--project", help="project of the imported runs (default: the kind, or the wandb run's own)"
    )
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
