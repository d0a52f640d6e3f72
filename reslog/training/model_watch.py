"""`run.watch(model)`: per-parameter L2 norms of the weights and/or gradients, every `log_freq`
forward calls of the model, without a GPU sync on the training thread.

A forward pre-hook counts the model's calls. On every `log_freq`-th call it computes the norm of
each parameter (`log="parameters"` or `"all"`) and arms the gradient hooks; during the backward
that follows, each parameter's post-accumulate-grad hook computes the norm of its gradient
(`log="gradients"` or `"all"`; under gradient accumulation, the gradient as accumulated up to
that micro-batch). A norm is a one-element tensor on the parameter's device: on a GPU it
is launched, not read, and the writer copies all of a flush's tensors to the host at once. The
norms join the next committed `log()` call as `param_norm/<name>` and `grad_norm/<name>`.

wandb logs histograms here; reslog stores numbers, so it logs norms (docs/reslog.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reslog.training.values import convert

MODES = ("gradients", "parameters", "all")


class ModelWatch:
    def __init__(
        self, on_values: Callable[[dict[str, Any]], None], models: Any, *, log: str, log_freq: int
    ) -> None:
        import torch

        if log not in MODES:
            raise ValueError(f"reslog: watch(log=...) must be one of {MODES} or None, got {log!r}")
        if int(log_freq) < 1:
            raise ValueError(f"reslog: watch(log_freq=...) must be >= 1, got {log_freq!r}")
        self._on_values = on_values
        self._models = list(models) if isinstance(models, (list, tuple)) else [models]
        self._freq = int(log_freq)
        self._params = log in ("parameters", "all")
        self._grads = log in ("gradients", "all")
        self._calls = 0
        self._armed = False
        self._handles: list[Any] = []
        self._norm = torch.linalg.vector_norm
        self._float = torch.float32
        many = len(self._models) > 1
        self._named: list[tuple[str, Any]] = []
        for i, model in enumerate(self._models):
            prefix = f"{i}/" if many else ""
            named = [(prefix + n, p) for n, p in model.named_parameters()]
            self._named += named
            self._handles.append(model.register_forward_pre_hook(self._on_forward))
            if self._grads:
                for name, p in named:
                    if p.requires_grad:
                        hook = p.register_post_accumulate_grad_hook(
                            self._grad_hook("grad_norm/" + name)
                        )
                        self._handles.append(hook)

    def watches(self, models: Any) -> bool:
        wanted = list(models) if isinstance(models, (list, tuple)) else [models]
        return any(m is w for m in self._models for w in wanted)

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _on_forward(self, module: Any, args: Any) -> None:
        self._calls += 1
        self._armed = self._calls % self._freq == 0
        if self._armed and self._params:
            norm, f32 = self._norm, self._float
            values = {
                "param_norm/" + n: convert(n, norm(p.detach(), dtype=f32)) for n, p in self._named
            }
            self._on_values(values)

    def _grad_hook(self, key: str):
        def hook(p: Any) -> None:
            if self._armed and p.grad is not None:
                value = self._norm(p.grad.detach(), dtype=self._float)
                self._on_values({key: convert(key, value)})

        return hook
