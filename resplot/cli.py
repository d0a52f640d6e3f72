"""`resplot` command line: open the window, or work headless.

    resplot [SOURCE ...]                         open the viewer (sources are remembered)
    resplot snapshot SOURCE... -o chart.png      draw a chart page to PNG / SVG / PDF
    resplot export SOURCE... --format csv -o F   points (csv, csv-wide, parquet) or the
                                                 comparison table (md, latex, table-csv)
    resplot report SOURCE... -o report.html      one offline, interactive HTML file
    resplot sync SOURCE... MIRROR                copy runs into a local store (incremental)

Errors are printed as one line (`resplot: error: ...`) with a non-zero exit status. Here: the
parser, `main`, the window and `sync`; snapshot, export and report are in headless_cmds.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from resplot.cli_sources import CliError, check_specs, ssh_options

try:
    from resplot.data.state import PAGES, RANK_STATS, X_AXES
except ModuleNotFoundError as exc:  # `pip install reslog` alone (a GPU host) has no viewer
    _MISSING: ModuleNotFoundError | None = exc
else:
    _MISSING = None

GUI_EXTRA = "pip install 'reslog[gui]'"
EXPORT_FORMATS = ("csv", "csv-wide", "parquet", "md", "latex", "table-csv")
EXIT_USAGE, EXIT_ERROR = 2, 1


def _add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="store path or glob, host:path, ssh://user@host:port/path, or a PostgreSQL URL",
    )
    p.add_argument(
        "--runs",
        nargs="+",
        metavar="RUN",
        help="runs by name, uid or uid prefix (globs allowed); default all",
    )
    p.add_argument("--keys", nargs="+", metavar="GLOB", help="metric keys by glob")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for sources")
    _add_ssh_config(p)


def _add_ssh_config(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ssh-config",
        "-F",
        type=Path,
        metavar="FILE",
        help="ssh config file to use instead of ~/.ssh/config and "
        "/etc/ssh/ssh_config (like ssh -F)",
    )


def build_parsers() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    top = argparse.ArgumentParser(
        prog="resplot",
        description="Live charts of reslog stores, local or over SSH. "
        "Subcommands: snapshot, export, report, sync (see `resplot report -h`).",
    )
    top.add_argument("sources", nargs="*", metavar="SOURCE", help="stores to open")
    top.add_argument(
        "--config",
        type=Path,
        help="settings file (default $RESPLOT_CONFIG or ~/.config/resplot/settings.json)",
    )
    _add_ssh_config(top)

    sub = argparse.ArgumentParser(prog="resplot")
    cmds = sub.add_subparsers(dest="command", required=True)
    snap = cmds.add_parser("snapshot", help="draw a chart page to a file, no window")
    _add_selection(snap)
    snap.add_argument("-o", "--output", required=True, type=Path, help=".png, .svg or .pdf")
    snap.add_argument("--page", choices=PAGES, default="training")
    snap.add_argument(
        "--job",
        metavar="GROUP",
        help="--page ranks: the job by its group (default: the newest job)",
    )
    snap.add_argument(
        "--phase",
        default="step",
        help="--page ranks: the phase drawn (step, data, forward, comm, ...)",
    )
    snap.add_argument(
        "--cell",
        choices=RANK_STATS,
        default="max",
        help="--page ranks: each cell's largest (default), mean or smallest value",
    )
    snap.add_argument(
        "--x",
        dest="x_axis",
        default="auto",
        metavar="|".join(X_AXES) + "|key:NAME",
        help="x axis (default auto: each run's define_metric step metric or step counter such "
        "as train/global_step or iter, else its step); key:NAME places points by a logged "
        "counter (key:iter, key:train/epoch)",
    )
    snap.add_argument(
        "--no-ignore-outliers",
        dest="ignore_outliers",
        action="store_false",
        help="loss charts: y range over every value (default: without the top 1 %%)",
    )
    snap.add_argument("--smoothing", type=float, default=0.6, help="EMA weight in [0, 1)")
    snap.add_argument("--linear-y", action="store_true", help="loss on a linear axis")
    snap.add_argument("--size", default="12x7.5", help="inches WxH (default 12x7.5)")
    snap.add_argument("--dpi", type=int, default=120)
    snap.add_argument(
        "--config",
        type=Path,
        help="the window's settings file, for its run colours (default $RESPLOT_CONFIG or "
        "~/.config/resplot/settings.json)",
    )
    snap.add_argument(
        "--tile-cache-mb",
        type=int,
        default=256,
        metavar="MB",
        help="memory bound of the tiles kept (the window's tile_cache_mb)",
    )

    exp = cmds.add_parser("export", help="export points or the comparison table")
    _add_selection(exp)
    exp.add_argument("-o", "--output", required=True, help="file name, or - for stdout")
    exp.add_argument(
        "--format",
        required=True,
        choices=EXPORT_FORMATS,
        help="points: csv (long), csv-wide, parquet; table: md, latex, table-csv",
    )
    exp.add_argument(
        "--metrics", nargs="+", metavar="GLOB", help="metrics summarised in the comparison table"
    )

    rep = cmds.add_parser("report", help="one self-contained, offline, interactive HTML file")
    _add_selection(rep)
    rep.add_argument("-o", "--output", required=True, type=Path, help="the .html file")
    rep.add_argument(
        "--pages",
        nargs="+",
        default=["training"],
        metavar="PAGE",
        choices=("training", "system", "timing", "ranks"),
        help="pages shown, as tabs: training (default), system, timing, ranks; --keys adds a "
        "page of the keys matching its globs",
    )
    rep.add_argument(
        "--max-mb",
        type=float,
        default=10.0,
        metavar="MB",
        help="bound on the file's size (default 10): every point when all fit, else exact "
        "columns as fine as fit (up to 2,048 over the longest run); the file says what was "
        "left out",
    )
    rep.add_argument(
        "--metrics", nargs="+", metavar="GLOB", help="metrics summarised in the comparison table"
    )
    rep.add_argument("--title", default="", help="the page's title")

    syn = cmds.add_parser("sync", help="copy runs into a local store that outlives the host")
    syn.add_argument(
        "paths",
        nargs="+",
        metavar="SOURCE... MIRROR",
        help="sources (any spec but PostgreSQL), then the local mirror store, created when missing",
    )
    syn.add_argument(
        "--watch",
        type=float,
        metavar="SECONDS",
        help="sync again every SECONDS until Ctrl+C (for live runs)",
    )
    _add_ssh_config(syn)
    return top, sub


def _looks_like_command(word: str) -> bool:
    """A bare word (no path, host or URL characters) that names no file here: a mistyped
    subcommand, not a store."""
    import os
    import re

    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", word)) and not os.path.exists(word)


COMMANDS = ("snapshot", "export", "report", "sync")


def _unknown_command(word: str) -> CliError:
    return CliError(
        f"unknown command {word!r} (commands: {', '.join(COMMANDS)}; see `resplot -h`). "
        f"To open a store of that name, write ./{word}"
    )


def cmd_sync(args) -> int:
    import time

    from resplot.sources.base import AuthFailed
    from resplot.sources.client import AgentConnectionError
    from resplot.sources.sync import Mirror
    from resplot.ssh.prompts import default_asker
    from schema.store.errors import StoreError

    if len(args.paths) < 2:
        raise CliError(
            "sync needs at least one SOURCE and the MIRROR store: "
            "resplot sync gpu-box:runs/reslog.db mirror.db"
        )
    *texts, mirror = args.paths
    specs = check_specs(texts)
    if _looks_remote(mirror):
        raise CliError(f"the mirror {mirror!r} must be a local store path")
    ssh = ssh_options(args, default_asker())
    failed = False
    with Mirror(mirror) as m:
        while True:
            for spec in specs:
                try:
                    report = m.sync(spec, ssh=ssh)
                except (AgentConnectionError, AuthFailed, StoreError, TimeoutError, OSError) as exc:
                    if args.watch is None:
                        raise CliError(f"{spec}: {exc}; the mirror keeps what it has") from None
                    print(
                        f"{spec}: {exc} (the mirror keeps what it has; trying again)",
                        file=sys.stderr,
                    )
                    failed = True
                    continue
                print(f"{spec} -> {mirror}: {report.line()}", file=sys.stderr)
            if args.watch is None:
                return EXIT_ERROR if failed else 0
            time.sleep(max(0.5, args.watch))


def _looks_remote(path: str) -> bool:
    from resplot.sources.spec import LocalSpec, SpecError, parse_spec

    try:
        return not isinstance(parse_spec(path), LocalSpec)
    except SpecError:
        return False


def cmd_open(args) -> int:
    import os

    check_specs(args.sources)
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY")
        or os.environ.get("WAYLAND_DISPLAY")
        or os.environ.get("QT_QPA_PLATFORM")
    ):
        # Qt would abort the process here; say what to do instead.
        raise CliError(
            "no display (DISPLAY is not set): run resplot on a desktop, forward X with ssh -X, "
            "or use `resplot snapshot SOURCE -o chart.png` / `resplot export`"
        )
    from PyQt5.QtWidgets import QApplication

    from resplot.ui import settings as settings_mod
    from resplot.ui.window import MainWindow, make_poller

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("resplot")
    path = args.config or settings_mod.config_path()
    settings = settings_mod.load(path)
    for spec in args.sources:
        settings.state.add_source(spec)
    from resplot.data.cache import SeriesCache
    from resplot.ui.collector import freeze_startup

    cache = SeriesCache()
    freeze_startup()  # the imports' objects, before the window's (resplot/ui/collector.py)
    window = MainWindow(cache, settings, path)
    poller = make_poller(cache, settings.state.poll_interval, window.ask_host_key)
    from resplot.ui.prompt_dialog import PromptAsker

    # Logins are asked in a dialog, once per host for the session.
    poller.ssh = ssh_options(args, PromptAsker(window), window.ask_host_key)
    from dataclasses import replace

    from resplot.ui.local_copies import LocalCopies

    # The same logins as the poller; an unknown host key is not asked about from the
    # background sync (its source is refused until the window has accepted the key).
    copies = LocalCopies(ssh=replace(poller.ssh, ask_host_key=None))
    window.attach_local_copies(copies)
    copies.start()
    app.aboutToQuit.connect(copies.stop)
    window.attach_poller(poller)
    window.show()
    return app.exec_()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if _MISSING is not None:
        return _missing_extra(_MISSING)
    top, sub = build_parsers()
    try:
        if argv and argv[0] in COMMANDS:
            args = sub.parse_args(argv)
            from resplot import headless_cmds as headless

            run = {
                "snapshot": headless.cmd_snapshot,
                "export": headless.cmd_export,
                "report": headless.cmd_report,
                "sync": cmd_sync,
            }
            return run[args.command](args)
        if argv and _looks_like_command(argv[0]):
            raise _unknown_command(argv[0])
        return cmd_open(top.parse_args(argv))
    except CliError as exc:
        print(f"resplot: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as exc:
        return _missing_extra(exc)
    except Exception as exc:
        # Store and connection errors carry a message meant for people; show it, not a trace.
        from schema.store.errors import StoreError

        if isinstance(exc, StoreError):
            print(f"resplot: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise


if __name__ == "__main__":
    sys.exit(main())


def _missing_extra(exc: ModuleNotFoundError) -> int:
    print(
        f"resplot: error: {exc.name or exc} is not installed; the viewer needs the gui extra: "
        f"{GUI_EXTRA}",
        file=sys.stderr,
    )
    return EXIT_USAGE
