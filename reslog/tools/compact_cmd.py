"""`reslog compact STORE [--run RUN]`: rewrite the sealed chunks of runs whose writer is gone into
fewer (schema/store/chunk_compact.py), and say what it did in one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable


def cmd_compact(args: argparse.Namespace) -> int:
    from reslog.tools.maintenance import progress_bar
    from schema.store.chunk_compact import compact, writer_gone
    from schema.store.connect import open_store, store_label
    from schema.store.read import find_run

    engine = open_store(args.store)
    try:
        run_ids = None
        if args.run is not None:
            with engine.connect() as conn:
                run_id, run = find_run(conn, args.run)
                if not writer_gone(conn, run_id):
                    print(
                        f"{store_label(args.store)}: run {run.ref.uid[:8]} ({run.name}) is "
                        "still being written: its chunks are its writer's; nothing compacted"
                    )
                    return 0
            run_ids = [run_id]
        shown = sys.stderr.isatty() or args.progress
        done = compact(engine, run_ids, progress_bar("compacting") if shown else None)
    finally:
        engine.dispose()
    print(f"{store_label(args.store)}: {done.line()}")
    return 0


def add_parser(command: Callable[..., argparse.ArgumentParser], store_help: str) -> None:
    """`reslog compact`, added to the CLI's parser through its `command` helper."""
    p = command(
        "compact",
        "rewrite the chunks of finished runs into fewer: keys with the same steps and walls "
        "share one chunk, small chunks are joined (every point and id kept)",
        cmd_compact,
    )
    p.add_argument("store", nargs="?", metavar="STORE", help=store_help)
    p.add_argument("--run", metavar="RUN", help="only this run (uid, uid prefix or name)")
    p.add_argument(
        "--progress",
        action="store_true",
        help="print progress even when stderr is not a terminal",
    )
