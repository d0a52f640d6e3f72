"""What each chart page shows: panels and the (run, key) lines on them. Plain data, no artists.

charts.py turns these specs into matplotlib axes and lines; keeping the choice of keys here means
the page contents are tested and changed without touching drawing code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reslog.text import safe
from resplot.data.cache import SeriesCache
from resplot.data.colors import shade
from resplot.data.key_roles import TIMING_ROLES, gpu_series, host_series, key_for, mfu_scale
from resplot.data.model import RunRef
from resplot.data.state import ViewState
from schema.rules.compare import metric_stats, select_keys

MAX_STACKED_RUNS = 4
TIMING_PARTS = ("data", "forward", "backward", "optimizer")
_RANK = re.compile(r"^time/rank(\d+)/step$")


@dataclass(frozen=True)
class Item:
    """One plotted series: a key of a run, its label and look."""

    ref: RunRef
    key: str
    label: str
    color: str
    style: str = "-"
    smooth: bool = True
    marker: str = ""  # sparse series (validation) show their points
    # Which of its run's series on the chart this is ("train", "valid", "GPU0"; "" for a
    # run's only one): the hover readout's column, the label less the run's name.
    part: str = ""


@dataclass
class PanelSpec:
    title: str
    ylabel: str = ""
    items: list[Item] = field(default_factory=list)
    log_y: bool = False
    # line | stacked (one run's step-time parts) | throttle (reason bits) | section (a card
    # naming an All-page section; no data)
    kind: str = "line"
    percent: float | None = None  # value that means 100% (MFU is 0..1), for the tick format
    stack_ref: RunRef | None = None
    robust_y: bool = False  # a loss: its y range may ignore outliers (state.ignore_outliers)
    subject: str = ""  # a run's name in the title: what gives way when the title is too long
    section: str = ""  # the All page's key prefix this chart (or section card) belongs to
    # A log y asked for, but a series reaches 0 or below: a log axis cannot place those values
    # (matplotlib leaves them out), so the chart is drawn linear and its note says why.
    log_refused: bool = False

    @property
    def starts_row(self) -> bool:
        """A section's card begins a new row of the grid (its charts follow it)."""
        return self.kind == "section"

    def layout_key(self) -> tuple:
        return (self.title, self.kind, self.log_y, self.percent)


def _name(cache: SeriesCache, ref: RunRef) -> str:
    """A run's name as titles, legends and the readout show it: controls and bidi marks as
    visible escapes (reslog/text.py), never obeyed (a U+202E in a name showed it reversed)."""
    run = cache.run(ref)
    return safe(run.name) if run is not None else ref.uid[:8]


def _items(
    cache: SeriesCache,
    refs: list[RunRef],
    state: ViewState,
    key: str,
    style: str | None = None,
    smooth: bool = True,
    suffix: str = "",
    marker: str = "",
    role: bool = False,
) -> list[Item]:
    """One item per run that logged `key` (with role=True: `key` is a key_roles role, and each
    run contributes the key it logged for it). The run's look gives colour, and the line style
    unless `style` sets one (a validation series is dashed for every run)."""
    out = []
    for ref in refs:
        name = key_for(cache.keys(ref), key) if role else key
        if name is not None and cache.summary(ref, name) is not None:
            label = _name(cache, ref) + suffix
            look = state.look(ref)
            out.append(
                Item(
                    ref,
                    name,
                    label,
                    look.color,
                    style or look.style,
                    smooth,
                    marker,
                    suffix.strip(),
                )
            )
    return out


def training(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    def role(name: str, **kw) -> list[Item]:
        return _items(cache, refs, state, name, role=True, **kw)

    loss = role("train_loss", suffix=" train")
    loss += role("valid_loss", style="--", smooth=False, suffix=" valid", marker="o")
    mfu = role("mfu")
    return [
        PanelSpec("Loss", "loss", loss, log_y=state.log_y, robust_y=True),
        PanelSpec("Learning rate", "lr", role("lr", smooth=False)),
        PanelSpec("Gradient norm", "‖g‖", role("grad_norm"), log_y=True),
        PanelSpec("Throughput", "tokens/s", role("tokens_per_s")),
        # Percent scale by the first run's key: runs logging 0..1 and 0..100 rarely mix.
        PanelSpec("MFU", "MFU", mfu, percent=mfu_scale(mfu[0].key) if mfu else 1.0),
        PanelSpec(
            "Validation perplexity",
            "ppl",
            role("valid_ppl", style="--", smooth=False, marker="o"),
            log_y=state.log_y,
        ),
    ]


def _per_gpu(
    cache: SeriesCache,
    refs: list[RunRef],
    state: ViewState,
    by_run: dict[RunRef, dict],
    role: str,
    style: str = "-",
    suffix: str = "",
) -> tuple[list[Item], list[str]]:
    """One item per GPU of each run that logged `role` under any tool's name (`by_run`: each
    run's key_roles.gpu_series), in the run's colour, lighter per GPU; and the units they were
    logged in."""
    out, units = [], []
    for ref in refs:
        series = by_run[ref]
        gpus = sorted({gpu for _role, gpu in series})
        for n, gpu in enumerate(gpus):
            found = series.get((role, gpu))
            if found is None or cache.summary(ref, found[0]) is None:
                continue
            key, unit = found
            color = shade(state.look(ref).color, n, len(gpus))
            part = f"GPU{gpu}{suffix}"
            out.append(
                Item(ref, key, f"{_name(cache, ref)} {part}", color, style, smooth=False, part=part)
            )
            units.append(unit)
    return out, units


def _unit(units: list[str], default: str) -> str:
    """A chart's y label from its series' units ("GiB, MB" when tools logged different ones:
    said, not converted)."""
    found = list(dict.fromkeys(u for u in units if u))
    return ", ".join(found) if found else default


def system(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    by_run = {ref: gpu_series(cache.keys(ref)) for ref in refs}  # nine roles read it

    def gpu(role: str, style: str = "-", suffix: str = "") -> tuple[list[Item], list[str]]:
        return _per_gpu(cache, refs, state, by_run, role, style, suffix)

    used, used_units = gpu("mem_used")
    total, total_units = gpu("mem_total", ":", " total")
    power, power_units = gpu("power")
    limit, _ = gpu("power_limit", ":", " cap")
    host = []
    for role, style, suffix in (("cpu", "-", " CPU"), ("ram", "--", " RAM")):
        for ref in refs:
            found = host_series(cache.keys(ref), role)
            if found is not None and cache.summary(ref, found[0]) is not None:
                look = state.look(ref)
                host.append(
                    Item(
                        ref,
                        found[0],
                        _name(cache, ref) + suffix,
                        look.color,
                        style,
                        smooth=False,
                        part=suffix.strip(),
                    )
                )
    return [
        PanelSpec("GPU utilisation", "%", gpu("util")[0]),
        PanelSpec("GPU memory", _unit(used_units + total_units, "GiB"), used + total),
        PanelSpec("GPU temperature", "°C", gpu("temp")[0]),
        PanelSpec("GPU power vs limit", _unit(power_units, "W"), power + limit),
        PanelSpec("Fan", "%", gpu("fan")[0]),
        PanelSpec("SM clock", "MHz", gpu("sm_clock")[0]),
        PanelSpec("Throttle reasons", "", gpu("throttle")[0], kind="throttle"),
        PanelSpec("CPU / RAM", "%", host),
    ]


def timing(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    """Each run's step time split into its timed parts (stacked: the first MAX_STACKED_RUNS
    runs), step time, and step time per rank; parts found by key_roles.TIMING_ROLES."""
    panels = []
    steps = {r: key_for(cache.keys(r), "step", TIMING_ROLES) for r in refs}
    with_parts = [r for r in refs if steps[r] is not None and cache.summary(r, steps[r])]
    for ref in with_parts[:MAX_STACKED_RUNS]:
        color = state.look(ref).color
        keys = cache.keys(ref)
        items = []
        for p in TIMING_PARTS:
            key = key_for(keys, p, TIMING_ROLES)
            if key is not None and cache.summary(ref, key) is not None:
                items.append(Item(ref, key, p, color, smooth=False, part=p))
        items.append(Item(ref, steps[ref], "other", color, smooth=False, part="other"))
        name = _name(cache, ref)
        panels.append(
            PanelSpec(f"Step time: {name}", "s", items, kind="stacked", stack_ref=ref, subject=name)
        )
    title = "Step time"
    if len(with_parts) > MAX_STACKED_RUNS:  # said, not silent: the stacks need room each
        title += f" (breakdowns above: first {MAX_STACKED_RUNS} of {len(with_parts)} runs)"
    step_items = []
    for ref in with_parts:
        look = state.look(ref)
        step_items.append(Item(ref, steps[ref], _name(cache, ref), look.color, look.style))
    panels.append(PanelSpec(title, "s", step_items))
    ranks = []
    for ref in refs:
        found = sorted(int(m.group(1)) for k in cache.keys(ref) if (m := _RANK.match(k)))
        for n, r in enumerate(found):
            color = shade(state.look(ref).color, n, len(found))
            label = f"{_name(cache, ref)} rank {r}"
            ranks.append(Item(ref, f"time/rank{r}/step", label, color, part=f"rank {r}"))
    panels.append(PanelSpec("Step time per rank", "s", ranks))
    return panels


def custom_keys(cache: SeriesCache, refs: list[RunRef], globs: list[str]) -> list[str]:
    if not globs:
        return []
    return select_keys({k for ref in refs for k in cache.keys(ref)}, globs)


def custom(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    """A chart per key matching the globs, every one of them: the window scrolls a long page."""
    keys = custom_keys(cache, refs, state.custom_keys)
    return [
        PanelSpec(safe(key), "", _items(cache, refs, state, key), robust_y="loss" in key)
        for key in keys
    ]


# The "all" page draws this many charts at most: each is a matplotlib axes drawn on every
# redraw, scrolled out of view or not (~10 ms each). The page says how many match and asks for a
# narrower search; nothing is cut silently.
MAX_ALL_PANELS = 60


def search_terms(search: str) -> tuple[list[re.Pattern], list[str]]:
    """The All page's search as regular expressions, one per word (a key must match each,
    any case: plain words still work as they did); a term that is not a valid regex is taken
    literally, and said (the second list)."""
    patterns, bad = [], []
    for term in search.split():
        try:
            patterns.append(re.compile(term, re.IGNORECASE))
        except re.error as exc:
            bad.append(f"{term!r}: {exc}")
            patterns.append(re.compile(re.escape(term), re.IGNORECASE))
    return patterns, bad


def metric_keys(cache: SeriesCache, refs: list[RunRef], search: str) -> list[str]:
    """Every key of the plotted runs that each term of `search` finds (search_terms), in key
    order (so grouped by prefix, like W&B's sections)."""
    patterns, _bad = search_terms(search)
    keys = sorted({k for ref in refs for k in cache.keys(ref)})
    return [k for k in keys if all(p.search(k) for p in patterns)]


NO_PREFIX = "(no prefix)"


def section_of(key: str) -> str:
    """The All page's section of a key: what comes before its first "/" (`train/loss` is in
    `train`, `sys/gpu0/util` in `sys`), NO_PREFIX for a key without one."""
    return key.split("/", 1)[0] if "/" in key else NO_PREFIX


def all_metrics(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    """A section per key prefix, each a card (click: fold or unfold it, kept in the settings)
    followed by a chart per key; at most MAX_ALL_PANELS charts (the page says so)."""
    out: list[PanelSpec] = []
    charts = 0
    sections: dict[str, list[str]] = {}
    for key in metric_keys(cache, refs, state.metric_filter):
        sections.setdefault(section_of(key), []).append(key)
    for name in sorted(sections, key=lambda n: (n == NO_PREFIX, n)):  # keys with no prefix last
        keys = sections[name]
        folded = name in state.collapsed_sections
        panels = []
        for key in [] if folded else keys:
            if charts >= MAX_ALL_PANELS:
                break
            items = _items(cache, refs, state, key)
            if items:
                panels.append(PanelSpec(safe(key), "", items, robust_y="loss" in key, section=name))
                charts += 1
        if folded or panels:
            count = f"{len(keys)} chart{'s' if len(keys) != 1 else ''}"
            title = f"{'▸' if folded else '▾'} {safe(name)} · {count}"
            out.append(PanelSpec(title, kind="section", section=name))
            out += panels
    return out


BUILDERS = {
    "training": training,
    "system": system,
    "timing": timing,
    "custom": custom,
    "all": all_metrics,
}


def panels_for(
    page: str, cache: SeriesCache, refs: list[RunRef], state: ViewState
) -> list[PanelSpec]:
    """The page's panels that have something to draw (an empty page returns []), and the All
    page's section cards."""
    out = [p for p in BUILDERS[page](cache, refs, state) if p.items or p.kind == "section"]
    for spec in out:
        if spec.log_y and _reaches_zero(cache, spec.items):
            spec.log_y, spec.log_refused = False, True
    return out


def _reaches_zero(cache: SeriesCache, items: list[Item]) -> bool:
    """Whether a series of these has a finite value at or below 0 (of all its points: the
    axis stays the same at every zoom; ±inf are marked at the chart's edge either way)."""
    for item in items:
        summary = cache.summary(item.ref, item.key)
        smallest = metric_stats(summary.agg)[1] if summary is not None else None
        if smallest is not None and smallest <= 0:  # (NaN: no finite value)
            return True
    return False
