"""What a logged key means, whoever named it: the Training page's panels and the x-axis choices
find their series by role, so runs logged by nanoGPT, Hugging Face, Lightning or torchtitan
fill the same charts as reslog's own trainer. No Qt here.

Each role lists the names seen in those projects, most specific first; a run's series for a
role is the first name it logged. Names are matched exactly, or as a glob where they hold `*`
(Lightning's LearningRateMonitor logs `lr-AdamW`, `lr-SGD`, ...).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable

from schema.rollup import LAST, MIN_AT, STEP_LO, VMAX, VMIN, N

ROLES: dict[str, tuple[str, ...]] = {
    # reslog, then nanoGPT / Hugging Face (train/…), Lightning (train_loss), torchtitan.
    "train_loss": (
        "train/loss", "loss", "train_loss", "train/loss_epoch", "train_loss_epoch",
        "loss_metrics/global_avg_loss", "training/loss", "loss/train",
    ),
    "valid_loss": (
        "valid/loss", "val/loss", "eval/loss", "val_loss", "eval_loss", "validation/loss",
        "valid_loss", "loss/val", "loss/valid",
    ),
    "lr": (
        "train/lr", "lr", "train/learning_rate", "learning_rate", "lr_scheduler/lr",
        "optim/lr", "lr-*",
    ),
    "grad_norm": ("train/grad_norm", "grad_norm", "gradient_norm", "train/gradient_norm"),
    "tokens_per_s": (
        "train/tokens_per_s", "tokens_per_s", "throughput(tps)", "tps", "tokens_per_second",
        "train/tokens_per_second", "perf/tokens_per_s",
    ),
    "mfu": ("train/mfu", "mfu", "mfu(%)", "perf/mfu"),
    "valid_ppl": ("valid/ppl", "val/ppl", "eval/perplexity", "val/perplexity", "eval/ppl"),
    "tokens": (
        "train/tokens", "tokens", "train/num_input_tokens_seen", "num_input_tokens_seen",
        "tokens_seen", "ntokens",
    ),
}  # fmt: skip

# MFU logged as a percent (nanoGPT logs running_mfu * 100; torchtitan "mfu(%)"), not 0..1.
PERCENT_KEYS = frozenset(("mfu", "mfu(%)"))

# Keys that count training progress: offered as x axes. Matched on the name's last part.
_COUNTER = re.compile(
    r"^(iter|iters|iteration|epoch|global_step|step|tokens|tokens_seen|ntokens|"
    r"num_input_tokens_seen|samples|consumed_samples|consumed_tokens|images_seen)$"
)


def key_for(keys: Collection[str], role: str) -> str | None:
    """The run's key for `role` (the first of the role's names it logged), None if none."""
    for name in ROLES[role]:
        if "*" in name:
            hits = sorted(k for k in keys if fnmatch.fnmatchcase(k, name))
            if hits:
                return hits[0]
        elif name in keys:
            return name
    return None


def mfu_scale(key: str) -> float:
    """The value of `key` that means 100 % MFU."""
    return 100.0 if key in PERCENT_KEYS else 1.0


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
