"""Loading checkpoints written before the fused projections (issue 13).

Until then the model kept q, k, v as three matrices (``attention.wq/wk/wv.weight``) and the
SwiGLU gate and up projections as two (``feed_forward.w1/w3.weight``); now each group is one
matrix stacked by rows (``attention.wqkv.weight`` = [wq; wk; wv], ``feed_forward.w13.weight`` =
[w1; w3]). The function is the same, so an old checkpoint maps onto the new model exactly:

- model weights: :func:`fuse_state_dict_hook` runs inside ``Transformer.load_state_dict`` and
  stacks the old keys into the new ones;
- AdamW state (exp_avg, exp_avg_sq, ...): :func:`fuse_optimizer_state` stacks the per-matrix
  moments the same way, for optimizers grouped as trainer/train.py groups them.
"""

from __future__ import annotations

from typing import Any

import torch

# new parameter suffix -> the old suffixes it stacks, in row order
FUSED = {
    "attention.wqkv.weight": ("attention.wq.weight", "attention.wk.weight", "attention.wv.weight"),
    "feed_forward.w13.weight": ("feed_forward.w1.weight", "feed_forward.w3.weight"),
}


def old_names(new_name: str) -> list[str]:
    """The pre-fusion parameter names a current parameter name stands for, in row order."""
    for new, olds in FUSED.items():
        if new_name.endswith(new):
            prefix = new_name[: -len(new)]
            return [prefix + o for o in olds]
    return [new_name]


def is_unfused(state_dict: dict[str, Any]) -> bool:
    """Whether a model state dict was written before the fusion."""
    return any(k.endswith(olds[0]) for k in state_dict for olds in FUSED.values())


def fuse_state_dict_hook(
    module: torch.nn.Module,
    state_dict: dict[str, Any],
    prefix: str,
    local_metadata: dict[str, Any],
    strict: bool,
    *_rest: Any,
) -> None:
    """A load_state_dict pre-hook: replaces, in place, every complete group of old keys under
    ``prefix`` by their row-stacked fused key. A partial group is left alone, so strict loading
    reports the missing and unexpected keys by name."""
    for olds in FUSED.values():
        for key in [k for k in state_dict if k.startswith(prefix) and k.endswith(olds[0])]:
            stem = key[: -len(olds[0])]
            parts = [stem + o for o in olds]
            if all(p in state_dict for p in parts):
                new = stem + next(n for n, o in FUSED.items() if o == olds)
                state_dict[new] = torch.cat([state_dict.pop(p) for p in parts], dim=0)


def fuse_optimizer_state(
    state: dict[str, Any], named_groups: list[list[str]], old_sizes: dict[str, int]
) -> dict[str, Any]:
    """An optimizer state dict saved for the pre-fusion model -> one for the current model.

    ``named_groups`` lists, per param group, the current parameter names in the optimizer's
    order; ``old_sizes`` the row count of every old parameter (from the old model state dict).
    Per-parameter tensors with one row per parameter row (AdamW's moments) are stacked; the
    rest (the step count) must agree across the stacked parameters and is kept once."""
    groups = state["param_groups"]
    if len(groups) != len(named_groups):
        raise ValueError(
            f"the checkpoint's optimizer has {len(groups)} param groups, this model's "
            f"{len(named_groups)}"
        )
    new_state: dict[int, dict[str, Any]] = {}
    new_groups = []
    index = 0
    for group, names in zip(groups, named_groups, strict=True):
        old_ids = list(group["params"])
        expanded = [old for name in names for old in old_names(name)]
        if len(old_ids) != len(expanded):
            raise ValueError(
                f"the checkpoint's optimizer group has {len(old_ids)} parameters, the pre-fusion "
                f"model would have {len(expanded)}: not a checkpoint of this model"
            )
        by_name = dict(zip(expanded, old_ids, strict=True))
        new_ids = []
        for name in names:
            parts = [state["state"].get(by_name[o]) for o in old_names(name)]
            new_ids.append(index)
            if all(p is not None for p in parts):
                new_state[index] = _stack(parts, [old_sizes[o] for o in old_names(name)], name)
            elif any(p is not None for p in parts):
                raise ValueError(f"optimizer state for only part of {name}'s old matrices")
            index += 1
        new_groups.append({**group, "params": new_ids})
    return {"state": new_state, "param_groups": new_groups}


def _stack(parts: list[dict[str, Any]], rows: list[int], name: str) -> dict[str, Any]:
    if len(parts) == 1:
        return parts[0]
    out: dict[str, Any] = {}
    for key, first in parts[0].items():
        values = [p[key] for p in parts]
        if isinstance(first, torch.Tensor) and first.dim() > 0 and first.size(0) == rows[0]:
            out[key] = torch.cat(values, dim=0)
        elif all(_same(first, v) for v in values[1:]):
            out[key] = first
        else:
            raise ValueError(f"optimizer state {key!r} differs between {name}'s old matrices")
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    return a == b
