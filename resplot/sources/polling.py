"""Sources for headless commands (`resplot snapshot`, `resplot export`, tests): opened, polled
synchronously until they answer, asked again for the tiles the charts want, closed. No Qt.

Connection failures retry with capped backoff until the timeout; a store problem (missing, not a
store, newer schema) or refused credentials raise at once, with the source named.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from resplot.data.cache import SeriesCache
from resplot.data.model import RunRef
from resplot.sources import open_source, unique_label
from resplot.sources.base import AuthFailed, PollResult, Source
from resplot.sources.client import AgentConnectionError
from resplot.sources.spec import Spec
from resplot.ssh.options import SSHOptions
from schema.store.errors import StoreError

BACKOFF_FIRST_S = 1.0
BACKOFF_CAP_S = 30.0


def backoff_s(failures: int, cap: float = BACKOFF_CAP_S) -> float:
    """1, 2, 4, ... seconds, capped: the delay before retry number `failures`."""
    return min(cap, BACKOFF_FIRST_S * 2 ** max(0, failures - 1))


class Loaded:
    """Sources read into one cache; a context manager that closes them."""

    def __init__(
        self,
        specs: Iterable[Spec],
        cache: SeriesCache | None = None,
        timeout: float = 60,
        ssh: SSHOptions | None = None,
    ) -> None:
        self.cache = cache if cache is not None else SeriesCache()
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.sources: dict[str, Source] = {}
        try:
            for spec in specs:
                source = open_source(spec, ssh)
                source.label = unique_label(source.label, self.sources)
                self.sources[source.label] = source
                self._poll(spec, source)
        except BaseException:
            self.close()
            raise

    def _poll(self, spec: Spec, source: Source) -> PollResult:
        failures = 0
        while True:
            try:
                return source.poll(self.cache)
            except (StoreError, AuthFailed) as exc:
                raise type(exc)(f"{spec}: {exc}") from exc
            except (AgentConnectionError, OSError) as exc:
                failures += 1
                delay = backoff_s(failures)
                if time.monotonic() + delay > self.deadline:
                    raise TimeoutError(f"{spec}: gave up after {self.timeout:g} s: {exc}") from exc
                time.sleep(delay)

    def fetch(self) -> set[RunRef]:
        """Poll every source again: new points, and the tiles the charts asked for; the runs
        that got either."""
        refs: set[RunRef] = set()
        for source in self.sources.values():
            refs |= self._poll(source.spec, source).refs
        return refs

    def reader(self, ref: RunRef):
        """The raw-point reader of a run (exports)."""
        return self.sources[ref.source].reader(ref)

    def close(self) -> None:
        for source in self.sources.values():
            source.close()

    def __enter__(self) -> Loaded:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load_sources(
    specs: Iterable[Spec], cache: SeriesCache | None = None, timeout: float = 60
) -> SeriesCache:
    """Every source's runs, keys, events and series summaries, read once into a cache."""
    with Loaded(specs, cache, timeout) as loaded:
        return loaded.cache
