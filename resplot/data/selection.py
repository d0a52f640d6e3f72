"""Which runs are plotted when the user has not chosen: every run of the newest project, newest
first, up to DEFAULT_RUNS, from all stores alike. No Qt here; the window says what it chose
("showing 20 of 57 runs") so that a limit is never silent.
"""

from __future__ import annotations

from collections.abc import Iterable

from resplot.data.model import RunInfo, RunRef
from resplot.data.state import ViewState

DEFAULT_RUNS = 20


def default_selection(runs: Iterable[RunInfo], limit: int = DEFAULT_RUNS) -> list[RunRef]:
    """The newest project's runs (the project of the newest run), newest first, at most
    `limit`; across every store and source the cache holds."""
    runs = sorted(runs, key=lambda r: (r.created_at, r.ref.uid), reverse=True)
    if not runs:
        return []
    project = runs[0].project
    return [r.ref for r in runs if r.project == project][:limit]


def shown_text(ticked: int, total: int, auto: bool, project_runs: int | None = None) -> str:
    """The status bar's count of plotted runs, and why, when the default chose them."""
    text = f"showing {ticked} of {total} runs"
    if auto and project_runs is not None and project_runs > ticked:
        text += f" (newest {ticked} of the newest project's {project_runs}; tick more by hand)"
    elif auto and ticked:
        text += " (the newest project's)"
    return text


def project_size(runs: Iterable[RunInfo]) -> int:
    """How many runs the newest project has (what the default selection is cut from)."""
    runs = list(runs)
    if not runs:
        return 0
    newest = max(runs, key=lambda r: (r.created_at, r.ref.uid))
    return sum(1 for r in runs if r.project == newest.project)


def empty_text(state: ViewState, plotted: int, runs: int, sources: list[str]) -> str:
    """What an empty chart page says: what is loading (`sources`: how each source is doing),
    or what to do; never a bare "no data" while data is on its way."""
    if not state.sources:
        return "No source yet: File → Add source… (a store path, or user@host:path)"
    if not runs:
        return f"Loading runs from {', '.join(sources)}…"
    if not plotted:
        return "No run is plotted: tick runs in the table below (or press All)."
    if state.page == "all" and state.metric_filter.strip():
        return f"No key of the plotted runs contains {state.metric_filter!r}."
    if state.page == "custom":
        return f"No key of the plotted runs matches {' '.join(state.custom_keys)!r}."
    return f"The {plotted} plotted runs logged nothing the {state.page} page shows."
