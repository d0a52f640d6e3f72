"""The viewer's state as plain data: what is shown, never how (no Qt here).

The window reads and changes a ViewState; settings.py writes it to JSON and reads it back; the
headless snapshot builds one from command-line flags. Setters validate, so a bad value from a
hand-edited config file or a flag is refused with a message instead of breaking a redraw later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from resplot.data import colors as run_colors
from resplot.data.model import RunRef

PAGES = ("training", "system", "timing", "custom", "all", "ranks")
RANK_STATS = ("max", "mean", "min")  # what a Ranks page cell shows (resplot/data/ranks.py)
X_AXES = ("auto", "step", "wall", "relative", "tokens", "metric")
HOVER_ORDERS = ("value", "name")
DEFAULT_TABLE_METRICS = ["train/loss", "valid/loss"]
MIN_POLL_S, MAX_POLL_S = 0.1, 3600.0
MIN_TILE_MB, MAX_TILE_MB = 16, 1 << 16


class StateError(ValueError):
    """A state value is out of range; the message names the field and what is allowed."""


# View-state fields a saved file gives as they are, with their type.
PLAIN_FIELDS = (
    ("log_y", bool),
    ("ignore_outliers", bool),
    ("paused", bool),
    ("metric_filter", str),
    ("ranks_job", str),
    ("ranks_phase", str),
    ("filter_text", str),
)


@dataclass
class ViewState:
    sources: list[str] = field(default_factory=list)
    ticked: list[RunRef] = field(default_factory=list)
    page: str = "training"
    # "auto": each run by its define_metric step metric or step counter (HF, nanoGPT,
    # Lightning), else by its step (resplot/data/xaxis.py)
    x_axis: str = "auto"
    smoothing: float = 0.6  # TensorBoard's default
    log_y: bool = True
    ignore_outliers: bool = True  # losses: the y range leaves out the top 1 % (resplot.data.yrange)
    custom_keys: list[str] = field(default_factory=lambda: ["train/*"])
    table_metrics: list[str] = field(default_factory=lambda: list(DEFAULT_TABLE_METRICS))
    poll_interval: float = 1.0
    paused: bool = False
    filter_text: str = ""
    # The "all" page's search: a regex per word, each of which a shown key matches.
    metric_filter: str = ""
    # The "all" page's sections folded away (by key prefix: "sys", "train").
    collapsed_sections: list[str] = field(default_factory=list)
    tile_cache_mb: int = 256  # memory bound of the tiles kept (least recently drawn go first)
    # Run uid -> its colour slot or picked colour (resplot.data.colors), kept across launches.
    colors: dict[str, run_colors.Assignment] = field(default_factory=dict)
    # While True the newest project's runs are ticked as they appear; a tick by hand ends it.
    auto_tick: bool = True
    # Desktop notifications muted, as [run uid, kind] ("*": every kind of that run).
    muted: list[list[str]] = field(default_factory=list)
    # The hover readout's order after the hovered run: "value" (as the lines cross) or "name".
    hover_order: str = "value"
    # Run table columns hidden with the column chooser, by their heads ("seed", "host").
    hidden_columns: list[str] = field(default_factory=list)
    # Event kinds not drawn on the charts ("checkpoint", "resume", "alert").
    hidden_events: list[str] = field(default_factory=list)
    # The Ranks page: the job shown (its group; "": the newest), the phase and what a cell shows.
    ranks_job: str = ""
    ranks_phase: str = "step"
    ranks_stat: str = "max"

    # -- changes (validated) ---------------------------------------------------------------
    def set_page(self, page: str) -> None:
        if page not in PAGES:
            raise StateError(f"page must be one of {', '.join(PAGES)}, got {page!r}")
        self.page = page

    def set_x_axis(self, mode: str) -> None:
        if mode not in X_AXES and not (mode.startswith("key:") and len(mode) > 4):
            raise StateError(
                f"x-axis must be one of {', '.join(X_AXES)} or key:NAME (a logged counter such "
                f"as key:iter), got {mode!r}"
            )
        self.x_axis = mode

    def set_smoothing(self, weight: float) -> None:
        weight = float(weight)
        if not 0.0 <= weight < 1.0:
            raise StateError(f"smoothing must be in [0, 1), got {weight}")
        self.smoothing = weight

    def set_hover_order(self, order: str) -> None:
        if order not in HOVER_ORDERS:
            raise StateError(f"hover order must be one of {', '.join(HOVER_ORDERS)}, got {order!r}")
        self.hover_order = order

    def set_ranks_stat(self, stat: str) -> None:
        if stat not in RANK_STATS:
            raise StateError(f"ranks cell must be one of {', '.join(RANK_STATS)}, got {stat!r}")
        self.ranks_stat = stat

    def set_poll_interval(self, seconds: float) -> None:
        seconds = float(seconds)
        if not MIN_POLL_S <= seconds <= MAX_POLL_S:
            raise StateError(
                f"poll interval must be between {MIN_POLL_S} and {MAX_POLL_S} s, got {seconds}"
            )
        self.poll_interval = seconds

    def set_tile_cache_mb(self, mb: int) -> None:
        if isinstance(mb, bool) or not isinstance(mb, int) or not MIN_TILE_MB <= mb <= MAX_TILE_MB:
            raise StateError(
                f"tile cache must be {MIN_TILE_MB} to {MAX_TILE_MB} MB (an integer), got {mb!r}"
            )
        self.tile_cache_mb = mb

    def set_custom_keys(self, globs: list[str] | str) -> None:
        if isinstance(globs, str):
            globs = [g for g in (p.strip() for p in globs.replace(",", " ").split()) if g]
        self.custom_keys = list(globs)

    def add_source(self, spec: str) -> None:
        if spec not in self.sources:
            self.sources.append(spec)

    def remove_source(self, spec: str) -> None:
        if spec in self.sources:
            self.sources.remove(spec)

    def look(self, ref: RunRef) -> run_colors.Look:
        """The run's colour and line style (neutral until it is first plotted)."""
        return run_colors.look_of(self.colors.get(ref.uid))

    def assign_looks(self, refs: list[RunRef]) -> bool:
        """Looks for the runs about to be drawn, none shared; True when the book changed."""
        return run_colors.assign(self.colors, [r.uid for r in refs])

    def set_color(self, ref: RunRef, color: str) -> None:
        if not run_colors.valid_assignment(color) or not isinstance(color, str):
            raise StateError(f"a run colour must look like #1f77b4, got {color!r}")
        self.colors[ref.uid] = color.lower()

    def is_ticked(self, ref: RunRef) -> bool:
        return ref in self.ticked

    def set_ticked(self, ref: RunRef, on: bool) -> None:
        if on and ref not in self.ticked:
            self.ticked.append(ref)
        elif not on and ref in self.ticked:
            self.ticked.remove(ref)

    def toggle(self, ref: RunRef) -> bool:
        self.set_ticked(ref, not self.is_ticked(ref))
        return self.is_ticked(ref)

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ticked"] = [asdict(r) for r in self.ticked]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ViewState:
        """Build from a dict (e.g. JSON); unknown keys are ignored, bad values raise StateError."""
        if not isinstance(data, dict):
            raise StateError(f"view state must be a JSON object, got {type(data).__name__}")
        state = cls()
        known = {f.name for f in fields(cls)}
        plain = {k: v for k, v in data.items() if k in known}
        try:
            if "sources" in plain:
                state.sources = [str(s) for s in plain["sources"]]
            if "ticked" in plain:
                state.ticked = [
                    RunRef(str(r["source"]), str(r["store"]), str(r["uid"]))
                    for r in plain["ticked"]
                ]
            if "custom_keys" in plain:
                state.set_custom_keys([str(g) for g in plain["custom_keys"]])
            if "table_metrics" in plain:
                state.table_metrics = [str(m) for m in plain["table_metrics"]]
            if "collapsed_sections" in plain:
                state.collapsed_sections = [str(k) for k in plain["collapsed_sections"]]
            if "hidden_events" in plain:
                state.hidden_events = [str(k) for k in plain["hidden_events"]]
            if "hidden_columns" in plain:
                state.hidden_columns = [str(h) for h in plain["hidden_columns"]]
            if "muted" in plain:
                state.muted = [[str(uid), str(kind)] for uid, kind in plain["muted"]]
        except (TypeError, KeyError, ValueError) as exc:
            raise StateError(f"malformed view state: {exc!r}") from None
        # Read through their setters' checks, then as they are (cast), each only where given.
        for name in ("page", "x_axis", "hover_order", "smoothing", "poll_interval", "ranks_stat"):
            if name in plain:
                getattr(state, f"set_{name}")(plain[name])
        for name, cast in PLAIN_FIELDS:
            if name in plain:
                setattr(state, name, cast(plain[name]))
        if "colors" in plain:
            book = plain["colors"]
            if not isinstance(book, dict) or not all(
                isinstance(k, str) and run_colors.valid_assignment(v) for k, v in book.items()
            ):
                raise StateError("colors must map run uids to a slot (>= 0) or '#rrggbb'")
            state.colors = dict(book)
        # A file from before auto_tick existed: runs it ticked were the user's choice.
        state.auto_tick = bool(plain.get("auto_tick", not state.ticked))
        if "tile_cache_mb" in plain:
            state.set_tile_cache_mb(plain["tile_cache_mb"])
        return state
