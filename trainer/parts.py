"""Which part of the data one rank reads: the values the readers and the loaders are given.

`RankPart` is one DDP rank's share of a stream (items ``rank, rank + world_size, ...``), the
same for raw records (`trainer.readers`) and token batches (`trainer.loaders`, `trainer.data`).
`Batches` is what a loader cuts out of its stream: the batch shape, the split, the seed and the
rank's part. Both are frozen, so a loader or reader can hold one without copying its fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankPart:
    """Rank ``rank`` of ``world_size``: it takes items ``rank, rank + world_size, ...``."""

    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} out of range for world_size {self.world_size}")

    def owns(self, index: int) -> bool:
        """Whether item ``index`` (0-based, counted over all ranks) is this rank's."""
        return index % self.world_size == self.rank

    def indices(self, n: int) -> range:
        """This rank's items among ``n``."""
        return range(self.rank, n, self.world_size)


@dataclass(frozen=True)
class Batches:
    """``(batch_size, seq_len)`` batches of ``split`` for one rank; ``seed`` fixes their order."""

    batch_size: int
    seq_len: int
    split: str = "train"
    seed: int = 0
    part: RankPart = field(default_factory=RankPart)

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.seq_len < 1:
            raise ValueError(
                f"batch_size and seq_len must be >= 1, got {self.batch_size}, {self.seq_len}"
            )

    @property
    def tokens_per_batch(self) -> int:
        """Tokens in one batch of this rank (``batch_size * seq_len``)."""
        return self.batch_size * self.seq_len
