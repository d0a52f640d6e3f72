"""What the trainer measures and where it goes: the logger interface (no-op and reslog), peak
FLOP/s per GPU for MFU, and a step-time breakdown that never synchronises the GPU.

The trainer only talks to :class:`Logger`; :class:`ReslogLogger` is the real implementation and
:class:`NullLogger` the one used with ``--no-log`` (and on ranks that do not log).
:func:`make_logger` picks between them and opens the reslog run from ``[logging]``.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from reslog import DisabledRun, Run
    from trainer.config import Config
    from trainer.distributed import DistInfo

# --------------------------------------------------------------------------- loggers


class Logger:
    """The interface the trainer logs through. Every method is a no-op here."""

    uid: str | None = None

    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Scalars (floats, ints or 0-d tensors, CUDA ones included) at a step."""

    def event(self, kind: str, title: str, body: str = "", level: str = "info") -> None:
        """A discrete event: checkpoint, resume, schedule, alert, note."""

    def summary(self, values: dict[str, Any]) -> None:
        """Run-level values (peak FLOP/s, parameter count, best valid loss)."""

    def close(self, status: str | None = None) -> None:
        """Flush and end the run; ``status`` None means it finished normally."""


NullLogger = Logger


class ReslogLogger(Logger):
    """Logs into a reslog run; :func:`make_logger` opens it."""

    def __init__(self, run: Run | DisabledRun):
        self._run = run
        self.uid = run.uid

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self._run.log(metrics, step=step)

    def event(self, kind: str, title: str, body: str = "", level: str = "info") -> None:
        self._run.event(kind, title, body=body, level=level)

    def summary(self, values: dict[str, Any]) -> None:
        for k, v in values.items():
            self._run.summary[k] = v

    def close(self, status: str | None = None) -> None:
        self._run.finish(status=status)


def make_logger(
    cfg: Config, dist: DistInfo, resume: str | None, runtime: dict[str, Any], job: str = ""
) -> Logger:
    """This process's logger, the one place ``[logging]`` becomes ``reslog.init``'s arguments.

    Rank 0 logs the run; ``resume`` (this rank's run uid) continues its run, same uid, so its
    charts go on. With ``logging.every_rank`` (the default) every other rank logs its own run of
    the job too, holding that rank's step phases (``time/*``), all of them in group ``job`` so
    readers join them (schema/rules/ranks.py). Only local rank 0 samples system telemetry: one
    sampler per host. Without ``every_rank``, local rank 0 of any other host opens a run only for
    its telemetry, and the other ranks get the no-op logger, as does any rank with
    ``logging.enabled = false``. ``runtime`` (facts the config does not fix) is stored in the
    run's config beside the resolved config.
    """
    lc = cfg.logging
    if not lc.enabled or not (dist.is_master or lc.every_rank or dist.local_rank == 0):
        return NullLogger()
    import reslog

    # "" in [logging] leaves the choice to reslog, which init spells None.
    name, store = lc.name or None, lc.store or None
    if not dist.is_master:
        base = lc.name or lc.project
        name = f"{base}-rank{dist.rank}" if lc.every_rank else f"{base}-host-rank{dist.rank}"
        resume = resume if lc.every_rank else None
    run = reslog.init(
        project=lc.project,
        name=name,
        config={**cfg.to_dict(), "runtime": runtime},
        store=store,
        tags=lc.tags,
        notes=lc.notes,
        resume=resume,
        system=lc.system and dist.local_rank == 0,
        system_interval=lc.system_interval,
        flush_interval=lc.flush_interval,
        rank=dist.rank,
        world_size=dist.world_size,
        stall_after=lc.stall_after,
        group=job or lc.group or None,
    )
    return ReslogLogger(run)


# --------------------------------------------------------------------------- peak FLOP/s and MFU

# Dense bf16 tensor-core peak per GPU (vendor datasheets, no sparsity). Matched in order against
# torch.cuda.get_device_name(); the first row whose every pattern occurs wins.
PEAK_BF16_FLOPS: list[tuple[tuple[str, ...], str, float]] = [
    (("H100", "PCIE"), "H100 PCIe", 756e12),
    (("H100", "NVL"), "H100 NVL", 835e12),
    (("H100",), "H100 SXM", 989e12),
    (("H200",), "H200", 989e12),
    (("H800",), "H800", 989e12),
    (("H20",), "H20", 148e12),
    (("GH200",), "GH200", 989e12),
    (("B200",), "B200", 2250e12),
    (("A100",), "A100", 312e12),
    (("A800",), "A800", 312e12),
    (("L40S",), "L40S", 362e12),
    (("L40",), "L40", 181e12),
    (("L4",), "L4", 121e12),
    (("RTX 4090",), "RTX 4090", 165e12),
    (("RTX 3090",), "RTX 3090", 71e12),
    (("RTX 6000 ADA",), "RTX 6000 Ada", 364e12),
]


def peak_flops(device_name: str) -> tuple[str, float] | None:
    """(table name, peak bf16 FLOP/s) for a CUDA device name, or None when unknown (MFU is then
    not logged rather than guessed). CPUs have no entry: MFU is a GPU measure here."""
    upper = device_name.upper()
    for patterns, name, flops in PEAK_BF16_FLOPS:
        if all(p in upper for p in patterns):
            return name, flops
    return None


def device_peak(device: torch.device) -> tuple[str, float] | None:
    if device.type != "cuda":
        return None
    return peak_flops(torch.cuda.get_device_name(device))


# --------------------------------------------------------------------------- step timing


class StepTimer:
    """Per-step durations of each phase (schema/rules/ranks.py's PHASES: data, h2d, forward,
    backward, comm, optimizer) and the whole step.

    ``start(step)``, then ``mark(phase)`` at the end of each phase (repeated phases, as with
    gradient accumulation, add up), or ``mark_at(phase, stamp)`` with a ``stamp()`` taken
    earlier (the end of backward compute, stamped in DDP's comm hook), then ``end()``.
    ``poll()`` returns the steps whose timings are known. On CUDA each mark records an event on
    the current stream and a step is resolved only when its last event reports done
    (``event.query()``), so timing never waits for the GPU: it reports a step or two late.
    On CPU marks read ``time.perf_counter`` and resolve at once.
    """

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._marks: list[tuple[str, Any]] = []
        self._step = 0
        self._pending: deque[tuple[int, list[tuple[str, Any]]]] = deque()

    def stamp(self) -> Any:
        """A point in time on this timer's clock (a recorded CUDA event on GPU)."""
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self, step: int) -> None:
        self._step = step
        self._marks = [("start", self.stamp())]

    def mark(self, phase: str) -> None:
        self._marks.append((phase, self.stamp()))

    def mark_at(self, phase: str, stamp: Any) -> None:
        self._marks.append((phase, stamp))

    def end(self) -> None:
        self._pending.append((self._step, self._marks))
        self._marks = []

    def _resolve(self, marks: list[tuple[str, Any]]) -> dict[str, float]:
        if self.cuda:

            def elapsed(a: Any, b: Any) -> float:
                return a.elapsed_time(b) / 1000.0  # ms -> s
        else:

            def elapsed(a: Any, b: Any) -> float:
                return b - a

        out: dict[str, float] = {}  # the phases this step marked (comm: only under DDP)
        for (_, t0), (phase, t1) in itertools.pairwise(marks):
            out[phase] = out.get(phase, 0.0) + elapsed(t0, t1)
        out["step"] = elapsed(marks[0][1], marks[-1][1])
        return out

    def poll(self) -> list[tuple[int, dict[str, float]]]:
        """Timings of finished steps, oldest first; never blocks."""
        done = []
        while self._pending:
            step, marks = self._pending[0]
            if self.cuda and not marks[-1][1].query():
                break
            self._pending.popleft()
            done.append((step, self._resolve(marks)))
        return done

    def drain(self) -> list[tuple[int, dict[str, float]]]:
        """All remaining timings; on CUDA waits for them (call once, at the end)."""
        if self.cuda and self._pending:
            self._pending[-1][1][-1][1].synchronize()
        return self.poll()
