"""What each chart page shows: panels and the (run, key) lines on them. Plain data, no artists.

charts.py turns these specs into matplotlib axes and lines; keeping the choice of keys here means
the page contents are tested and changed without touching drawing code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from resplot.cache import SeriesCache
from resplot.colors import run_color, shade
from resplot.model import RunRef
from resplot.state import ViewState
from schema.compare import gpu_ids, select_keys

MAX_CUSTOM_PANELS = 12
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


@dataclass
class PanelSpec:
    title: str
    ylabel: str = ""
    items: list[Item] = field(default_factory=list)
    log_y: bool = False
    kind: str = "line"  # line | stacked (one run's step-time parts) | throttle (reason bits)
    percent: float | None = None  # value that means 100% (MFU is 0..1), for the tick format
    stack_ref: RunRef | None = None

    def layout_key(self) -> tuple:
        return (self.title, self.kind, self.log_y, self.percent)


def _name(cache: SeriesCache, ref: RunRef) -> str:
    run = cache.run(ref)
    return run.name if run is not None else ref.uid[:8]


def _items(
    cache: SeriesCache, refs: list[RunRef], key: str, style: str = "-", smooth: bool = True,
    suffix: str = "", marker: str = "",
) -> list[Item]:  # fmt: skip
    out = []
    for ref in refs:
        if cache.summary(ref, key) is not None:
            label = _name(cache, ref) + suffix
            out.append(Item(ref, key, label, run_color(ref), style, smooth, marker))
    return out


def training(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    loss = _items(cache, refs, "train/loss", suffix=" train")
    loss += _items(cache, refs, "valid/loss", "--", smooth=False, suffix=" valid", marker="o")
    return [
        PanelSpec("Loss", "loss", loss, log_y=state.log_y),
        PanelSpec("Learning rate", "lr", _items(cache, refs, "train/lr", smooth=False)),
        PanelSpec("Gradient norm", "‖g‖", _items(cache, refs, "train/grad_norm"), log_y=True),
        PanelSpec("Throughput", "tokens/s", _items(cache, refs, "train/tokens_per_s")),
        PanelSpec("MFU", "MFU", _items(cache, refs, "train/mfu"), percent=1.0),
        PanelSpec(
            "Validation perplexity", "ppl",
            _items(cache, refs, "valid/ppl", "--", smooth=False, marker="o"), log_y=state.log_y,
        ),
    ]  # fmt: skip


def _gpus(cache: SeriesCache, ref: RunRef) -> list[int]:
    return gpu_ids(cache.keys(ref))


def _per_gpu(
    cache: SeriesCache, refs: list[RunRef], leaf: str, style: str = "-", suffix: str = ""
) -> list[Item]:
    out = []
    for ref in refs:
        gpus = _gpus(cache, ref)
        for n, gpu in enumerate(gpus):
            key = f"sys/gpu{gpu}/{leaf}"
            if cache.summary(ref, key) is not None:
                color = shade(run_color(ref), n, len(gpus))
                label = f"{_name(cache, ref)} GPU{gpu}{suffix}"
                out.append(Item(ref, key, label, color, style, smooth=False))
    return out


def system(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    memory = _per_gpu(cache, refs, "mem_used_gib") + _per_gpu(
        cache, refs, "mem_total_gib", ":", " total"
    )
    power = _per_gpu(cache, refs, "power_w") + _per_gpu(cache, refs, "power_limit_w", ":", " cap")
    host = [
        *(_items(cache, refs, "sys/cpu_pct", smooth=False, suffix=" CPU")),
        *(_items(cache, refs, "sys/ram_pct", "--", smooth=False, suffix=" RAM")),
    ]
    return [
        PanelSpec("GPU utilisation", "%", _per_gpu(cache, refs, "util")),
        PanelSpec("GPU memory", "GiB", memory),
        PanelSpec("GPU temperature", "°C", _per_gpu(cache, refs, "temp_c")),
        PanelSpec("GPU power vs limit", "W", power),
        PanelSpec("Fan", "%", _per_gpu(cache, refs, "fan_pct")),
        PanelSpec("SM clock", "MHz", _per_gpu(cache, refs, "sm_clock_mhz")),
        PanelSpec("Throttle reasons", "", _per_gpu(cache, refs, "throttle"), kind="throttle"),
        PanelSpec("CPU / RAM", "%", host),
    ]


def timing(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    panels = []
    with_parts = [r for r in refs if cache.summary(r, "time/step") is not None]
    for ref in with_parts[:MAX_STACKED_RUNS]:
        items = [
            Item(ref, f"time/{p}", p, run_color(ref), smooth=False)
            for p in TIMING_PARTS
            if cache.summary(ref, f"time/{p}") is not None
        ]
        items.append(Item(ref, "time/step", "other", run_color(ref), smooth=False))
        panels.append(
            PanelSpec(f"Step time: {_name(cache, ref)}", "s", items, kind="stacked", stack_ref=ref)
        )
    panels.append(PanelSpec("Step time", "s", _items(cache, refs, "time/step")))
    ranks = []
    for ref in refs:
        found = sorted(int(m.group(1)) for k in cache.keys(ref) if (m := _RANK.match(k)))
        for n, r in enumerate(found):
            color = shade(run_color(ref), n, len(found))
            ranks.append(Item(ref, f"time/rank{r}/step", f"{_name(cache, ref)} rank {r}", color))
    panels.append(PanelSpec("Step time per rank", "s", ranks))
    return panels


def custom_keys(cache: SeriesCache, refs: list[RunRef], globs: list[str]) -> list[str]:
    if not globs:
        return []
    return select_keys({k for ref in refs for k in cache.keys(ref)}, globs)


def custom(cache: SeriesCache, refs: list[RunRef], state: ViewState) -> list[PanelSpec]:
    keys = custom_keys(cache, refs, state.custom_keys)[:MAX_CUSTOM_PANELS]
    return [PanelSpec(key, "", _items(cache, refs, key)) for key in keys]


BUILDERS = {"training": training, "system": system, "timing": timing, "custom": custom}


def panels_for(
    page: str, cache: SeriesCache, refs: list[RunRef], state: ViewState
) -> list[PanelSpec]:
    """The page's panels that have something to draw (an empty page returns [])."""
    return [p for p in BUILDERS[page](cache, refs, state) if p.items]
