"""What each chart page shows: panels and the (run, key) lines on them. Plain data, no artists.

charts.py turns these specs into matplotlib axes and lines; keeping the choice of keys here means
the page contents are tested and changed without touching drawing code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from resplot.data.cache import SeriesCache
from resplot.data.colors import shade
from resplot.data.key_roles import key_for, mfu_scale
from resplot.data.model import RunRef
from resplot.data.state import ViewState
from schema.compare import gpu_ids, select_keys

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
    kind: str = "line"  # line | stacked (one run's step-time parts) | throttle (reason bits)
    percent: float | None = None  # value that means 100% (MFU is 0..1), for the tick format
    stack_ref: RunRef | None = None
    robust_y: bool = False  # a loss: its y range may ignore outliers (state.ignore_outliers)
    subject: str = ""  # a run's name in the title: what gives way when the title is too long

    def layout_key(self) -> tuple:
        return (self.title, self.kind, self.log_y, self.percent)


def _name(cache: SeriesCache, ref: RunRef) -> str:
    run = cache.run(ref)
    return run.name if run is not None else ref.uid[:8]


def _items(
    cache: SeriesCache, refs: list[RunRef], state: ViewState, key: str, style: str | None = None,
    smooth: bool = True, suffix: str = "", marker: str = "", role: bool = False,
) -> list[Item]:  # fmt: skip
    """One item per run that logged `key` (with role=True: `key` is a key_roles role, and each
    run contributes the key it logged for it). The run's look gives colour, and the line style
    unless `style` sets one (a validation series is dashed for every run)."""
    out = []
    for ref in refs:
        name = key_for(cache.keys(ref), key) if role else key
        if name is not None and cache.summary(ref, name) is not None:
            label = _name(cache, ref) + suffix
            look = state.look(ref)
            out.append(Item(ref, name, label, look.color, style or look.style, smooth, marker,
                            suffix.strip()))  # fmt: skip
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
            "Validation perplexity", "ppl",
            role("valid_ppl", style="--", smooth=False, marker="o"), log_y=state.log_y,
        ),
    ]  # fmt: skip


def _gpus(cache: SeriesCache, ref: RunRef) -> list[int]:
    return gpu_ids(cache.keys(ref))


def _per_gpu(
    cache: SeriesCache, refs: list[RunRef], state: ViewState, leaf: str, style: str = "-",
    suffix: str = "",
) -> list[Item]:  # fmt: skip
    out = []
    for ref in refs:
        gpus = _gpus(cache, ref)
        for n, gpu in enumerate(gpus):
            key = f"sys/gpu{gpu}/{leaf}"
            if cache.summary(ref, key) is not None:
                color = shade(state.look(ref).color, n, len(gpus))
                part = f"GPU{gpu}{suffix}"
                out.append(Item(ref, key, f"{_name(cache, ref)} {part}", color, style,
                                smooth=False, part=part))  # fmt: skip
    return out


def system(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    def gpu(leaf: str, style: str = "-", suffix: str = "") -> list[Item]:
        return _per_gpu(cache, refs, state, leaf, style, suffix)

    memory = gpu("mem_used_gib") + gpu("mem_total_gib", ":", " total")
    power = gpu("power_w") + gpu("power_limit_w", ":", " cap")
    host = [
        *(_items(cache, refs, state, "sys/cpu_pct", smooth=False, suffix=" CPU")),
        *(_items(cache, refs, state, "sys/ram_pct", "--", smooth=False, suffix=" RAM")),
    ]
    return [
        PanelSpec("GPU utilisation", "%", gpu("util")),
        PanelSpec("GPU memory", "GiB", memory),
        PanelSpec("GPU temperature", "°C", gpu("temp_c")),
        PanelSpec("GPU power vs limit", "W", power),
        PanelSpec("Fan", "%", gpu("fan_pct")),
        PanelSpec("SM clock", "MHz", gpu("sm_clock_mhz")),
        PanelSpec("Throttle reasons", "", gpu("throttle"), kind="throttle"),
        PanelSpec("CPU / RAM", "%", host),
    ]


def timing(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    panels = []
    with_parts = [r for r in refs if cache.summary(r, "time/step") is not None]
    for ref in with_parts[:MAX_STACKED_RUNS]:
        color = state.look(ref).color
        items = [
            Item(ref, f"time/{p}", p, color, smooth=False, part=p)
            for p in TIMING_PARTS
            if cache.summary(ref, f"time/{p}") is not None
        ]
        items.append(Item(ref, "time/step", "other", color, smooth=False, part="other"))
        name = _name(cache, ref)
        panels.append(PanelSpec(f"Step time: {name}", "s", items, kind="stacked", stack_ref=ref,
                                subject=name))  # fmt: skip
    title = "Step time"
    if len(with_parts) > MAX_STACKED_RUNS:  # said, not silent: the stacks need room each
        title += f" (breakdowns above: first {MAX_STACKED_RUNS} of {len(with_parts)} runs)"
    panels.append(PanelSpec(title, "s", _items(cache, refs, state, "time/step")))
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
        PanelSpec(key, "", _items(cache, refs, state, key), robust_y="loss" in key) for key in keys
    ]


# The "all" page draws this many charts at most: each is a matplotlib axes drawn on every
# redraw, scrolled out of view or not (~10 ms each). The page says how many match and asks for a
# narrower search; nothing is cut silently.
MAX_ALL_PANELS = 60


def metric_keys(cache: SeriesCache, refs: list[RunRef], search: str) -> list[str]:
    """Every key of the plotted runs containing each word of `search` (any case), in key order
    (so grouped by prefix, like W&B's sections)."""
    words = search.lower().split()
    keys = sorted({k for ref in refs for k in cache.keys(ref)})
    return [k for k in keys if all(w in k.lower() for w in words)]


def all_metrics(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    keys = metric_keys(cache, refs, state.metric_filter)[:MAX_ALL_PANELS]
    return [
        PanelSpec(key, "", _items(cache, refs, state, key), robust_y="loss" in key) for key in keys
    ]


BUILDERS = {
    "training": training, "system": system, "timing": timing, "custom": custom,
    "all": all_metrics,
}  # fmt: skip


def panels_for(
    page: str, cache: SeriesCache, refs: list[RunRef], state: ViewState
) -> list[PanelSpec]:
    """The page's panels that have something to draw (an empty page returns [])."""
    return [p for p in BUILDERS[page](cache, refs, state) if p.items]
