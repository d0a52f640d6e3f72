"""The window's heap gives back what it frees (resplot/ui/heap.py): in a fresh process, after
a large array was freed once (glibc then keeps arrays of up to that size in its heap), a 4 MB
array freed goes back to the system only with the thresholds fixed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import sys
import numpy as np
from resplot.ui.heap import tune_heap

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))

big = np.ones((16 << 20) // 8)
del big  # glibc's mmap threshold rises to 16 MB, its trim threshold to 32 MB
if sys.argv[1] == "tuned":
    assert tune_heap()
a = np.ones((4 << 20) // 8)
held = rss()
del a
print((held - rss()) / 2**20)
"""


def _freed_mb(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_large_array_freed_goes_back_to_the_system_once_the_heap_is_tuned():
    assert _freed_mb("plain") < 1.0  # kept by glibc: the RSS would only grow
    assert _freed_mb("tuned") >= 3.9
