"""Learning-rate schedules as pure functions of the step, so resuming needs no scheduler state.

    cosine    linear warmup, then cosine from lr to lr * min_lr_ratio at the last step
    wsd       warmup-stable-decay: linear warmup, constant lr, then a linear decay to
              lr * min_lr_ratio over the last ``decay_frac`` of the steps
    constant  linear warmup, then constant

``phase(step)`` names the part of the schedule a step is in ("warmup", "stable", "decay"), so the
trainer can log a ``schedule`` event when it changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainer.config import ScheduleConfig


@dataclass(frozen=True)
class Schedule:
    kind: str
    lr: float
    total_steps: int
    warmup_steps: int
    min_lr_ratio: float = 0.1
    decay_frac: float = 0.2

    @classmethod
    def from_config(cls, cfg: ScheduleConfig, lr: float, total_steps: int) -> Schedule:
        return cls(
            cfg.kind,
            lr,
            total_steps,
            min(cfg.warmup_steps, total_steps),
            cfg.min_lr_ratio,
            cfg.decay_frac,
        )

    @property
    def decay_start(self) -> int:
        """First step of the decay phase (wsd), or the end of warmup (cosine)."""
        if self.kind == "wsd":
            decay_steps = round(self.decay_frac * self.total_steps)
            return max(self.warmup_steps, self.total_steps - decay_steps)
        return self.warmup_steps

    def phase(self, step: int) -> str:
        if step < self.warmup_steps:
            return "warmup"
        if self.kind == "constant":
            return "stable"
        if self.kind == "cosine":
            return "decay"
        return "stable" if step < self.decay_start else "decay"

    def __call__(self, step: int) -> float:
        """Learning rate for optimizer step ``step`` (0-based)."""
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.kind == "constant":
            return self.lr
        min_lr = self.lr * self.min_lr_ratio
        start = self.decay_start
        last = self.total_steps - 1  # the decay ends here, at min_lr
        # A decay of one step is that step at min_lr (not the peak, as 0 / 1 would make it).
        progress = 1.0 if last <= start else min(1.0, max(0.0, (step - start) / (last - start)))
        if self.kind == "cosine":
            return min_lr + 0.5 * (self.lr - min_lr) * (1 + math.cos(math.pi * progress))
        if step < start:  # wsd stable
            return self.lr
        return self.lr - (self.lr - min_lr) * progress

    def state_dict(self) -> dict:
        return {
            "kind": self.kind,
            "lr": self.lr,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "min_lr_ratio": self.min_lr_ratio,
            "decay_frac": self.decay_frac,
        }
