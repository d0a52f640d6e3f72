"""What the trainer reads its batches from, chosen by ``[data]``: the synthetic Markov stream
(``source = "synthetic"``, here) or the prepared token shards (:class:`trainer.data.ShardLoader`).
Both yield ``(x, y)`` int64 tensors of shape ``(batch_size, seq_len)`` and keep their position in
``state_dict`` for a checkpoint.
"""

from __future__ import annotations

import numpy as np
import torch

from trainer.config import Config, ConfigError
from trainer.data import ShardLoader, read_manifest
from trainer.parts import Batches, RankPart


class SyntheticLoader:
    """A learnable token stream without files (``--data.source synthetic``): a random sparse
    Markov chain where each token has 4 possible successors, so the loss can fall from ln(V)
    towards ln(4). The chain depends on ``seed``; batch ``s`` of rank ``r`` of a split depends
    only on (seed, split, s, r): the state is one int, and "valid" walks the same chain."""

    def __init__(self, vocab_size: int, batches: Batches):
        self.vocab_size, self.batches, self.seed = vocab_size, batches, batches.seed
        self._split_id = 0 if batches.split == "train" else 1 + sum(batches.split.encode())
        self.successors = np.random.default_rng(self.seed).integers(0, vocab_size, (vocab_size, 4))
        self._step = 0

    @property
    def tokens_per_batch(self) -> int:
        return self.batches.tokens_per_batch

    def __iter__(self) -> SyntheticLoader:
        return self

    def __next__(self) -> tuple[torch.Tensor, torch.Tensor]:
        rank = self.batches.part.rank
        rng = np.random.default_rng((self.seed, self._split_id, self._step, rank))
        self._step += 1
        B, T = self.batches.batch_size, self.batches.seq_len
        seq = np.empty((B, T + 1), dtype=np.int64)
        seq[:, 0] = rng.integers(0, self.vocab_size, B)
        choice = rng.integers(0, 4, (B, T))
        for t in range(T):
            seq[:, t + 1] = self.successors[seq[:, t], choice[:, t]]
        t = torch.from_numpy(seq)
        return t[:, :-1], t[:, 1:]

    def state_dict(self) -> dict:
        return {"step": self._step, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self._step = int(state["step"])

    def close(self) -> None:
        pass


def make_loader(
    cfg: Config, split: str, rank: int, world_size: int, vocab_size: int, evaluation: bool = False
) -> SyntheticLoader | ShardLoader:
    """This rank's loader of ``split``; ``evaluation``: the shards once, in order, unprefetched."""
    d = cfg.data
    # Both sources cut the same batches out of their stream.
    batches = Batches(d.batch_size, d.seq_len, split, cfg.train.seed, RankPart(rank, world_size))
    if d.source == "synthetic":
        return SyntheticLoader(vocab_size, batches)
    return ShardLoader(
        d.dir,
        batches,
        prefetch=0 if evaluation else d.prefetch,
        shuffle=not evaluation,
        loop=not evaluation,
    )


def data_vocab_size(cfg: Config) -> int:
    """model.vocab_size, or the prepared directory's manifest when it is 0."""
    if cfg.model.vocab_size:
        return cfg.model.vocab_size
    if cfg.data.source == "synthetic":
        raise ConfigError("--model.vocab_size=0: set it when --data.source=synthetic")
    try:
        return int(read_manifest(cfg.data.dir)["vocab_size"])
    except FileNotFoundError as e:
        raise ConfigError(f"--data.dir={cfg.data.dir!r}: {e}") from None
