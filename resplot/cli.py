"""`resplot` command line: open the window, or work headless.

    resplot [SOURCE ...]                         open the viewer (sources are remembered)
    resplot snapshot SOURCE... -o chart.png      draw a chart page to PNG / SVG / PDF
    resplot export SOURCE... --format csv -o F   points (csv, csv-wide, parquet) or the
                                                 comparison table (md, latex, table-csv)
    resplot report SOURCE... -o report.html      one offline, interactive HTML file
    resplot sync SOURCE... MIRROR                copy runs into a local store (incremental)

Errors are printed as one line (`resplot: error: ...`) with a non-zero exit status.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

try:
    from resplot.data.state import PAGES, RANK_STATS, X_AXES, StateError, ViewState
except ModuleNotFoundError as exc:  # `pip install reslog` alone (a GPU host) has no viewer
    _MISSING: ModuleNotFoundError | None = exc
else:
    _MISSING = None

GUI_EXTRA = "pip install 'reslog[gui]'"
EXPORT_FORMATS = ("csv", "csv-wide", "parquet", "md", "latex", "table-csv")
EXIT_USAGE, EXIT_ERROR = 2, 1


class CliError(Exception):
    """A user-facing failure: printed without a traceback."""


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


def ssh_options(args, asker, ask_host_key=None):
    """What every SSH source gets (resplot.ssh.options.SSHOptions): who answers a login (asked
    once per host per session), who is asked about unknown host keys, and the ssh config file
    when one was named."""
    from resplot.ssh.options import SSHOptions
    from resplot.ssh.prompts import Secrets

    config = None
    if args.ssh_config is not None:
        if not args.ssh_config.expanduser().is_file():
            raise CliError(f"--ssh-config {args.ssh_config}: no such file")
        config = args.ssh_config.expanduser()
    return SSHOptions(ask_host_key=ask_host_key, secrets=Secrets(asker), ssh_config=config)


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


def _load(args):
    """The sources opened and read (runs, keys, summaries); the caller closes them. A login
    that needs a password asks on the terminal, or through SSH_ASKPASS (as ssh does)."""
    from resplot.sources.polling import Loaded
    from resplot.ssh.errors import SSHError
    from resplot.ssh.prompts import default_asker

    specs = check_specs(args.sources)
    ssh = ssh_options(args, default_asker())
    try:
        return Loaded(specs, timeout=args.timeout, ssh=ssh)
    except (OSError, TimeoutError, ValueError, SSHError) as exc:  # SSHError: refused logins
        raise CliError(str(exc)) from None


def _looks_like_command(word: str) -> bool:
    """A bare word (no path, host or URL characters) that names no file here: a mistyped
    subcommand, not a store."""
    import os
    import re

    return bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", word)) and not os.path.exists(word)


def select_runs(cache, patterns: list[str] | None) -> list:
    runs = cache.runs()
    if not runs:
        raise CliError("no runs found in the given sources")
    if not patterns:
        return [r.ref for r in runs]
    chosen = []
    for pat in patterns:
        hits = [
            r.ref
            for r in runs
            if r.name == pat or r.ref.uid.startswith(pat) or fnmatch.fnmatchcase(r.name, pat)
        ]
        if not hits:
            names = ", ".join(sorted({r.name for r in runs})[:20])
            raise CliError(f"no run matches {pat!r}; runs: {names}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


def _size(text: str) -> tuple[float, float]:
    try:
        w, h = (float(v) for v in text.lower().split("x"))
    except ValueError:
        raise CliError(f"--size must look like 12x7.5 (inches), got {text!r}") from None
    if w <= 0 or h <= 0 or w * h > 2000:
        raise CliError(f"--size {text!r} is out of range")
    return w, h


def cmd_snapshot(args) -> int:
    from resplot.draw import fonts
    from resplot.draw.charts import SAVE_FORMATS, render

    if args.output.suffix.lower().lstrip(".") not in SAVE_FORMATS:
        raise CliError(f"-o {args.output}: use a .png, .svg or .pdf file name")
    state = ViewState(page=args.page)
    try:
        state.set_x_axis(args.x_axis)
        state.set_smoothing(args.smoothing)
    except StateError as exc:
        raise CliError(str(exc)) from None
    state.log_y = not args.linear_y
    state.ignore_outliers = args.ignore_outliers
    if args.keys:
        state.set_custom_keys(args.keys)
        if args.page == "training" and "--page" not in sys.argv:
            state.page = "custom"
    size = _size(args.size)
    if args.tile_cache_mb < 1:
        raise CliError(f"--tile-cache-mb must be at least 1, got {args.tile_cache_mb}")
    state.colors = window_colors(args.config)
    if args.page == "ranks":
        return _snapshot_ranks(args, state, size)
    with _load(args) as loaded:
        loaded.cache.set_tile_limit(args.tile_cache_mb << 20)
        refs = select_runs(loaded.cache, args.runs)
        page = render(loaded.cache, state, refs, size=size, dpi=args.dpi, fetch=loaded.fetch)
        if not page.axes:
            raise CliError(nothing_to_draw(loaded.cache, state, refs))
        texts = [r.name for r in loaded.cache.runs()] + loaded.cache.all_keys()
        note = fonts.missing_note(texts)
        if note:
            print(f"note: {note}", file=sys.stderr)
        over, missing = loaded.cache.tiles_over, page.incomplete()
    if over:
        print(
            f"note: this page's tiles take {(loaded.cache.tile_limit + over) >> 20} MB, above "
            f"the {loaded.cache.tile_limit >> 20} MB tile cache; all kept for the snapshot",
            file=sys.stderr,
        )
    if missing:
        print(
            f"warning: {missing} series drawn coarser than their charts asked for, or not at "
            "all: their tiles did not arrive",
            file=sys.stderr,
        )
    try:
        page.save(args.output, dpi=args.dpi)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {args.output} ({state.page} page, {len(refs)} runs)", file=sys.stderr)
    return 0


def _snapshot_ranks(args, state, size) -> int:
    """`snapshot --page ranks`: one job's rank x step heatmap (resplot/draw/ranks.py)."""
    from resplot.data.ranks import job_label, jobs_in, newest_first
    from resplot.draw.ranks import NO_JOB, render_ranks

    state.ranks_phase, state.ranks_stat = args.phase, args.cell
    with _load(args) as loaded:
        found = jobs_in(loaded.cache)
        if not found:
            raise CliError(NO_JOB.replace("\n", " "))
        if args.job is not None and args.job not in found:
            jobs = "; ".join(f"{g}: {job_label(g, found[g])}" for g in newest_first(found))
            raise CliError(f"--job {args.job}: no such job in the given sources; jobs: {jobs}")
        state.ranks_job = args.job or ""
        page = render_ranks(loaded.cache, state, size=size, dpi=args.dpi, fetch=loaded.fetch)
        view = page.view
        if view is None:
            raise CliError(page.message.get_text())
        if page.phase != args.phase:
            raise CliError(
                f"--phase {args.phase}: the job logged no such phase; its phases: "
                f"{', '.join(view.matrices)}"
            )
    if not view.complete:
        print(
            "warning: some cells drawn coarser than asked for: their tiles did not arrive",
            file=sys.stderr,
        )
    try:
        page.save(args.output, dpi=args.dpi)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(
        f"wrote {args.output} (ranks page: job {view.group}, {len(view.rows)} ranks, {args.phase})",
        file=sys.stderr,
    )
    return 0


def window_colors(config: Path | None) -> dict:
    """The window's colour for each run (its settings' book, read only), so that a snapshot
    draws a run as the window does; runs the window never drew get free colours."""
    from resplot.ui import settings as settings_mod

    settings = settings_mod.load(config, move_bad=False)
    if settings.problem:
        print(f"note: {settings.problem}; colours assigned afresh", file=sys.stderr)
    return dict(settings.state.colors)


def nothing_to_draw(cache, state, refs: list) -> str:
    """Why a snapshot has no chart: the page, or the key globs, matched none of the runs' keys
    (and which keys they have, to choose from)."""
    keys = sorted({k for ref in refs for k in cache.keys(ref)})
    shown = ", ".join(keys[:12]) + (f" (+{len(keys) - 12} more)" if len(keys) > 12 else "")
    runs = f"{len(refs)} run{'s' if len(refs) != 1 else ''}"
    if not keys:
        return f"nothing to draw: the {runs} logged no metric"
    if state.page == "custom":
        globs = " ".join(state.custom_keys)
        return f"nothing to draw: --keys {globs} matched no key of the {runs}; their keys: {shown}"
    return (
        f"nothing to draw: the {state.page} page found none of its series in the {runs}; "
        f"their keys: {shown} (try --page all, or --keys GLOB)"
    )


def cmd_export(args) -> int:
    from reslog.tools.export import ExportError
    from resplot.ui.exports import export_points, export_table

    with _load(args) as loaded:
        refs = select_runs(loaded.cache, args.runs)
        try:
            if args.format in ("csv", "csv-wide", "parquet"):
                export_points(
                    loaded.cache, loaded.reader, refs, args.output, args.format, args.keys
                )
            else:
                fmt = "csv" if args.format == "table-csv" else args.format
                export_table(loaded.cache, refs, args.output, fmt, args.metrics)
        except ExportError as exc:
            raise CliError(str(exc)) from None
        except ConnectionError as exc:  # the source, after its retries (AgentConnectionError)
            raise CliError(f"cannot read the source: {exc}; {args.output} not written") from None
        except OSError as exc:
            raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    if args.output != "-":
        print(f"wrote {args.output} ({len(refs)} runs)", file=sys.stderr)
    return 0


def cmd_report(args) -> int:
    from resplot.report import ReportError, build_report

    if args.max_mb <= 0:
        raise CliError(f"--max-mb must be positive, got {args.max_mb:g}")
    state = ViewState()
    pages = list(dict.fromkeys(args.pages))
    if args.keys:
        state.set_custom_keys(args.keys)
        pages.append("custom")
    with _load(args) as loaded:
        refs = select_runs(loaded.cache, args.runs)
        try:
            report = build_report(
                loaded.cache,
                refs,
                loaded.fetch,
                tuple(pages),
                int(args.max_mb * (1 << 20)),
                args.metrics,
                args.title,
                state,
            )
        except ReportError as exc:
            raise CliError(str(exc)) from None
        except ConnectionError as exc:  # the source, after its retries (AgentConnectionError)
            raise CliError(f"cannot read the source: {exc}; {args.output} not written") from None
    try:
        report.write(args.output)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    print(
        f"wrote {args.output} ({report.bytes / (1 << 20):.2f} MB, {len(refs)} runs, "
        f"{report.series} series, {report.raw_series} raw)",
        file=sys.stderr,
    )
    return 0


COMMANDS = ("snapshot", "export", "report", "sync")


def check_specs(texts: list[str]) -> list:
    """The specs parsed (resplot.sources.spec). Fail now, not in a window that waits forever, on
    a spec that can never be read: one that does not parse, or a local path (or glob) that names
    nothing. Remote ones are checked when they connect, since only the host knows its files."""
    import glob
    import os

    from resplot.sources.spec import LocalSpec, SpecError, parse_spec

    specs = []
    for text in texts:
        try:
            spec = parse_spec(text)
        except SpecError as exc:
            raise CliError(str(exc)) from None
        specs.append(spec)
        if not isinstance(spec, LocalSpec):
            continue
        for part in spec.parts:
            path = os.path.expanduser(part)
            if glob.has_magic(path):
                if glob.glob(path, recursive=True):
                    continue
                where = os.path.dirname(path.split("*")[0].split("?")[0].split("[")[0]) or "."
                if os.path.isdir(where):
                    continue  # stores may appear there later (a run about to start)
                raise CliError(f"no store matches {part!r}: {where} does not exist")
            if os.path.exists(path):
                if not os.access(path, os.R_OK):
                    raise CliError(f"cannot read {part!r}: permission denied")
                continue
            raise CliError(f"no store matches {part!r}: no such file or directory")
    return specs


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

    cache = SeriesCache()
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
            run = {
                "snapshot": cmd_snapshot,
                "export": cmd_export,
                "report": cmd_report,
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
