"""The bodies of `resplot`'s headless commands: `snapshot` (a chart page or the ranks page to
PNG / SVG / PDF), `export` (points or the comparison table) and `report` (one offline HTML file),
and what they share: the sources loaded, the runs chosen. The parser, `main`, the window and
`sync` are in resplot/cli.py, which imports this module when one of these commands runs.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

from resplot.cli_sources import CliError, check_specs, ssh_options
from resplot.data.state import StateError, ViewState


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
    from resplot.draw.charts import render
    from resplot.draw.figure_files import SAVE_FORMATS

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
    warning = (
        f"{missing} series drawn coarser than their charts asked for, or not at all: their "
        "tiles did not arrive"
    )
    return _save(page, args, warning if missing else "", f"{state.page} page, {len(refs)} runs")


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
    warning = "some cells drawn coarser than asked for: their tiles did not arrive"
    wrote = f"ranks page: job {view.group}, {len(view.rows)} ranks, {args.phase}"
    return _save(page, args, "" if view.complete else warning, wrote)


def _save(page, args, warning: str, wrote: str) -> int:
    """The end of a snapshot: what was drawn short of what was asked (`warning`, when any),
    the file written, and what it holds."""
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    try:
        page.save(args.output, dpi=args.dpi)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {args.output} ({wrote})", file=sys.stderr)
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
