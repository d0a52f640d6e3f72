"""Reading many settled tiles in forked worker processes, beside the agent's own reads.

One agent process reads ~0.5M bucket rows a second (sqlite3 making a tuple of 17 values a row,
on one core), and a system page of 8 runs x 74 keys asks for ~1M of them. A tile is *settled*
when its step range ends at or before its series' last step in the reply's snapshot: new points
land at that step or later, and a restart (the only thing that rewrites older buckets) reaches
the client as live points, which make it drop that series' tiles. A tile read from raw points
(raw, or a fine level folded from them) is settled too: it reads only the points with an id up
to the reply's `high` (ids grow with every commit). So a settled tile reads the same in any
later snapshot, and other processes may read it over connections of their own, while the
reply's own snapshot still reads every tile that can change. Fine tiles fold ~1 µs a point
(a view between 4 points and 128 steps a pixel reads every one of its raw points): the system
page of 8 runs x 66 keys of 20,000 steps holds 2.6M of them.

Standard library only, Python 3.8 syntax (part of the agent archive). Where `os.fork` is
missing (Windows), or RESLOG_AGENT_WORKERS=0 on the host, everything is read in-process.
"""

from __future__ import annotations

import os
import struct
import sys
import threading

from schema.store.gc_pause import gc_paused

MIN_JOBS = 32  # fewer tiles than this are not worth a fork
MAX_WORKERS = 3
_LENGTH = struct.Struct("<q")  # each tile's bytes on a worker's pipe, after its length


def worker_count() -> int:
    """Worker processes to fork for a large read: RESLOG_AGENT_WORKERS if set, else one less
    than the CPUs this process may use, at most MAX_WORKERS."""
    if not hasattr(os, "fork"):
        return 0
    value = os.environ.get("RESLOG_AGENT_WORKERS", "")
    if value.strip():
        try:
            return max(0, int(value))
        except ValueError:
            _say(f"RESLOG_AGENT_WORKERS={value!r} is not a number; reading in one process")
            return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cpus = os.cpu_count() or 1
    return max(0, min(MAX_WORKERS, cpus - 1))


def read_all(jobs, read, connect, settled, workers: int, group=None) -> list:
    """`read(cursor, job) -> bytes` of every job, in order.

    Jobs for which `settled[i]` is true may be read by up to `workers` forked processes, each
    in a read transaction on a connection from `connect()`; the rest, and a first share of the
    settled ones, are read here with `read(None, job)` (the caller's own snapshot). A worker
    that fails has its share read here instead, and says so on stderr: the reply is the same.
    `group(job)`: jobs of one group go to one process (the groups dealt out in turn), else
    the jobs themselves are.

    Python's cyclic garbage collector is off meanwhile, in the workers too
    (schema/store/gc_pause.py)."""
    with gc_paused():
        return _read_all(jobs, read, connect, settled, workers, group)


def _shares(jobs, spread: list, parts: int, group) -> list:
    """`spread` (indices into jobs) dealt into `parts` shares, a group at a time."""
    if group is None:
        return [spread[k::parts] for k in range(parts)]
    turn: dict = {}
    shares: list = [[] for _ in range(parts)]
    for i in spread:
        shares[turn.setdefault(group(jobs[i]), len(turn) % parts)].append(i)
    return shares


def _read_all(jobs, read, connect, settled, workers: int, group=None) -> list:
    out = [None] * len(jobs)
    spread = [i for i, ok in enumerate(settled) if ok]
    if workers < 1 or len(spread) < MIN_JOBS:
        return [read(None, job) for job in jobs]
    shares = _shares(jobs, spread, workers + 1, group)
    here = set(shares[0])
    forked = []  # (pid, read end, share)
    for share in shares[1:]:
        if not share:
            continue
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            os.close(r)
            _work(w, [jobs[i] for i in share], read, connect)
        os.close(w)
        forked.append((pid, r, share))
    # Threads only after the last fork: a forked child gets only the forking thread.
    received = [bytearray() for _ in forked]
    drains = [
        threading.Thread(target=_drain, args=(r, buf), daemon=True)
        for (_pid, r, _share), buf in zip(forked, received)
    ]
    for t in drains:
        t.start()
    statuses = []
    try:
        for i, job in enumerate(jobs):
            if not settled[i] or i in here:
                out[i] = read(None, job)
    finally:  # a failed read here (a store error) still reaps the workers
        for t in drains:
            t.join()
        for pid, r, _share in forked:
            os.close(r)
            statuses.append(os.waitpid(pid, 0)[1])
    for (_pid, _r, share), data, status in zip(forked, received, statuses):
        parts = _split(data, len(share)) if status == 0 else None
        if parts is None:
            _say(f"a tile worker failed (status {status}); read its {len(share)} tiles here")
            parts = [read(None, jobs[i]) for i in share]
        for i, part in zip(share, parts):
            out[i] = part
    return out


def _work(fd: int, jobs: list, read, connect) -> None:
    """A worker's whole life: read, write each tile's length and bytes, exit without running
    the parent's exit handlers or flushing its buffers (stdout is the agent's wire)."""
    status = 1
    try:
        conn = connect()
        cur = conn.cursor()
        cur.execute("BEGIN")
        with os.fdopen(fd, "wb") as pipe:
            for job in jobs:
                data = read(cur, job)
                pipe.write(_LENGTH.pack(len(data)))
                pipe.write(data)
        status = 0
    except BaseException:
        pass  # the parent reads this share itself and says so
    finally:
        os._exit(status)


def _drain(fd: int, buf: bytearray) -> None:
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return
        buf += chunk


def _split(data: bytearray, count: int):
    """The `count` tiles of a worker's output; None when it is not exactly that."""
    parts, at = [], 0
    view = memoryview(data)
    for _ in range(count):
        if at + _LENGTH.size > len(data):
            return None
        (n,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size
        if n < 0 or at + n > len(data):
            return None
        parts.append(bytes(view[at : at + n]))
        at += n
    return parts if at == len(data) else None


def _say(text: str) -> None:
    print(f"reslog agent: {text}", file=sys.stderr, flush=True)
