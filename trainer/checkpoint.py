"""Checkpoints that resume exactly: one directory per step, written atomically.

    <ckpt_dir>/step_00000400/
        model.pt     (rank 0) model, optimizer, schedule, step, tokens, reslog run uid, config
        rank0.pt     (every rank) data-loader position and RNG states (python, torch CPU, CUDA)
        rank1.pt ...

Every file is written to a temporary name and renamed; the directory is assembled as
``step_XXXXXXXX.tmp`` and renamed into place by rank 0 after all ranks wrote their part, so a crash
mid-save never leaves a directory that looks complete. Only the newest ``keep_last`` are kept.
All ranks must see the same ``ckpt_dir`` (one host, or a shared file system).

Checkpoints are loaded with ``weights_only=False`` (they hold RNG tuples and loader state):
load only checkpoints you wrote.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from schema.store.user_files import replacing
from trainer import distributed

STEP_DIR = re.compile(r"^step_(\d{8})$")


def step_dir(ckpt_dir: str | Path, step: int) -> Path:
    return Path(ckpt_dir) / f"step_{step:08d}"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    try:
        import numpy as np

        state["numpy"] = np.random.get_state()
    except ImportError:  # pragma: no cover - numpy ships with the train extra
        pass
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "numpy" in state:
        import numpy as np

        np.random.set_state(state["numpy"])


def _atomic_save(obj: Any, path: Path) -> None:
    with replacing(path, "wb") as f:  # a fresh file, synced and renamed over the target
        torch.save(obj, f)


def save(
    ckpt_dir: str | Path,
    step: int,
    *,
    main: dict[str, Any] | None,
    rank_state: dict[str, Any],
    rank: int = 0,
    world_size: int = 1,
    keep_last: int = 3,
) -> Path:
    """Write this rank's part of the checkpoint of ``step``; rank 0 passes ``main`` (model,
    optimizer, ...). Collective under torchrun: every rank must call it. Returns the final path."""
    final = step_dir(ckpt_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    if rank == 0:
        if tmp.exists():
            shutil.rmtree(tmp)  # left by a crash during an earlier save
        tmp.mkdir(parents=True)
    distributed.barrier()
    _atomic_save(rank_state, tmp / f"rank{rank}.pt")
    if rank == 0:
        if main is None:
            raise ValueError("rank 0 must pass the main checkpoint state")
        _atomic_save({**main, "world_size": world_size}, tmp / "model.pt")
    distributed.barrier()
    if rank == 0:
        if final.exists():  # the same step saved again (e.g. after a resume): replace it
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(final.parent)
        prune(ckpt_dir, keep_last)
    distributed.barrier()
    return final


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def list_checkpoints(ckpt_dir: str | Path) -> list[Path]:
    """Complete checkpoint directories, oldest first."""
    root = Path(ckpt_dir)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if STEP_DIR.match(p.name) and (p / "model.pt").is_file()]
    return sorted(found, key=lambda p: p.name)


def prune(ckpt_dir: str | Path, keep_last: int) -> None:
    for old in list_checkpoints(ckpt_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)


def find_latest(ckpt_dir: str | Path) -> Path | None:
    found = list_checkpoints(ckpt_dir)
    return found[-1] if found else None


def resolve(path_or_auto: str, ckpt_dir: str | Path) -> Path | None:
    """``--resume`` value -> a checkpoint directory. "auto": the newest in ckpt_dir, or None
    (start fresh). A path may name a step directory or a directory of them."""
    if path_or_auto == "auto":
        return find_latest(ckpt_dir)
    p = Path(path_or_auto)
    if (p / "model.pt").is_file():
        return p
    latest = find_latest(p)
    if latest is None:
        raise FileNotFoundError(f"--resume {path_or_auto}: no checkpoint (step_*/model.pt) there")
    return latest


def load(
    path: str | Path, rank: int = 0, map_location: str | torch.device = "cpu"
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(main state, this rank's state or None when the checkpoint has no file for this rank)."""
    path = Path(path)
    main = torch.load(path / "model.pt", map_location=map_location, weights_only=False)
    rank_file = path / f"rank{rank}.pt"
    rank_state = (
        torch.load(rank_file, map_location="cpu", weights_only=False)
        if rank_file.is_file()
        else None
    )
    return main, rank_state
