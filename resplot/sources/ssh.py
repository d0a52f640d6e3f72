"""Remote stores over SSH: the agent on one long-lived exec channel per host.

Only the transport differs from LocalSource: `_connect()` opens (or reuses) the host's SSH
connection and starts the agent's launcher (reslog/agent/bundle.py: the first interpreter that
fits, or the spec's `#python=`) on an exec channel whose stdin/stdout carry the frames; the
agent's archive goes first on that stdin and runs from memory. Nothing is written on the host,
so no file there can be swapped for another, and a host without SFTP works the same.
Discovery, polling and cursors are AgentSource's, so a reconnect resumes from the cursors and
neither loses nor repeats a point.

Every SSHSource for the same host (same user, port, interpreter, ssh config) shares one
HostLink: one connection, one channel, one agent, requests taken in turn under its lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

import paramiko

from reslog.agent.bundle import MIN_PYTHON, NO_PYTHON, launcher, prepare
from resplot.data.cache import SeriesCache
from resplot.sources.base import PollResult, Progress
from resplot.sources.client import AgentClient, AgentConnectionError
from resplot.sources.remote import RemoteSource
from resplot.sources.spec import SSHSpec
from resplot.ssh.connection import AuthFailed, SSHConnection, SSHError
from resplot.ssh.hostkeys import HostKeyError
from resplot.ssh.options import SSHOptions

__all__ = [
    "HostKeyNotTrusted",
    "HostLink",
    "SSHSource",
]

log = logging.getLogger(__name__)


class HostLink:
    """One host's connection, agent channel and AgentClient, shared by all its sources."""

    def __init__(self, spec: SSHSpec, options: SSHOptions, *, python: str | None) -> None:
        self.spec = spec
        self.python = python  # None: the launcher's search
        self.timeouts = options.timeouts
        self.conn = SSHConnection(spec.host, options, user=spec.user, port=spec.port)
        prepare()  # the agent's compiled code, made while the login waits on the network
        self.lock = threading.RLock()  # one request (poll) on the channel at a time
        self.client: AgentClient | None = None
        self.channel: paramiko.Channel | None = None
        self._stderr = b""
        self.users = 0

    def connect(self) -> AgentClient:
        """The live client, opening the connection, agent and channel as needed."""
        with self.lock:
            if self.client is not None and not self.client.closed and self._channel_ok():
                return self.client
            self.drop()
            self.conn.open()
            chan = self.conn.open_channel(launcher(self.python))
            chan.settimeout(self.timeouts.request)
            self.channel, self._stderr = chan, b""
            # Replies compressed unless the host is this machine (a loopback sshd: zlib over a
            # 13.6 MB reply of fine tiles cost ~0.15 s of the host and laptop for nothing).
            client = _ChannelClient(chan, self, compress=not self.conn.loopback)
            try:
                client.boot()
            except AgentConnectionError:
                self.drop()
                raise
            self.client = client
            return client

    def _channel_ok(self) -> bool:
        chan = self.channel
        return chan is not None and not chan.closed and self.conn.is_open

    def drop(self, client: AgentClient | None = None, *, lost: str | None = None) -> None:
        """Close the channel (and with `lost`, the connection). With `client`, only if that is
        still the current client (another source may already have reconnected)."""
        with self.lock:
            if client is not None and client is not self.client:
                return
            current, self.client = self.client, None
            chan, self.channel = self.channel, None
            if lost:  # first, so the goodbye below fails at once instead of waiting on a window
                self.conn.lose(lost)
            if current is not None:
                with contextlib.suppress(Exception):
                    current.close()
            if chan is not None:
                with contextlib.suppress(Exception):
                    chan.close()
            if lost:
                self.conn.close()

    def close(self) -> None:
        with self.lock:
            self.drop()
            self.conn.close()

    def abort(self, reason: str) -> None:
        """Without the lock: end the connection so a request blocked on it fails now."""
        self.conn.lose(reason)

    def drain_stderr(self) -> None:
        """Keep the last 2 KB of the agent's stderr. Reading it also returns its bytes to the
        channel window, which stdout shares: unread stderr could otherwise stall the replies."""
        chan = self.channel
        if chan is None:
            return
        with contextlib.suppress(Exception):
            while chan.recv_stderr_ready():
                self._stderr = (self._stderr + chan.recv_stderr(65536))[-2000:]

    def stderr_tail(self) -> str:
        self.drain_stderr()
        return self._stderr.decode("utf-8", "replace").strip()


class _ChannelClient(AgentClient):
    """An AgentClient over the channel's streams that explains a dead agent."""

    def __init__(self, chan: paramiko.Channel, link: HostLink, *, compress: bool = True) -> None:
        super().__init__(_ChannelReader(chan), _ChannelWriter(chan), compress=compress)
        self.chan, self.link = chan, link

    last_error: BaseException | None = None

    def receive(self, rid: int):
        reply = super().receive(rid)
        if self.chan.recv_stderr_ready():
            self.link.drain_stderr()
        return reply

    def explain(self, exc: AgentConnectionError) -> str:
        self.last_error = exc.__cause__  # a TimeoutError costs the whole connection (close())
        label = self.link.conn.config.label
        if isinstance(exc.__cause__, TimeoutError):
            return f"{label}: no answer from the agent in {self.link.timeouts.request:.0f} s"
        if not self.link.conn.is_open:
            reason = self.link.conn.lost_reason or "closed by the host or the network"
            return f"{label}: connection lost ({reason})"
        # The transport lives, so the agent itself ended: its exit status and stderr say why.
        self.chan.status_event.wait(0.5)  # the exit status follows EOF closely
        detail = self.link.stderr_tail()
        status = self.chan.recv_exit_status() if self.chan.exit_status_ready() else None
        if status == NO_PYTHON:
            return no_python_message(label, self.link.python, detail)
        if status == -1:  # an exit signal rather than a status
            extra = " (the agent was killed by a signal)"
        else:
            extra = f" (agent exited with {status})" if status is not None else ""
        return f"{label}: {exc}{extra}" + (f": {detail}" if detail else "")


def no_python_message(label: str, python: str | None, detail: str) -> str:
    """What a host without a usable interpreter is told (the launcher's NO_PYTHON exit)."""
    need = ".".join(map(str, MIN_PYTHON))
    what = f"`{python}`" if python else "no interpreter"
    return (
        f"{label}: {what} cannot run the reslog agent, which needs Python >= {need} "
        f"({detail or 'no reason given'}); name one with #python=/path/to/python"
    )


class _ChannelReader:
    """read(n) → exactly n bytes unless EOF. paramiko's own makefile() grows an immutable bytes
    buffer chunk by chunk, quadratic on a multi-megabyte batch; this collects into a bytearray."""

    def __init__(self, chan: paramiko.Channel) -> None:
        self.chan = chan

    def read(self, n: int) -> bytes:
        first = self.chan.recv(n)
        if len(first) == n or not first:
            return first
        buf = bytearray(first)
        while len(buf) < n:
            data = self.chan.recv(min(n - len(buf), 4 << 20))
            if not data:
                break
            buf += data
        return bytes(buf)

    def close(self) -> None:
        pass  # the channel belongs to the HostLink


class _ChannelWriter:
    def __init__(self, chan: paramiko.Channel) -> None:
        self.chan = chan

    def write(self, data: bytes) -> int:
        self.chan.sendall(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


_links: dict[tuple, HostLink] = {}
_links_lock = threading.Lock()


def _acquire_link(key: tuple, make: Callable[[], HostLink]) -> HostLink:
    with _links_lock:
        link = _links.get(key)
        if link is None:
            link = _links[key] = make()
        link.users += 1
        return link


def _release_link(key: tuple, link: HostLink) -> None:
    with _links_lock:
        link.users -= 1
        if link.users > 0:
            return
        if _links.get(key) is link:
            del _links[key]
    link.close()


class HostKeyNotTrusted(AuthFailed):
    """The host's key is unknown and was refused, or has changed: a person must decide, so the
    poller shows it like a refused login (auth_failed) and retries slowly."""


class SSHSource(RemoteSource):
    """Stores on a remote host, e.g. `gpu1:runs/*.db` or `ssh://me@gpu1:2222/data/reslog.db`.

    Errors come out as the poller expects: AgentConnectionError for anything worth retrying
    soon (refused or cut connection, timeout, dead agent), AuthFailed (incl. HostKeyNotTrusted)
    for what needs a person, StoreError for store problems.
    """

    def _attach(self, options: SSHOptions) -> None:
        spec = self.parsed
        self._key = (spec.host, spec.user, spec.port, self.python, str(options.ssh_config))
        self.link = _acquire_link(self._key, lambda: HostLink(spec, options, python=self.python))
        self._released = False
        self._polling = False
        self._lock = self.link.lock  # one request at a time on the host's shared channel

    @property
    def rtt_ms(self) -> float | None:
        client = self.link.client
        return client.rtt_ms if client is not None else None

    # -- transport ------------------------------------------------------------------------
    def _connect(self) -> AgentClient:
        try:
            return self.link.connect()
        except HostKeyError as exc:
            raise HostKeyNotTrusted(str(exc)) from exc
        except AuthFailed:  # refused: the poller retries slowly (not an SSHError to retry soon)
            raise
        except SSHError as exc:  # ConnectFailed, ConnectionLost, SSHConfigError
            raise AgentConnectionError(str(exc)) from exc
        except (OSError, EOFError, paramiko.SSHException) as exc:
            self.link.drop(lost=f"{exc or type(exc).__name__}")
            raise AgentConnectionError(f"{self.label}: {exc or type(exc).__name__}") from exc

    def _disconnect(self) -> None:
        client, self.client = self.client, None
        if client is None:
            return
        # A timed-out request or a dead transport: the whole connection goes, the next poll
        # reconnects; a dead agent on a live connection only costs its channel.
        lost = None
        if not self.link.conn.is_open:
            lost = self.link.conn.lost_reason or "closed"
        elif isinstance(getattr(client, "last_error", None), TimeoutError):
            lost = f"no answer in {self.link.timeouts.request:.0f} s"
        self.link.drop(client, lost=lost)

    def poll(self, cache: SeriesCache, progress: Progress | None = None) -> PollResult:
        with self.link.lock:
            if self.client is not None and self.client is not self.link.client:
                self.client = None  # another source on this host reconnected the shared link
            self._polling = True
            try:
                return super().poll(cache, progress)
            except (AuthFailed, AgentConnectionError):  # both are OSErrors: pass them on
                raise
            except (OSError, EOFError, paramiko.SSHException) as exc:
                # Anything the transport throws past the agent client: retry soon.
                self._disconnect()
                raise AgentConnectionError(f"{self.label}: {exc or type(exc).__name__}") from exc
            finally:
                self._polling = False

    def close(self) -> None:
        """Idempotent; from another thread it also unblocks a poll stuck in I/O."""
        if self.link.lock.acquire(timeout=0.5):
            try:
                self._disconnect()
            finally:
                self.link.lock.release()
        elif self._polling:
            self.link.abort("closed while a request was waiting")
        if not self._released:
            self._released = True
            _release_link(self._key, self.link)

    def ping(self) -> float:
        """One hello round trip in ms (connects if needed)."""
        with self.link.lock:
            client = self.connect()
            t0 = time.perf_counter()
            client.call("hello")
            return (time.perf_counter() - t0) * 1000.0
