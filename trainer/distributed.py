"""torchrun environment, process group set-up and rank-0 printing, all in one place.

Under ``torchrun`` the variables RANK, LOCAL_RANK, WORLD_SIZE (and MASTER_ADDR/PORT,
TORCHELASTIC_RUN_ID) are set and a process group is made, even for one process; without them
this is a single process and nothing is initialised.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

_CPU_GROUP: dist.ProcessGroup | None = None


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1
    torchrun: bool = False  # launched by torchrun, whatever the world size

    @property
    def is_distributed(self) -> bool:
        """A process group and DDP: under torchrun even for one process (the same code path
        as eight, so `--nproc_per_node 1` tests it), or whenever there are several."""
        return self.world_size > 1 or self.torchrun

    @property
    def is_master(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise RuntimeError(f"environment variable {name}={raw!r} is not an integer") from None


def dist_env() -> DistInfo:
    """Read the torchrun variables; a plain ``python`` process is rank 0 of 1."""
    world = _env_int("WORLD_SIZE", 1)
    rank = _env_int("RANK", 0)
    local_rank = _env_int("LOCAL_RANK", rank)
    local_world = _env_int("LOCAL_WORLD_SIZE", world)
    if not 0 <= rank < world:
        raise RuntimeError(f"RANK={rank} is outside WORLD_SIZE={world}")
    return DistInfo(rank, local_rank, world, local_world, "TORCHELASTIC_RUN_ID" in os.environ)


def init(device_type: str) -> DistInfo:
    """Initialise the default process group when launched by torchrun: nccl for CUDA (and bind
    this process to its GPU), gloo for CPU. Returns the rank layout either way."""
    info = dist_env()
    if info.is_distributed and not dist.is_initialized():
        if device_type == "cuda":
            torch.cuda.set_device(info.local_rank)
            dist.init_process_group("nccl", device_id=torch.device("cuda", info.local_rank))
            global _CPU_GROUP
            # Host-side scalars (per-rank step times) go through gloo and never touch a stream.
            _CPU_GROUP = dist.new_group(backend="gloo")
        else:
            dist.init_process_group("gloo")
    return info


def cpu_group() -> dist.ProcessGroup | None:
    """A gloo group for small CPU tensors (None = the default group, already gloo on CPU)."""
    return _CPU_GROUP


def destroy() -> None:
    global _CPU_GROUP
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    _CPU_GROUP = None


def torchrun_run_id() -> str:
    """torchrun's run id (--rdzv-id; a fresh uuid with --standalone), "" when it has none."""
    value = os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
    return "" if value.lower() == "none" else value


def agree_job(candidate: str) -> str:
    """The job id every rank's run carries, so readers join the ranks (schema/rules/ranks.py): rank
    0's ``candidate`` if it has one, else torchrun's run id, else a fresh id, broadcast to every
    rank (they must agree even where torchrun gives none). A single process keeps ``candidate``."""
    info = dist_env()
    if not info.is_distributed or not dist.is_initialized():
        return candidate
    chosen = [candidate or torchrun_run_id() or uuid.uuid4().hex[:12]] if info.is_master else [""]
    dist.broadcast_object_list(chosen, src=0, group=cpu_group())
    return str(chosen[0])


class CommTimer:
    """When this rank's own share of backward ended, so the wait in DDP's all-reduce is told apart
    from backward compute: a comm hook stamps each gradient bucket as it becomes ready and hands
    it to the default all-reduce. The last bucket's stamp is the end of this rank's own backward;
    from there until ``backward()`` returns it waits for the other ranks (``comm``). ``stamp``
    gives the timer's clock: ``time.perf_counter`` on CPU (gloo's wall time), a CUDA event on the
    current stream on GPU, so neither ever synchronises."""

    def __init__(self, stamp: Callable[[], Any], group: dist.ProcessGroup | None = None):
        self._stamp = stamp
        self._group = group
        self.ready: Any = None

    def register(self, ddp: torch.nn.parallel.DistributedDataParallel) -> None:
        ddp.register_comm_hook(None, self._hook)

    # No annotations: DDP compares them with the real classes, and this module's are strings.
    def _hook(self, _state, bucket):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        self.ready = self._stamp()
        return allreduce_hook(self._group, bucket)  # type: ignore[arg-type]

    def take(self) -> Any:
        """The stamp of the last bucket since the previous take (None: no all-reduce ran)."""
        ready, self.ready = self.ready, None
        return ready


def is_master() -> bool:
    return dist_env().rank == 0


def print0(*args, **kwargs) -> None:
    """print() on global rank 0 only."""
    if is_master():
        print(*args, **kwargs, flush=True)


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
