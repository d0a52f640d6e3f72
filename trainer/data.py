"""Token-shard loader: packs a prepared split into fixed-length ``(x, y)`` batches.

The shards of a split (written by `trainer.prepare`) are memory-mapped and read as one token
stream. Sequence ``j`` is the window ``[j*T, j*T + T + 1)``; ``x`` is its first ``T`` tokens and
``y`` the last ``T`` (so every token is an input exactly once per epoch). Each epoch visits the
sequences in a permutation seeded by ``(seed, epoch)``; global step ``s`` takes the
``world_size * batch_size`` sequences ``perm[s*W*B : (s+1)*W*B]`` and rank ``r`` the ``r``-th block
of ``B`` of them, so ranks never share a sequence. The tail of an epoch that does not fill a
global step is dropped, which keeps every rank on the same number of steps.

A background thread builds the next ``prefetch`` batches and hands them over through a blocking
`queue.Queue` (no polling). The position reported by `state_dict` is that of the batches the
caller has received, not of those prefetched, so a checkpoint resumes exactly.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from trainer.parts import Batches

MANIFEST = "manifest.json"


def read_manifest(shard_dir: str | Path) -> dict:
    path = Path(shard_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"no {MANIFEST} in {shard_dir}: prepare the data first "
            "(python -m trainer.prepare --input RAW --out DIR)"
        )
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class TokenStream:
    """The shards of one split, memory-mapped, addressed as one array of tokens."""

    def __init__(self, shard_dir: str | Path, split: str):
        shard_dir = Path(shard_dir)
        manifest = read_manifest(shard_dir)
        splits = manifest.get("splits", {})
        if split not in splits:
            raise ValueError(
                f"split {split!r} not in {shard_dir / MANIFEST} (has {sorted(splits)})"
            )
        self.dtype = np.dtype(manifest["dtype"])
        self.vocab_size = int(manifest["vocab_size"])
        self.shards: list[np.memmap] = []
        for entry in splits[split]["shards"]:
            path = shard_dir / entry["file"]
            size = path.stat().st_size if path.is_file() else -1
            if size != entry["tokens"] * self.dtype.itemsize:
                raise ValueError(
                    f"{path}: expected {entry['tokens']} {self.dtype} tokens "
                    f"({entry['tokens'] * self.dtype.itemsize} bytes), found "
                    + ("no file" if size < 0 else f"{size} bytes")
                )
            if entry["tokens"]:
                self.shards.append(np.memmap(path, dtype=self.dtype, mode="r"))
        self.offsets = np.cumsum([0] + [len(s) for s in self.shards])
        self.n_tokens = int(self.offsets[-1])

    def read(self, start: int, length: int, out: np.ndarray) -> None:
        """Copy tokens ``[start, start+length)`` into ``out`` (which may span shards)."""
        i = int(np.searchsorted(self.offsets, start, side="right")) - 1
        done = 0
        while done < length:
            shard = self.shards[i]
            lo = start + done - int(self.offsets[i])
            n = min(length - done, len(shard) - lo)
            out[done : done + n] = shard[lo : lo + n]
            done += n
            i += 1


class ShardLoader:
    """Iterator of ``(x, y)`` int64 tensors of shape ``(batch_size, seq_len)``; see module doc.

    Iterates forever (epoch after epoch) unless ``loop=False``, in which case it stops after one
    epoch. ``shuffle=False`` visits sequences in order (for validation).
    """

    def __init__(
        self,
        shard_dir: str | Path,
        batches: Batches,
        *,
        prefetch: int = 2,
        shuffle: bool = True,
        loop: bool = True,
        pin_memory: bool | None = None,
    ):
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        self.shard_dir = Path(shard_dir)
        b = self.batches = batches
        self.batch_size, self.seq_len, self.split = b.batch_size, b.seq_len, b.split
        self.seed, self.rank, self.world_size = b.seed, b.part.rank, b.part.world_size
        self.prefetch, self.shuffle, self.loop = prefetch, shuffle, loop
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory
        self.stream = TokenStream(shard_dir, self.split)
        self.vocab_size = self.stream.vocab_size
        self.num_sequences = max(0, (self.stream.n_tokens - 1) // self.seq_len)
        per_step = self.world_size * self.batch_size
        self.steps_per_epoch = self.num_sequences // per_step
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"split {self.split!r} in {shard_dir} has {self.stream.n_tokens} tokens; one step "
                f"of {self.world_size} x {self.batch_size} x {self.seq_len} needs at least "
                f"{per_step * self.seq_len + 1}"
            )
        self._epoch, self._step = 0, 0  # position of the next batch the caller will receive
        self._perm_epoch, self._perm = -1, np.empty(0, dtype=np.int64)
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._closed = False

    @property
    def tokens_per_batch(self) -> int:
        return self.batches.tokens_per_batch

    @property
    def epoch(self) -> int:
        return self._epoch

    # -- positions and batches (pure functions of (seed, epoch, step)) --------------------------

    def _order(self, epoch: int) -> np.ndarray:
        if self._perm_epoch != epoch:
            if self.shuffle:
                rng = np.random.Generator(np.random.PCG64([self.seed, epoch]))
                self._perm = rng.permutation(self.num_sequences)
            else:
                self._perm = np.arange(self.num_sequences)
            self._perm_epoch = epoch
        return self._perm

    def sequence_ids(self, epoch: int, step: int) -> np.ndarray:
        """Indices of the sequences this rank gets at ``(epoch, step)``."""
        start = (step * self.world_size + self.rank) * self.batch_size
        return self._order(epoch)[start : start + self.batch_size]

    def _build(self, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        T = self.seq_len
        buf = np.empty((self.batch_size, T + 1), dtype=np.int64)
        for row, j in enumerate(self.sequence_ids(epoch, step)):
            self.stream.read(int(j) * T, T + 1, buf[row])
        x = torch.from_numpy(np.ascontiguousarray(buf[:, :-1]))  # (B, T)
        y = torch.from_numpy(np.ascontiguousarray(buf[:, 1:]))  # (B, T)
        if self.pin_memory:
            x, y = x.pin_memory(), y.pin_memory()
        return x, y

    def _advance(self, epoch: int, step: int) -> tuple[int, int]:
        step += 1
        if step == self.steps_per_epoch:
            return epoch + 1, 0
        return epoch, step

    # -- background prefetch ---------------------------------------------------------------------

    def _produce(self, epoch: int, step: int) -> None:
        q = self._queue
        assert q is not None
        try:
            while not self._stop.is_set():
                if not self.loop and epoch > 0:
                    q.put(StopIteration())
                    return
                batch = self._build(epoch, step)
                epoch, step = self._advance(epoch, step)
                q.put((batch, epoch, step))  # blocks while the queue is full
        except BaseException as e:  # handed to the consumer, which re-raises it
            q.put(e)

    def _start(self) -> None:
        self._stop.clear()
        self._queue = queue.Queue(maxsize=self.prefetch)
        self._thread = threading.Thread(
            target=self._produce,
            args=(self._epoch, self._step),
            name=f"ShardLoader-{self.split}-r{self.rank}",
            daemon=True,
        )
        self._thread.start()

    def _stop_thread(self) -> None:
        t, q = self._thread, self._queue
        if t is None or q is None:
            return
        self._stop.set()
        # Emptying the queue unblocks a producer waiting in put(); it then sees the stop flag.
        while t.is_alive():
            try:
                while True:
                    q.get_nowait()
            except queue.Empty:
                pass
            t.join(timeout=0.1)
        self._thread, self._queue = None, None

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._closed:
            raise RuntimeError("ShardLoader is closed")
        if self.prefetch == 0:
            if not self.loop and self._epoch > 0:
                raise StopIteration
            batch = self._build(self._epoch, self._step)
            self._epoch, self._step = self._advance(self._epoch, self._step)
            return batch
        if self._thread is None:
            self._start()
        assert self._queue is not None
        item = self._queue.get()
        if isinstance(item, StopIteration):
            self._queue.put(item)  # stay exhausted on further calls
            raise StopIteration
        if isinstance(item, BaseException):
            self._stop_thread()
            raise item
        batch, self._epoch, self._step = item
        return batch

    def state_dict(self) -> dict:
        """Position of the next batch; store it in the checkpoint."""
        return {
            "epoch": self._epoch,
            "step": self._step,
            "seed": self.seed,
            "split": self.split,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "world_size": self.world_size,
            "num_sequences": self.num_sequences,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state``; the next batch is the one the saving loader would have given.

        A different ``world_size * batch_size`` is accepted with a warning: the position is
        converted through the number of sequences consumed in the epoch (rounded down).
        """
        for key in ("seq_len", "num_sequences", "seed", "split"):
            if state[key] != getattr(self, key):
                raise ValueError(
                    f"loader state has {key}={state[key]!r}, this loader {getattr(self, key)!r}: "
                    "resume with the same data and settings"
                )
        epoch, step = int(state["epoch"]), int(state["step"])
        per_step = self.world_size * self.batch_size
        saved_per_step = int(state["world_size"]) * int(state["batch_size"])
        if saved_per_step != per_step:
            warnings.warn(
                f"resuming the loader with {self.world_size} x {self.batch_size} sequences per "
                f"step instead of {state['world_size']} x {state['batch_size']}: "
                "the epoch position is approximate",
                stacklevel=2,
            )
            step = step * saved_per_step // per_step
            if step >= self.steps_per_epoch:
                epoch, step = epoch + 1, 0
        self._stop_thread()
        self._epoch, self._step = epoch, step

    def close(self) -> None:
        """Stop the prefetch thread (idempotent). Iterating afterwards raises RuntimeError."""
        self._stop_thread()
        self._closed = True

    def __enter__(self) -> ShardLoader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._stop_thread()
