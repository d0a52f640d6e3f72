"""What every source is, for the poller and the window: its state, per-store cursors, what a
poll returns, and the Source interface. The one implementation that talks to a reslog agent
(over a subprocess, SSH or the system ssh binary) is resplot.sources.agent.AgentSource.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from resplot.data.cache import SeriesCache
from resplot.data.model import Event, RunRef
from resplot.sources.spec import Spec
from resplot.ssh.errors import AuthFailed

STATES = ("connecting", "live", "retrying", "auth_failed", "error")
FROM_THE_END = -1  # a points cursor asking the agent to start at the store's newest point


@dataclass
class SourceState:
    """A source's health as the GUI shows it (sources panel, status bar)."""

    state: str  # connecting | live | retrying | auth_failed | error
    rtt_ms: float | None = None
    error: str | None = None
    next_retry_s: float | None = None


@dataclass
class StoreCursor:
    """How far one store has been read. Advanced only together with applying a reply."""

    points: int = FROM_THE_END
    events: int = 0
    keys: int = 0
    runs_fp: str | None = None  # fingerprint of the runs' slow-changing columns
    beats_fp: str | None = None  # fingerprint of (status, heartbeat, ended_at)


@dataclass
class PollResult:
    """What one poll (or one batch of it) changed in the cache."""

    runs_changed: bool = False
    refs: set[RunRef] = field(default_factory=set)  # runs with new points or tiles
    events: list[Event] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # per-store problems (others still read)
    rows: int = 0  # live points applied
    tiles: int = 0  # tiles put in the cache

    def merge(self, other: PollResult) -> None:
        self.runs_changed |= other.runs_changed
        self.refs |= other.refs
        self.events.extend(other.events)
        self.errors.extend(other.errors)
        self.rows += other.rows
        self.tiles += other.tiles


Progress = Callable[[PollResult], None]


class Source(ABC):
    """A place runs are read from. poll() does blocking I/O: call it from a worker thread."""

    def __init__(self, spec: Spec, label: str) -> None:
        self.spec = spec
        self.label = label

    @abstractmethod
    def poll(self, cache: SeriesCache, progress: Progress | None = None) -> PollResult:
        """Read everything new into `cache`, and the tiles the cache wants; raises on a
        connection or store failure. `progress` gets each change as it is applied."""

    @abstractmethod
    def reader(self, ref: RunRef):
        """An object with `scan(key, start, stop)` over one run's raw points (exports); it
        does blocking I/O, so a worker thread uses it."""

    @property
    def rtt_ms(self) -> float | None:
        return None

    def close(self) -> None:  # noqa: B027 - sources without a connection have nothing to do
        """Release connections; the next poll reconnects. Idempotent."""


__all__ = [
    "FROM_THE_END",
    "STATES",
    "AuthFailed",
    "PollResult",
    "Progress",
    "Source",
    "SourceState",
    "StoreCursor",
]
