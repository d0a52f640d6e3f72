"""Stragglers: the rank whose own work is slower than the others' for a sustained stretch.

Fed each rank's phase seconds step by step (schema/rules/ranks.py: `time/<phase>` of every rank's
run), the detector judges a step once every rank has logged it. For each own-work phase and rank it
takes the rank's excess over the median of the *other* ranks at that step (robust to one slow
rank, and meaningful with two), and calls it slow when the excess is over a threshold: at least
`min_excess_s`, and at least `rel_excess` of the median step time (a 10 % slower rank costs
every rank 10 % under synchronous data parallelism). A rank is named when at least `sustained` of
its last `window` judged steps were slow in one phase, and said recovered when at most
1 - `sustained` of them are. One slow step is jitter; a stretch is a straggler.

Waiting is never a rank's own work: the ranks that wait for a slow one in the all-reduce show it
in `comm` (schema/rules/ranks.py WAIT_PHASES) and are not named; the named rank's message says how
long the others waited for it.

Stdlib only; `reslog watch` feeds it new points as they come, `reslog show` and resplot a job's
history, and they name the same ranks.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from statistics import median

from schema.rules.ranks import STEP, own_work, rank_label

MAX_PENDING_STEPS = 4096  # steps waiting for a rank that may never log them (it died)


@dataclass(frozen=True)
class StragglerRule:
    window: int = 20  # judged steps a verdict looks back over
    sustained: float = 0.75  # fraction of them that must be slow
    min_excess_s: float = 0.005  # never slow by less than this...
    rel_excess: float = 0.10  # ...or than this fraction of the median step time
    # A step missing from some rank is judged without it once this many newer steps are complete
    # (a rank that stopped logging, or logs every k-th step only).
    lag: int = 8

    def __post_init__(self) -> None:
        if self.window < 2 or not 0.5 <= self.sustained <= 1.0:
            raise ValueError(f"StragglerRule: window >= 2 and 0.5 <= sustained <= 1, got {self}")


@dataclass(frozen=True)
class Straggler:
    rank: int
    host: str
    phase: str
    since: int  # first step of the slow stretch
    found_at: int  # the step whose judgement named it
    excess_s: float  # median excess over the other ranks on its slow steps
    others_wait_s: float | None = None  # how much longer the others waited in comm meanwhile
    until: int | None = None  # its last slow step, once it recovered

    def message(self) -> str:
        where = rank_label(self.rank, self.host)
        text = f"{where}: {self.phase} +{_ms(self.excess_s)} from step {self.since:,}"
        if self.until is not None:
            text += f" to step {self.until:,}"
        if self.others_wait_s is not None and self.others_wait_s > 0:
            text += f" (the other ranks wait {_ms(self.others_wait_s)} in comm)"
        return text


def _ms(seconds: float) -> str:
    ms = seconds * 1000.0
    return f"{ms:,.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def _median_without(ordered: list[float], i: int) -> float:
    """Median of the sorted `ordered` with its i-th entry left out (len >= 2)."""
    n = len(ordered) - 1

    def at(k: int) -> float:
        return ordered[k + 1] if k >= i else ordered[k]

    mid = n // 2
    return at(mid) if n % 2 else (at(mid - 1) + at(mid)) / 2.0


class _Track:
    """One (rank, phase): its last `window` judgements and, while named, the finding."""

    __slots__ = ("active", "index", "last_slow", "marks", "slow_excess", "waits")

    def __init__(self, window: int) -> None:
        self.marks: deque[tuple[int, bool, float, float | None]] = deque(maxlen=window)
        self.active: Straggler | None = None
        self.index = -1  # of the active finding in StragglerDetector.found
        self.slow_excess: list[float] = []
        self.waits: list[float] = []
        # The newest slow step while named: with a short window (bucket means, zoomed out)
        # the rule recovers only once every mark is fast, when the last slow one has left it.
        self.last_slow = -1


class StragglerDetector:
    """Names stragglers among the ranks of one job; `add()` returns what each call changed."""

    def __init__(self, hosts: dict[int, str], rule: StragglerRule | None = None) -> None:
        self.hosts = dict(hosts)  # every rank of the job -> its host
        self.rule = rule or StragglerRule()
        self.found: list[Straggler] = []  # every finding, in the order named
        self.judged_to: int | None = None  # the newest judged step
        self._pending: dict[int, dict[int, dict[str, float]]] = {}
        self._tracks: dict[tuple[int, str], _Track] = {}

    def add(self, rank: int, step: int, phases: dict[str, float]) -> list[Straggler]:
        """One rank's phase seconds at one step (`step` among them if known). Returns the
        stragglers named (`until` None), or recovered (`until` set), by the steps this completes."""
        if self.judged_to is not None and step <= self.judged_to:
            return []  # late for a step already judged without it
        self.hosts.setdefault(rank, "")
        self._pending.setdefault(step, {})[rank] = phases
        return self._judge_ready()

    def add_many(self, rows: list[tuple[int, int, dict[str, float]]]) -> list[Straggler]:
        changed: list[Straggler] = []
        for rank, step, phases in rows:
            changed += self.add(rank, step, phases)
        return changed

    def add_marks(
        self, rank: int, phase: str, marks: Iterable[tuple[int, bool, float, float | None]]
    ) -> list[Straggler]:
        """Judge one rank's phase from its marks, (step, slow, excess, the rank's comm excess
        or None) in step order, as `_judge` makes them: for a reader that works out a job's
        excesses over its whole history at once (resplot's Ranks page, with numpy) and leaves
        the verdicts to this rule. Returns the findings named or recovered."""
        track = self._track(rank, phase)
        self.hosts.setdefault(rank, "")
        changed: list[Straggler] = []
        for mark in marks:
            track.marks.append(mark)
            found = self._verdict(track, rank, phase, mark[0])
            if found is not None:
                changed.append(found)
        return changed

    def _track(self, rank: int, phase: str) -> _Track:
        track = self._tracks.get((rank, phase))
        if track is None:
            track = self._tracks[(rank, phase)] = _Track(self.rule.window)
        return track

    def finish(self) -> list[Straggler]:
        """Judge every step still waiting for a rank (the job ended, or a reader's history)."""
        changed: list[Straggler] = []
        for step in sorted(self._pending):
            changed += self._judge(step, self._pending.pop(step))
        return changed

    def retire(self, rank: int) -> list[Straggler]:
        """The rank's run ended: its steps are judged without it from now on."""
        self.hosts.pop(rank, None)
        for rows in self._pending.values():
            rows.pop(rank, None)
        return self._judge_ready()

    def _judge_ready(self) -> list[Straggler]:
        """Judge, oldest first, the steps every rank has logged. A step some rank skipped waits
        until `lag` newer steps are complete; past MAX_PENDING_STEPS the oldest go regardless."""
        everyone = len(self.hosts)
        steps = sorted(self._pending)
        complete = [s for s in steps if len(self._pending[s]) >= everyone]
        changed: list[Straggler] = []
        for i, step in enumerate(steps):
            rows = self._pending[step]
            overflow = len(steps) - i > MAX_PENDING_STEPS
            if len(rows) < everyone and not overflow:
                later = len(complete) - bisect.bisect_right(complete, step)
                if later < self.rule.lag:
                    break  # keep order: nothing newer is judged before this one
            del self._pending[step]
            changed += self._judge(step, rows)
        return changed

    def _judge(self, step: int, rows: dict[int, dict[str, float]]) -> list[Straggler]:
        self.judged_to = step if self.judged_to is None else max(self.judged_to, step)
        if len(rows) < 2:
            return []
        rule = self.rule
        step_times = [
            r[STEP] if STEP in r else sum(v for k, v in r.items() if math.isfinite(v))
            for r in rows.values()
        ]
        finite = [t for t in step_times if math.isfinite(t)]
        threshold = max(rule.min_excess_s, rule.rel_excess * (median(finite) if finite else 0.0))
        waits = self._excess(rows, "comm") if any("comm" in r for r in rows.values()) else {}
        phases = own_work({p for r in rows.values() for p in r})
        changed: list[Straggler] = []
        for phase in phases:
            for rank, excess in self._excess(rows, phase).items():
                track = self._track(rank, phase)
                wait = waits.get(rank)
                track.marks.append((step, excess > threshold, excess, wait))
                found = self._verdict(track, rank, phase, step)
                if found is not None:
                    changed.append(found)
        return changed

    @staticmethod
    def _excess(rows: dict[int, dict[str, float]], phase: str) -> dict[int, float]:
        """rank -> its `phase` seconds minus the median of the other ranks' (those that have it)."""
        have = [(v[phase], r) for r, v in rows.items() if math.isfinite(v.get(phase, math.nan))]
        if len(have) < 2:
            return {}
        have.sort()
        ordered = [v for v, _ in have]
        return {r: v - _median_without(ordered, i) for i, (v, r) in enumerate(have)}

    def _verdict(self, track: _Track, rank: int, phase: str, step: int) -> Straggler | None:
        rule = self.rule
        marks = track.marks
        slow = sum(1 for m in marks if m[1])
        if track.active is None:
            if len(marks) < rule.window or slow < rule.sustained * rule.window:
                return None
            entries = list(marks)
            sustained = [
                i
                for i, m in enumerate(entries)
                if m[1] and sum(e[1] for e in entries[i:]) >= rule.sustained * (len(entries) - i)
            ]
            # The stretch opens at a slow step that the steps after it keep mostly slow: one
            # jittery step a few steps before the fault (a rank stalled by a busy machine) is
            # not its start (a fault from step 110 was said to start at 101-108 under load).
            start = next((i for i in sustained if _mostly_slow(entries, i)), sustained[0])
            since = entries[start][0]
            track.slow_excess = [m[2] for m in entries if m[1] and m[0] >= since]
            track.last_slow = max(m[0] for m in entries if m[1])
            track.waits = [-m[3] for m in entries if m[1] and m[0] >= since and m[3] is not None]
            found = Straggler(
                rank,
                self.hosts.get(rank, ""),
                phase,
                since=since,
                found_at=step,
                excess_s=median(track.slow_excess),
                others_wait_s=median(track.waits) if track.waits else None,
            )
            track.active, track.index = found, len(self.found)
            self.found.append(found)
            return found
        last = marks[-1]
        if last[1]:
            track.last_slow = last[0]
            track.slow_excess.append(last[2])
            if last[3] is not None:
                track.waits.append(-last[3])
        if slow > (1.0 - rule.sustained) * len(marks):
            return None
        done = replace(
            track.active,
            until=max(track.last_slow, track.active.since),
            excess_s=median(track.slow_excess),
            others_wait_s=median(track.waits) if track.waits else None,
        )
        track.active = None
        self.found[track.index] = done  # the finding as it ended
        return done


def _mostly_slow(entries, i: int) -> bool:
    """Every run of judged steps from entries[i] on is at least half slow."""
    slow = 0
    for n, entry in enumerate(entries[i:], 1):
        slow += entry[1]
        if 2 * slow < n:
            return False
    return True
