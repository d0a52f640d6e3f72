"""Whether a store's server is slow or gone, asked without waiting on the write in flight: the
bytes moving on the connection's socket, the writer thread's CPU, and the server's own view of
the session on a second connection (PostgreSQL's pg_stat_activity). The writer's watchdog
(training/writer.py) breaks a connection only when none of them shows progress."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time

from sqlalchemy import Connection, Engine


def _pg_socket(conn: Connection) -> socket.socket | None:
    """A socket object over a duplicate of a psycopg 3 connection's descriptor (close it)."""
    try:
        fd = conn.connection.dbapi_connection.pgconn.socket  # psycopg 3
        return socket.socket(fileno=os.dup(fd))
    except Exception:  # another driver, or the connection went away meanwhile
        return None


def break_connection(conn: Connection) -> bool:
    """Shut down the socket under a server connection, so a call blocked on it fails now."""
    sock = _pg_socket(conn)
    if sock is None:
        return False
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    return True


def socket_bytes(conn: Connection | None) -> tuple[int, int] | None:
    """(bytes sent and acknowledged, bytes received) on a server connection's socket, from the
    kernel (Linux TCP_INFO); None where that cannot be read."""
    sock = None if conn is None else _pg_socket(conn)
    if sock is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 136)
        if len(info) < 136:  # a kernel older than 4.2: no byte counters
            return None
        acked, received = struct.unpack_from("=QQ", info, 120)  # tcpi_bytes_acked, _received
        return acked, received
    except (OSError, AttributeError):
        return None
    finally:
        sock.close()


def thread_cpu(thread: threading.Thread) -> float | None:
    """CPU seconds `thread` has used (Linux, BSD); None where that cannot be read."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
    except (AttributeError, OSError):
        return None


def is_lock_error(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "locked" in text or "busy" in text


def server_verdict(engine: Engine, pid: int | None, timeout: float) -> str | None:
    """None when the server is working on backend `pid`'s statement (running it, or waiting
    for a lock another session holds); else why the connection counts as dead. Asked on a
    second connection, in a thread given `timeout` seconds."""
    if pid is None:
        return "the server stopped answering"
    found: list = []

    def ask() -> None:
        try:
            with engine.connect() as probe:
                found.append(
                    probe.exec_driver_sql(
                        "SELECT state, wait_event_type FROM pg_stat_activity WHERE pid = %s",
                        (pid,),
                    ).first()
                )
        except Exception as exc:  # unreachable, refused, timed out: all say "dead" here
            found.append(exc)

    asker = threading.Thread(target=ask, name="reslog-check", daemon=True)
    asker.start()
    asker.join(timeout)
    if not found:
        return "the server did not answer a second connection either"
    row = found[0]
    if isinstance(row, Exception):
        return f"the server did not answer a second connection either: {type(row).__name__}"
    if row is None:
        return "the server no longer has this connection's session"
    state, waiting_on = row
    if state == "active" and waiting_on != "Client":
        return None
    return "the server was waiting for this process: the connection is lost"
