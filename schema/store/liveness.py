"""Is a run's process still alive? Answered on the host it runs on, from /proc, in microseconds.

A writer records where it runs (`host_identity()`: the kernel's boot id and the pid namespace)
and which process it is (`process_identity(pid)`: the process's start time in clock ticks since
boot). A reader on the same host and in the same pid namespace can then tell at once whether
that process still exists; the start time rules out a pid reused by another process. Anywhere
else (another machine, another container, a kernel without /proc) the answer is "cannot tell",
and readers fall back to the heartbeat rule (schema/store/status.py).

Standard library only: the agent ships a copy of this file (reslog/agent/bundle.py).
"""

from __future__ import annotations

import functools
import os

BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


# A process never changes boot or pid namespace: /proc is read once. (No functools.cache: the
# agent runs this file under Python 3.8.)
@functools.lru_cache(maxsize=None)
def host_identity() -> str | None:
    """This boot of this kernel, seen from this pid namespace; None where /proc cannot say."""
    boot = _read(BOOT_ID)
    if not boot:
        return None
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot.strip()}/{namespace}"


def process_identity(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot); None when there is no such
    process or /proc cannot say."""
    stat = _read(f"/proc/{int(pid)}/stat")
    if not stat:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    if fields[0] == "Z":  # a zombie has exited; its parent has not reaped it yet
        return None
    return fields[19]


def is_alive(host: str | None, pid: int | None, process: str | None) -> bool | None:
    """True: the process runs here; False: it is gone; None: cannot tell from this host."""
    if not host or pid is None or not process:
        return None
    here = host_identity()
    if here is None or here != host:
        return None
    return process_identity(pid) == process
