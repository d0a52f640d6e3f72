"""The window process's heap: what glibc keeps of what was freed.

A long session frees a great deal: tiles evicted, figures of released pages, pictures of a
page at each full draw, arrays of every refresh. glibc keeps freed memory for reuse, and two of
its defaults let a long-running numpy program's resident size climb: its mmap threshold follows
the largest block freed (up to 32 MB), so after a few large arrays are freed, arrays of up to
that size come from the heap, where one block still in use keeps all the free pages below it;
and it gives the top of the heap back only past twice that threshold (64 MB). Fixed thresholds
(`tune_heap`) keep large arrays in mappings of their own, returned when freed, and the heap's
free top returned past a few MB; `trim_heap` returns the free pages inside the heap too.
Elsewhere (macOS, musl) the allocator returns memory its own way and both do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
MMAP_THRESHOLD = 1 << 20  # blocks this large get a mapping of their own
TRIM_THRESHOLD = 8 << 20  # free memory this large at the heap's top goes back


@functools.cache
def _libc():
    # find_library runs ldconfig (or a compiler) to find it: once a session.
    return ctypes.CDLL(ctypes.util.find_library("c"))


def tune_heap() -> bool:
    """Fix glibc's mmap and trim thresholds (the module's docstring); False where there is no
    glibc to tune."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        mallopt = _libc().mallopt
        return bool(
            mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        )
    return False


def trim_heap() -> None:
    """Hand the freed heap back to the system: glibc keeps what thousands of small artists
    freed (~100 MB after the All page) in its arenas, so the RSS would not fall without it."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        _libc().malloc_trim(0)
