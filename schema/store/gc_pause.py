"""Python's cyclic garbage collector held off while a read makes many short-lived objects.

A read of raw points makes a tuple a row (a training page's fine tiles: 0.8M; a history range:
up to 64 * samples) and no reference cycles. Each 700 allocations start a collection pass, and
the passes over a large heap (a notebook's pandas, the viewer, the agent's reply) cost more
than the fold of those rows: 2.2 s against 1.2 s for the fine tiles, 85 ms against 73 ms for a
63,000-point history. Reference counting frees the rows all the same. Held by a request's
reads: the agent's (tile_workers.read_all), the PostgreSQL source's, history()'s; and by the
writer's flush (reslog/training/writer.py), whose passes held the GIL from the training thread.

Standard library only, Python 3.8 syntax: this file ships inside the agent's archive.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside the block (as it was after it: a caller's own gc.disable()
    stays)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
