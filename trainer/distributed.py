"""torchrun environment, process group set-up and rank-0 printing, all in one place.

Under ``torchrun`` the variables RANK, LOCAL_RANK, WORLD_SIZE (and MASTER_ADDR/PORT,
TORCHELASTIC_RUN_ID) are set and a process group is made, even for one process; without them
this is a single process and nothing is initialised.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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


def is_master() -> bool:
    return dist_env().rank == 0


def print0(*args, **kwargs) -> None:
    """print() on global rank 0 only."""
    if is_master():
        print(*args, **kwargs, flush=True)


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
