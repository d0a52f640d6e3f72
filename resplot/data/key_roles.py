"""What a logged key means, whoever named it: the Training page's panels and the x-axis choices
find their series by role, so runs logged by nanoGPT, Hugging Face, Lightning or torchtitan
fill the same charts as reslog's own trainer. No Qt here.

Each role lists the names seen in those projects, most specific first; a run's series for a
role is the first name it logged. Names are matched exactly (and in Lightning's `_step` and
`_epoch` forms: `train_loss_step`), or as a glob where they hold `*` (Lightning's
LearningRateMonitor logs `lr-AdamW`, `lr-SGD`, ...). The System page finds per-GPU series by
pattern (RESLOG_GPU_NAMES: reslog's `sys/gpu0/temp_c`, the short `sys/gpu0/temp`; GPU_NAMES:
wandb's `system/gpu.0.temp`, Lightning's `gpu_id: 0/temperature.gpu (°C)`), the Timing page
its parts by TIMING_ROLES (torchtitan's `time_metrics/end_to_end(s)`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from schema.rules.alerts import GPU_SERIES, gpu_key
from schema.store.rollup import LAST, MIN_AT, STEP_LO, VMAX, VMIN, N

ROLES: dict[str, tuple[str, ...]] = {
    # reslog, then nanoGPT / Hugging Face (train/…), Lightning (train_loss), torchtitan.
    "train_loss": (
        "train/loss",
        "loss",
        "train_loss",
        "train/loss_epoch",
        "train_loss_epoch",
        "loss_metrics/global_avg_loss",
        "training/loss",
        "loss/train",
    ),
    "valid_loss": (
        "valid/loss",
        "val/loss",
        "eval/loss",
        "val_loss",
        "eval_loss",
        "validation/loss",
        "valid_loss",
        "loss/val",
        "loss/valid",
    ),
    "lr": (
        "train/lr",
        "lr",
        "train/learning_rate",
        "learning_rate",
        "lr_scheduler/lr",
        "optim/lr",
        "lr-*",
    ),
    "grad_norm": ("train/grad_norm", "grad_norm", "gradient_norm", "train/gradient_norm"),
    "tokens_per_s": (
        "train/tokens_per_s",
        "tokens_per_s",
        "throughput(tps)",
        "tps",
        "tokens_per_second",
        "train/tokens_per_second",
        "perf/tokens_per_s",
        # Hugging Face's speed metrics (include_tokens_per_second), under its callbacks' prefix
        "train/train_tokens_per_second",
        "train_tokens_per_second",
    ),
    "mfu": ("train/mfu", "mfu", "mfu(%)", "perf/mfu"),
    "valid_ppl": ("valid/ppl", "val/ppl", "eval/perplexity", "val/perplexity", "eval/ppl"),
    "tokens": (
        "train/tokens",
        "tokens",
        "train/num_input_tokens_seen",
        "num_input_tokens_seen",
        "tokens_seen",
        "ntokens",
    ),
}

# MFU logged as a percent (nanoGPT logs running_mfu * 100; torchtitan "mfu(%)"), not 0..1.
PERCENT_KEYS = frozenset(("mfu", "mfu(%)"))

# Keys that count training progress: offered as x axes. Matched on the name's last part.
_COUNTER = re.compile(
    r"^(iter|iters|iteration|epoch|global_step|step|tokens|tokens_seen|ntokens|"
    r"num_input_tokens_seen|samples|consumed_samples|consumed_tokens|images_seen)$"
)


# Lightning's self.log(name, on_step=True, on_epoch=True) logs `name_step` and `name_epoch`
# instead of `name`: a role's name matches them too, per step first.
FAMILY_SUFFIXES = ("", "_step", "_epoch")


def key_for(keys: Collection[str], role: str, table: dict | None = None) -> str | None:
    """The run's key for `role` (the first of the role's names it logged, or of their
    Lightning `_step`/`_epoch` forms), None if none. `table`: ROLES, or TIMING_ROLES."""
    for name in (table or ROLES)[role]:
        if "*" in name:
            hits = sorted(k for k in keys if fnmatch.fnmatchcase(k, name))
            if hits:
                return hits[0]
            continue
        for suffix in FAMILY_SUFFIXES:
            if name + suffix in keys:
                return name + suffix
    return None


# The Timing page's parts, whoever timed them: reslog's run.timer, torchtitan's time_metrics,
# the usual hand-made names.
TIMING_ROLES: dict[str, tuple[str, ...]] = {
    "step": (
        "time/step",
        "time_metrics/end_to_end(s)",
        "train/step_time",
        "step_time",
        "perf/step_time",
        "time/iteration",
        "iter_time",
        "train/iter_time",
        "batch_time",
        "train/batch_time",
    ),
    "data": (
        "time/data",
        "time_metrics/data_loading(s)",
        "train/data_time",
        "data_time",
        "perf/data_time",
        "time/data_loading",
        "dataloader_time",
    ),
    "forward": ("time/forward", "time/fwd", "forward_time"),
    "backward": ("time/backward", "time/bwd", "backward_time"),
    "optimizer": ("time/optimizer", "time/optim", "optimizer_time", "optim_time"),
}


@dataclass(frozen=True)
class GpuName:
    """One tool's name for a per-GPU series: a pattern with the GPU's ordinal as its first
    group, the role it fills on the System page, and its unit."""

    pattern: re.Pattern
    role: str
    unit: str


def _gpu(pattern: str, role: str, unit: str) -> GpuName:
    return GpuName(re.compile(pattern), role, unit)


# reslog's own names (schema.rules.alerts.GPU_SERIES, with their units) and short forms of them:
# the part after `sys/gpu{i}/` (the key parsed by schema.rules.alerts.gpu_key, the one parse of
# reslog's GPU keys), most specific first.
RESLOG_GPU_NAMES: tuple[GpuName, ...] = (
    *(_gpu(re.escape(name), role, unit) for name, (role, unit) in GPU_SERIES.items()),
    _gpu(r"(?:utilization|util_pct|gpu_util)", "util", "%"),
    _gpu(r"(?:mem_used|memory_used)_gb", "mem_used", "GB"),
    _gpu(r"(?:mem_used|memory_used)_mb", "mem_used", "MB"),
    _gpu(r"(?:temp|temperature)", "temp", "°C"),
    _gpu(r"(?:power|power_draw)", "power", "W"),
    _gpu(r"(?:power_limit|power_cap)", "power_limit", "W"),
    _gpu(r"fan", "fan", "%"),
    _gpu(r"(?:sm_clock|clock_sm)", "sm_clock", "MHz"),
)
# Other tools' names, the GPU's ordinal as the first group: wandb's system metrics (kept by
# `reslog import wandb` and `import reslog as wandb` users), `system/gpu.0.temp`, and
# Lightning's GPU stats monitor, `gpu_id: 0/temperature.gpu (°C)`.
_WANDB_GPU = r"(?:system/)?gpu\.(?:process\.)?(\d+)\."
_LIGHTNING_GPU = r"gpu_id: (\d+)/"
GPU_NAMES: tuple[GpuName, ...] = tuple(
    _gpu(f"{prefix}{name}$", role, unit)
    for prefix, name, role, unit in (
        (_WANDB_GPU, r"gpu", "util", "%"),
        (_WANDB_GPU, r"memoryAllocatedBytes", "mem_used", "bytes"),
        (_WANDB_GPU, r"temp", "temp", "°C"),
        (_WANDB_GPU, r"powerWatts", "power", "W"),
        (_WANDB_GPU, r"enforcedPowerLimitWatts", "power_limit", "W"),
        (_WANDB_GPU, r"smClock", "sm_clock", "MHz"),
        (_WANDB_GPU, r"fanSpeed", "fan", "%"),
        (_LIGHTNING_GPU, r"utilization\.gpu \(%\)", "util", "%"),
        (_LIGHTNING_GPU, r"memory\.used \(MB\)", "mem_used", "MB"),
        (_LIGHTNING_GPU, r"memory\.total \(MB\)", "mem_total", "MB"),
        (_LIGHTNING_GPU, r"temperature\.gpu \(°C\)", "temp", "°C"),
        (_LIGHTNING_GPU, r"fan\.speed \(%\)", "fan", "%"),
        (_LIGHTNING_GPU, r"power\.draw \(W\)", "power", "W"),
        (_LIGHTNING_GPU, r"clocks\.current\.sm \(MHz\)", "sm_clock", "MHz"),
    )
)
# Host series (no GPU ordinal): role -> (name, unit), most specific first. torchtitan's peak
# memory is its rank's GPU (GPU 0 of the run on the System page).
HOST_NAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "cpu": (("sys/cpu_pct", "%"), ("system/cpu", "%"), ("cpu_pct", "%")),
    "ram": (("sys/ram_pct", "%"), ("system/memory", "%"), ("ram_pct", "%")),
    "gpu0_mem_used": (("memory/max_reserved(GiB)", "GiB"), ("memory/max_active(GiB)", "GiB")),
}


def gpu_series(keys: Collection[str]) -> dict[tuple[str, int], tuple[str, str]]:
    """(role, GPU ordinal) -> (the run's key, unit), by the first GPU_NAMES entry each GPU's
    role matches, over every tool's naming; torchtitan's peak memory as GPU 0's memory."""
    found: dict[tuple[str, int], tuple[int, str, str]] = {}
    for key in keys:
        match = _gpu_name(key)
        if match is not None:
            rank, name, ordinal = match
            slot = (name.role, ordinal)
            if slot not in found or rank < found[slot][0]:
                found[slot] = (rank, key, name.unit)
    out = {slot: (key, unit) for slot, (_r, key, unit) in found.items()}
    if ("mem_used", 0) not in out:
        for key, unit in HOST_NAMES["gpu0_mem_used"]:
            if key in keys:
                out[("mem_used", 0)] = (key, unit)
                break
    return out


def _gpu_name(key: str) -> tuple[int, GpuName, int] | None:
    """(rank: reslog's names first, the name, GPU ordinal) of the first name `key` matches."""
    parsed = gpu_key(key)
    if parsed is not None:
        ordinal, what = parsed
        for rank, name in enumerate(RESLOG_GPU_NAMES):
            if name.pattern.fullmatch(what):
                return rank, name, ordinal
    for rank, name in enumerate(GPU_NAMES, len(RESLOG_GPU_NAMES)):
        m = name.pattern.match(key)
        if m is not None:
            return rank, name, int(m.group(1))
    return None


def host_series(keys: Collection[str], role: str) -> tuple[str, str] | None:
    """(key, unit) of a run's host series for `role` ("cpu", "ram"), None if none."""
    return next(((k, u) for k, u in HOST_NAMES[role] if k in keys), None)


def mfu_scale(key: str) -> float:
    """The value of `key` that means 100 % MFU."""
    return 100.0 if key in PERCENT_KEYS else 1.0


# What a run logs as its optimizer step when its logged step is something else (the logging
# call counter of wandb.log without step=: Hugging Face logs train/global_step, Lightning's
# WandbLogger trainer/global_step, nanoGPT iter). The "auto" x axis places such a run by it.
STEP_COUNTERS = ("train/global_step", "trainer/global_step", "global_step", "iter", "train/iter")


def step_counter(keys: Collection[str]) -> str | None:
    """The run's step counter key (STEP_COUNTERS, first found), None if it logs none."""
    return next((k for k in STEP_COUNTERS if k in keys), None)


def counter_keys(keys: Iterable[str]) -> list[str]:
    """Logged keys that count progress (iter, epoch, tokens seen…): x-axis candidates."""
    return sorted(k for k in set(keys) if _COUNTER.match(k.rsplit("/", 1)[-1]))


def rising_keys(aggs: Iterable[tuple[str, tuple]]) -> list[str]:
    """Keys whose every series (key, aggregate) looks non-decreasing: its minimum at its first
    step and its last value its maximum, over at least 3 points. O(series), from the summary
    rows alone; a sawtooth that happens to end at its maximum passes too, which the chart
    then shows as it is. x-axis candidates beside the counters' names."""
    verdict: dict[str, bool] = {}
    for key, agg in aggs:
        rises = (
            agg[N] >= 3
            and agg[VMIN] is not None
            and agg[VMAX] is not None
            and agg[VMAX] > agg[VMIN]
            and agg[MIN_AT] == agg[STEP_LO]
            and agg[LAST] == agg[VMAX]
        )
        verdict[key] = verdict.get(key, True) and bool(rises)
    return sorted(k for k, ok in verdict.items() if ok and not k.startswith("sys/"))
