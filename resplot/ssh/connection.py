"""One SSH connection to a host (through its ProxyJump chain): open, exec, sftp, keepalive, close.

Built on paramiko.Transport rather than SSHClient for control over every step: our own socket
with TCP_NODELAY (paramiko leaves Nagle on, ~40 ms per small request), separate connect / banner
/ auth timeouts, host keys checked by resplot.ssh.hostkeys before any authentication, keys from
ssh-agent and key files, and a keepalive watchdog that declares the connection lost after N
unanswered keepalives (asyncssh's rule) by closing it, which wakes every blocked reader.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import select
import socket
import subprocess
import threading
import time
from dataclasses import replace

import paramiko

from resplot.ssh.auth import AuthFailed, LoginDropped, authenticate
from resplot.ssh.config import (
    HostConfig,
    SSHConfigError,
    SSHError,
    resolve_chain,
    resolve_host,
)
from resplot.ssh.hostkeys import (
    HostKeyChanged,
    HostKeyError,
    HostKeyRejected,
    HostKeyUnknown,
    KnownHosts,
)
from resplot.ssh.options import SSHOptions
from resplot.ssh.prompts import Secrets
from resplot.ssh.proxy import ProxyCommandSocket

__all__ = [
    "AuthFailed",
    "ConnectFailed",
    "ConnectionLost",
    "HostKeyChanged",
    "HostKeyError",
    "HostKeyRejected",
    "HostKeyUnknown",
    "RequestTimeout",
    "SSHConfigError",
    "SSHConnection",
    "SSHError",
]

log = logging.getLogger(__name__)

WINDOW_SIZE = 8 << 20
MAX_PACKET_SIZE = 256 << 10


class ConnectFailed(SSHError):
    """No SSH session could be set up: DNS, TCP, the jump host, or the handshake failed."""


class ConnectionLost(SSHError):
    """An open connection stopped answering (keepalives unanswered, channel closed, reset)."""


class RequestTimeout(ConnectionLost):
    """One request got no answer in time; the connection is treated as lost."""


def tcp_connect(
    host: str, port: int, timeout: float, cancel: threading.Event | None = None
) -> socket.socket:
    """A connected socket; `cancel` set from another thread ends the wait at once (a host
    that drops SYNs would otherwise hold a quitting resplot for the whole connect timeout)."""
    if cancel is None:
        sock = socket.create_connection((host, port), timeout=timeout)
    else:
        sock = _cancellable_connect(host, port, timeout, cancel)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.settimeout(None)  # paramiko's reader thread polls with its own timeout
    return sock


def _cancellable_connect(
    host: str, port: int, timeout: float, cancel: threading.Event
) -> socket.socket:
    deadline = time.monotonic() + timeout
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _name, addr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(addr)
            while code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY):
                if cancel.is_set():
                    raise ConnectionAbortedError("connection attempt cancelled")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("timed out")
                _r, writable, _x = select.select([], [sock], [], min(left, 0.1))
                if writable:
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise OSError(code, os.strerror(code))
            sock.setblocking(True)
            return sock
        except ConnectionAbortedError:
            sock.close()
            raise
        except OSError as exc:
            sock.close()
            error = exc
    raise error


class SSHConnection:
    """A lazily opened SSH connection; `close()` is idempotent, `open()` reconnects after it.

    `host` is an ssh config alias or host name; `user`/`port` beat the config like `ssh -l/-p`.
    `options` (resplot.ssh.options) says who decides about unknown host keys, who answers a
    login, which ssh config file, and the timeouts; without any nothing is asked.
    """

    def __init__(
        self,
        host: str | HostConfig,
        options: SSHOptions | None = None,
        *,
        user: str | None = None,
        port: int | None = None,
    ) -> None:
        options = options or SSHOptions()
        if isinstance(host, HostConfig):
            self.config = host
        else:
            self.config = resolve_host(host, user=user, port=port, config_path=options.ssh_config)
        self.ask_host_key = options.ask_host_key
        self.secrets = options.secrets or Secrets(None)
        timeouts = options.timeouts
        if self.config.connect_timeout is not None:
            timeouts = replace(timeouts, connect=self.config.connect_timeout)
        if self.config.server_alive_interval:
            timeouts = replace(timeouts, keepalive_interval=self.config.server_alive_interval)
        if self.config.server_alive_count_max:
            timeouts = replace(timeouts, keepalive_max=self.config.server_alive_count_max)
        self.timeouts = timeouts
        self.socket: socket.socket | ProxyCommandSocket | None = None
        self._transports: list[paramiko.Transport] = []
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._cancel = threading.Event()  # set by lose(): ends a TCP connect in progress
        self._last_alive = 0.0
        self.lost_reason: str | None = None

    # -- lifecycle ------------------------------------------------------------------------
    @property
    def transport(self) -> paramiko.Transport:
        with self._lock:
            if not self.is_open:
                self.open()
            return self._transports[-1]

    @property
    def is_open(self) -> bool:
        return bool(self._transports) and self._transports[-1].is_active()

    @property
    def loopback(self) -> bool:
        """Whether the open connection is one TCP hop to this machine (127.0.0.1, ::1): no
        ProxyJump or ProxyCommand between. There, compressing replies only costs CPU at both
        ends of a link that carries gigabytes a second."""
        sock = self.socket
        if len(self._transports) != 1 or not isinstance(sock, socket.socket):
            return False
        try:
            return ipaddress.ip_address(sock.getpeername()[0]).is_loopback
        except (OSError, ValueError, IndexError):
            return False

    @property
    def hops(self) -> int:
        """How many SSH sessions the connection stacks (1 = direct, 2 = through one jump)."""
        return len(self._transports)

    def open(self) -> SSHConnection:
        with self._lock:
            if self.is_open:
                return self
            self.close()
            self._closed.clear()
            self._cancel.clear()
            self.lost_reason = None
            chain = resolve_chain(self.config)
            try:
                for i, hop in enumerate(chain):
                    via = chain[i - 1].label if i else None
                    sock = self._hop_socket(hop, via)
                    self._transports.append(self._start(hop, sock, via))
            except BaseException:
                self.close()
                raise
            self._last_alive = time.monotonic()
            threading.Thread(
                target=self._keepalive,
                args=(self._transports[-1],),
                daemon=True,
                name=f"ssh-keepalive-{self.config.alias}",
            ).start()
            return self

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            for t in reversed(self._transports):
                with contextlib.suppress(Exception):
                    t.close()
            self._transports = []
            if self.socket is not None:
                with contextlib.suppress(OSError):
                    self.socket.close()
                self.socket = None

    def __enter__(self) -> SSHConnection:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- using it -------------------------------------------------------------------------
    def exec(self, command: str, timeout: float | None = None) -> tuple[int, bytes, bytes]:
        """Run one command; (exit status, stdout, stderr). For short commands only."""
        timeout = self.timeouts.request if timeout is None else timeout
        chan = self.open_channel(command)
        deadline = time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        try:
            while not (chan.exit_status_ready() and not chan.recv_ready()):
                if time.monotonic() > deadline:
                    raise RequestTimeout(
                        f"{self.config.label}: `{command}` did not finish in {timeout:.0f} s"
                    )
                chan.settimeout(min(0.5, timeout))
                with contextlib.suppress(TimeoutError):
                    data = chan.recv(65536)
                    if not data and chan.closed:
                        break
                    out += data
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(65536)
            return chan.recv_exit_status(), bytes(out), bytes(err)
        finally:
            chan.close()

    def open_channel(self, command: str) -> paramiko.Channel:
        """A session channel running `command` (for the long-lived agent channel)."""
        try:
            chan = self.transport.open_session(timeout=self.timeouts.connect)
            chan.exec_command(command)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._lose(f"cannot open a channel: {exc}")
            raise ConnectionLost(f"{self.config.label}: cannot start `{command}`: {exc}") from exc
        return chan

    def sftp(self) -> paramiko.SFTPClient:
        try:
            client = paramiko.SFTPClient.from_transport(self.transport)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self._lose(f"sftp failed: {exc}")
            raise ConnectionLost(f"{self.config.label}: cannot start sftp: {exc}") from exc
        if client is None:
            raise ConnectionLost(f"{self.config.label}: the server refused the sftp subsystem")
        client.get_channel().settimeout(self.timeouts.request)
        return client

    def check_alive(self) -> None:
        """Raise ConnectionLost when the watchdog (or the peer) ended the connection."""
        if not self.is_open:
            raise ConnectionLost(
                f"{self.config.label}: connection lost ({self.lost_reason or 'closed'})"
            )

    # -- internals ------------------------------------------------------------------------
    def _hop_socket(self, hop: HostConfig, via: str | None):
        if not self._transports and hop.proxy_command:
            try:
                self.socket = ProxyCommandSocket(hop.proxy_command)
            except OSError as exc:
                raise ConnectFailed(
                    f"cannot start the ProxyCommand for {hop.label} "
                    f"(`{hop.proxy_command}`): {exc.strerror or exc}"
                ) from exc
            return self.socket
        if not self._transports:
            try:
                self.socket = tcp_connect(
                    hop.hostname, hop.port, self.timeouts.connect, self._cancel
                )
            except OSError as exc:
                raise ConnectFailed(
                    f"cannot connect to {hop.label}: {_os_reason(exc)}"
                    + ("" if hop is self.config else f" (jump host for {self.config.alias})")
                ) from exc
            return self.socket
        try:
            return self._transports[-1].open_channel(
                "direct-tcpip",
                (hop.hostname, hop.port),
                ("127.0.0.1", 0),
                timeout=self.timeouts.connect,
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise ConnectFailed(
                f"jump host {via} could not reach {hop.hostname}:{hop.port} "
                f"for {hop.label}: {exc or type(exc).__name__}"
            ) from exc

    def _start(self, hop: HostConfig, sock, via: str | None) -> paramiko.Transport:
        # A bigger window and packets than paramiko's defaults (2 MB, 32 KB): a backlog of points
        # streams without waiting on window updates over a long round trip.
        transport = paramiko.Transport(
            sock, default_window_size=WINDOW_SIZE, default_max_packet_size=MAX_PACKET_SIZE
        )
        options = transport.get_security_options()
        # AES-GCM first: one AEAD pass per packet instead of AES-CTR plus a separate HMAC.
        options.ciphers = [c for c in options.ciphers if "gcm" in c] + [
            c for c in options.ciphers if "gcm" not in c
        ]
        transport.banner_timeout = self.timeouts.banner
        transport.handshake_timeout = self.timeouts.banner
        transport.auth_timeout = self.timeouts.auth
        known = KnownHosts(hop)
        pinned = known.known_key_types()
        if pinned:  # ask the server for a key type we can check, as SSHClient does
            offered = list(options.key_types)
            options.key_types = [k for k in offered if k in pinned] + [
                k for k in offered if k not in pinned
            ]
        try:
            transport.start_client(timeout=self.timeouts.banner)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            proxy = sock if isinstance(sock, ProxyCommandSocket) else None
            if proxy is not None:  # its stderr says more than "no banner"
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proxy.process.wait(0.5)
                why = proxy.reason()
            transport.close()
            raise ConnectFailed(
                f"SSH handshake with {hop.label} failed: {exc or type(exc).__name__}"
                + (f" (via {via})" if via else "")
                + (f"; {why}" if proxy is not None else "")
            ) from exc
        try:
            known.verify(transport.get_remote_server_key(), self.ask_host_key)
            self._authenticate(transport, hop)
        except BaseException:
            transport.close()
            raise
        return transport

    def _authenticate(self, transport: paramiko.Transport, hop: HostConfig) -> None:
        try:
            authenticate(transport, hop, self.secrets)
        except LoginDropped as exc:
            raise ConnectFailed(str(exc)) from exc

    def _keepalive(self, transport: paramiko.Transport) -> None:
        """Send keepalive@openssh.com and wait for the reply in one thread; watch in this one."""
        interval, limit = self.timeouts.keepalive_interval, self.timeouts.keepalive_max

        def ping() -> None:
            while transport.is_active() and not self._closed.is_set():
                try:
                    transport.global_request("keepalive@openssh.com", wait=True)  # blocks
                except (paramiko.SSHException, OSError, EOFError):
                    return  # the transport died under us; the watchdog or a reader reports it
                if transport.is_active():
                    self._last_alive = time.monotonic()
                self._closed.wait(interval)

        threading.Thread(target=ping, daemon=True, name="ssh-keepalive-ping").start()
        while not self._closed.wait(interval / 2):
            if not transport.is_active():
                return
            silent = time.monotonic() - self._last_alive
            if silent > interval * (limit + 1):
                self._lose(f"{limit} keepalives unanswered ({silent:.0f} s of silence)")
                return

    def _lose(self, reason: str) -> None:
        """Mark the connection lost and close it, so blocked reads return at once."""
        log.info("%s: connection lost: %s", self.config.label, reason)
        self.lost_reason = reason
        self._cancel.set()
        for t in list(self._transports):
            with contextlib.suppress(Exception):
                t.close()
        if self.socket is not None:  # a TCP socket, or a ProxyCommand's
            with contextlib.suppress(OSError):
                self.socket.shutdown(socket.SHUT_RDWR)

    def lose(self, reason: str) -> None:
        """Give up on the connection from outside (e.g. a request timed out)."""
        self._lose(reason)


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"unknown host name ({exc.strerror})"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return exc.strerror or str(exc) or type(exc).__name__
