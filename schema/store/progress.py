"""Progress of a long job on a store (the upgrade's conversion, a compaction), said to a
callback as (done, total)."""

from __future__ import annotations

from collections.abc import Callable


class Ticker:
    """tick(n): n more items done, said to `progress` (None: to nobody) as (done, total); a
    count past `total` (an estimate) raises the total with it, so it never shows over 100 %."""

    def __init__(self, progress: Callable[[int, int], None] | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def __call__(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(min(self.done, self.total), max(self.total, self.done))

    def finish(self) -> None:
        """Say the job whole where the count fell short (rows deleted meanwhile)."""
        if self.progress is not None and self.done < self.total:
            self.progress(self.total, self.total)
