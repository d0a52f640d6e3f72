"""Hangs localised: when a job's ranks stall, which wait inside a collective and which never came.

Each rank's writer stores a stall event with every thread's stack (reslog/training/stall.py). In
a hung collective the ranks that reached it show a collective as their training thread's
innermost frames (DDP's gradient all-reduce runs inside `backward()`; explicit collectives sit in
`torch.distributed`), while the rank that never arrived shows where it really is: a data loader,
a disk write, a deadlock, an exception handler. `join()` tells them apart and names the latter
with its innermost frames; a rank whose process is gone (crashed, failed, killed) while the
others wait is named too. Where NVML telemetry is stored, a GPU at high utilisation and low power
(NCCL's kernels spin while they wait) is added as evidence.

Stdlib only: `reslog watch`, `reslog show` and resplot join the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from schema.rules.alerts import gpu_key
from schema.rules.ranks import rank_label, ranks_text
from schema.store.status import ENDED_BADLY, FINISHED, LIVE_STATUSES

INNERMOST = 3  # frames of a rank's training thread quoted in the alert

_THREAD = re.compile(r'^Thread "(?P<name>[^"]*)"(?P<role>[^\n]*):\n', re.M)
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n', re.M)

# (file path fragment, functions or None for any, what it means). The first match from the
# innermost frame outward says where a rank waits.
COLLECTIVE_FRAMES: tuple[tuple[str, frozenset[str] | None, str], ...] = (
    ("torch/distributed/", None, "a torch.distributed collective"),
    ("torch/nn/parallel/distributed.py", None, "DDP's buffer or parameter sync"),
    (
        "torch/autograd/",
        frozenset({"backward", "_engine_run_backward", "grad"}),
        "backward, where DDP all-reduces the gradients",
    ),
    ("deepspeed/comm/", None, "a DeepSpeed collective"),
    (
        "torch/cuda/",
        frozenset({"synchronize", "wait_stream", "wait_event"}),
        "a CUDA synchronisation, where a hung NCCL collective shows on the host",
    ),
)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str
    code: str = ""

    def short(self, code: bool = True) -> str:
        tail = "/".join(self.file.replace("\\", "/").split("/")[-2:])
        text = f"{tail}:{self.line} in {self.func}"
        return f"{text}: {self.code}" if self.code and code else text


def training_frames(body: str) -> list[Frame]:
    """The frames of the training thread (the one that called reslog.init, else the first
    thread) in a stall event's body, outermost first."""
    threads = list(_THREAD.finditer(body))
    if not threads:
        return []
    chosen = next((i for i, m in enumerate(threads) if "reslog.init" in m.group("role")), 0)
    start = threads[chosen].end()
    end = threads[chosen + 1].start() if chosen + 1 < len(threads) else len(body)
    block = body[start:end]
    frames = []
    for m in _FRAME.finditer(block):
        rest = block[m.end() :].split("\n", 1)[0]
        code = rest.strip() if rest.startswith("    ") else ""
        frames.append(Frame(m.group("file"), int(m.group("line")), m.group("func").strip(), code))
    return frames


def collective_of(frames: list[Frame]) -> str | None:
    """What collective the innermost matching frame is in, or None when the thread is not in one."""
    for frame in reversed(frames):
        path = frame.file.replace("\\", "/")
        for fragment, funcs, meaning in COLLECTIVE_FRAMES:
            if fragment in path and (funcs is None or frame.func in funcs):
                return meaning
    return None


def _is_library(frame: Frame) -> bool:
    path = frame.file.replace("\\", "/")
    return (
        path.startswith("<")
        or "/site-packages/" in path
        or "/dist-packages/" in path
        or re.search(r"/lib/python3[.\d]*/", path) is not None
    )


def where_stuck(frames: list[Frame]) -> str:
    """The innermost frame of the program's own code, then the innermost frames under it
    (library code: threading, torch) when it is not the innermost itself."""
    if not frames:
        return "an unknown frame (no stack stored)"
    own = next((f for f in reversed(frames) if not _is_library(f)), None)
    inner = frames[-INNERMOST:]
    if own is None or own is frames[-1]:
        return " <- ".join(f.short() for f in reversed(inner))
    below = frames[frames.index(own) + 1 :][-INNERMOST:]
    return f"{own.short()} (innermost: {' <- '.join(f.short(False) for f in reversed(below))})"


def collective_signature(util_pct: float, power_w: float, limit_w: float | None) -> bool:
    """NVML's view of a GPU spinning in a hung collective: busy, yet drawing little power."""
    if limit_w is None or not limit_w > 0:
        return False
    return util_pct >= 90.0 and power_w <= 0.4 * limit_w


@dataclass(frozen=True)
class RankStall:
    """One rank of a job as the join sees it."""

    rank: int
    host: str
    status: str  # the run's effective status (schema.store.status)
    stall_body: str | None = None  # the open stall event's body; None: not stalled
    stalled_at: float | None = None
    last_step: int | None = None


@dataclass(frozen=True)
class GpuReading:
    host: str
    gpu: int
    util_pct: float
    power_w: float
    limit_w: float | None


def gpu_readings(host: str, lasts: Iterable[tuple[str, float | None]]) -> list[GpuReading]:
    """A host's GPUs with a last utilisation and power (and the power limit where logged), by
    GPU, from (key, last value) pairs of its telemetry run (keys as schema.rules.alerts.gpu_key
    reads them)."""
    found: dict[int, dict[str, float]] = {}
    for name, last in lasts:
        parsed = gpu_key(name)
        if parsed is not None and parsed[1] in _GPU_FIELDS and last is not None:
            found.setdefault(parsed[0], {})[parsed[1]] = float(last)
    return [
        GpuReading(host, gpu, got["util"], got["power_w"], got.get("power_limit_w"))
        for gpu, got in sorted(found.items())
        if "util" in got and "power_w" in got
    ]


_GPU_FIELDS = ("util", "power_w", "power_limit_w")


@dataclass
class Hang:
    inside: list[int]  # ranks waiting in a collective
    where: str  # what the waiting ranks are in
    outside: list[tuple[int, str, str]] = field(default_factory=list)  # (rank, host, why)
    missing: list[int] = field(default_factory=list)  # ranks of the job no store given holds
    step: int | None = None  # the newest step the waiting ranks logged
    since: float | None = None
    evidence: list[str] = field(default_factory=list)

    @property
    def culprits(self) -> list[int]:
        return [r for r, _, _ in self.outside]

    def message(self) -> str:
        at = f" after step {self.step:,}" if self.step is not None else ""
        head = f"hung collective{at}: {ranks_text(self.inside)} wait in {self.where}"
        parts = [head]
        for rank, host, why in self.outside:
            parts.append(f"{rank_label(rank, host)} {why}")
        if self.missing:
            parts.append(
                f"{ranks_text(self.missing)} not in the stores read: one of them may be the "
                "rank that never came"
            )
        if not self.outside and not self.missing:
            parts.append("every rank is inside: a collective that never completes (NCCL, network)")
        return "; ".join(parts)

    def detail(self) -> str:
        return "\n".join(self.evidence)

    def text(self) -> str:
        """The message with its NVML evidence, one line."""
        return "; ".join([self.message(), *self.evidence])


def join(
    ranks: list[RankStall], world_size: int, gpus: list[GpuReading] | None = None
) -> Hang | None:
    """The job's hang, once it can be told: at least one rank stalled inside a collective and
    every other rank held by these stores is stalled too, or has ended. None otherwise (no rank
    in a collective, or some rank still logging: its stall event may be a flush away)."""
    inside: list[int] = []
    where: list[str] = []
    outside: list[tuple[int, str, str]] = []
    steps: list[int] = []
    since: list[float] = []
    for r in ranks:
        if r.stall_body is not None and r.status in LIVE_STATUSES:
            frames = training_frames(r.stall_body)
            meaning = collective_of(frames)
            if meaning is not None:
                inside.append(r.rank)
                where.append(meaning)
                if r.last_step is not None:
                    steps.append(r.last_step)
                if r.stalled_at is not None:
                    since.append(r.stalled_at)
                continue
            outside.append((r.rank, r.host, f"never entered it: stuck at {where_stuck(frames)}"))
        elif r.status in ENDED_BADLY:
            outside.append((r.rank, r.host, f"{r.status}: its process is gone"))
        elif r.status == FINISHED:
            outside.append((r.rank, r.host, "finished: it left the job while the others wait"))
        elif r.status in LIVE_STATUSES:
            return None  # still logging: wait for its stall event
    if not inside:
        return None
    held = {r.rank for r in ranks}
    missing = [r for r in range(world_size) if r not in held]
    hang = Hang(
        sorted(inside),
        max(set(where), key=where.count),
        sorted(outside),
        missing,
        max(steps) if steps else None,
        min(since) if since else None,
    )
    for g in gpus or []:
        if collective_signature(g.util_pct, g.power_w, g.limit_w):
            hang.evidence.append(
                f"{g.host} GPU {g.gpu}: {g.util_pct:.0f} % busy at {g.power_w:.0f} W of "
                f"{g.limit_w:.0f} W, the signature of a GPU spinning in a hung collective"
            )
    return hang
