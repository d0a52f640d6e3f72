"""The ranks of one job: which runs belong together, and the phases a rank's step is cut into.

A job is the runs that share a group (`init(group=...)`; under torchrun reslog defaults the group
to torchrun's run id, and the trainer makes every rank agree on one). Each rank logs its own run:
`time/<phase>` seconds per step (the trainer's phases below, or any `run.timer(name)` on every
rank), so a job's ranks are joined by group even when each host keeps its own store.

A phase is either a rank's own work (data wait, host-to-device copy, forward, backward, optimizer,
or any name a user times) or waiting for the other ranks (`comm`: the time a rank sits in a
collective after its own part is done). Only own work can make a rank a straggler: the ranks that
wait for a slow one show it as `comm`, never as their own slowness (schema/rules/stragglers.py).

Stdlib only: `reslog watch`, `reslog show` and resplot all read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

PREFIX = "time/"
STEP = "step"
# The trainer's phases, in the order a step runs them.
PHASES = ("data", "h2d", "forward", "backward", "comm", "optimizer")
# Waiting for other ranks, not this rank's own work.
WAIT_PHASES = frozenset({"comm"})


def key(phase: str) -> str:
    return PREFIX + phase


def phase_of(name: str) -> str | None:
    """`time/forward` -> "forward"; None for keys that are not a rank's phase (time/rank3/step,
    train/loss). `time/step` gives "step"."""
    if not name.startswith(PREFIX):
        return None
    phase = name[len(PREFIX) :]
    return phase if phase and "/" not in phase else None


def own_work(phases: Iterable[str]) -> list[str]:
    """The phases of `phases` that are a rank's own work, in step order (known phases first)."""
    names = {p for p in phases if p != STEP and p not in WAIT_PHASES}
    known = [p for p in PHASES if p in names]
    return known + sorted(names - set(known))


def rank_label(rank: int, host: str) -> str:
    """How every message names a rank: `rank 2 on gpu-b`."""
    return f"rank {rank} on {host}" if host else f"rank {rank}"


def ranks_text(ranks: Iterable[int]) -> str:
    """`rank 1`, `ranks 0, 2, 3`, `ranks 0-15, 17`: three or more consecutive ranks as a range."""
    values = sorted(set(ranks))
    if not values:
        return "no rank"
    runs: list[list[int]] = []
    for r in values:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [f"{run[0]}-{run[-1]}" if len(run) >= 3 else ", ".join(map(str, run)) for run in runs]
    return f"{'rank' if len(values) == 1 else 'ranks'} {', '.join(parts)}"


def jobs(runs: Iterable[Any]) -> dict[str, list[Any]]:
    """group -> the runs of each multi-rank job (world_size > 1 and a group), one per rank, by rank.

    Where one rank has several runs in a group (a rank restarted without resuming its run), the
    newest stands for it. `runs` are RunInfo-like: group, rank, world_size, created_at.
    """
    out: dict[str, dict[int, Any]] = {}
    for run in runs:
        if not run.group or run.world_size <= 1:
            continue
        ranks = out.setdefault(run.group, {})
        held = ranks.get(run.rank)
        if held is None or run.created_at > held.created_at:
            ranks[run.rank] = run
    return {group: [ranks[r] for r in sorted(ranks)] for group, ranks in out.items()}
