"""A ProxyCommand as the socket under an SSH transport (AWS SSM, GCP IAP, cloudflared, `ssh -W`).

paramiko.ProxyCommand is not used: it splits the command with shlex instead of running it
through the shell as ssh does (pipes, `$VAR`, a trailing `# comment` break), sends stderr to a
pipe nobody reads (a chatty proxy then blocks), waits to fill a whole buffer before returning
data, and never reports end of file (a proxy that died leaves the transport polling forever).
This one runs `exec COMMAND` under $SHELL like ssh, returns whatever bytes are ready, reports EOF
as EOF, and keeps the command's stderr (in a temporary file) for the error message. A thread
reads the command's stdout (select() cannot wait on a pipe on Windows; a thread can anywhere).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import threading

from resplot.ssh.config import proxy_command_argv


class ProxyCommandSocket:
    """The socket-like object paramiko.Transport reads from and writes to."""

    def __init__(self, command: str) -> None:
        self.command = command
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            proxy_command_argv(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            bufsize=0,
            start_new_session=True,  # a Ctrl+C in resplot's terminal is resplot's, not its
        )
        self.timeout: float | None = None
        self._tail = ""
        self._buffer = bytearray()
        self._eof = False
        self._ready = threading.Condition()
        threading.Thread(target=self._pump, daemon=True, name="proxycommand-reader").start()

    def _pump(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            try:
                data = os.read(stdout.fileno(), 65536)
            except (OSError, ValueError):
                data = b""
            with self._ready:
                if data:
                    self._buffer += data
                else:
                    self._eof = True
                self._ready.notify_all()
            if not data:
                return

    def send(self, data: bytes) -> int:
        assert self.process.stdin is not None
        try:
            return self.process.stdin.write(data) or len(data)
        except (BrokenPipeError, ValueError, OSError) as exc:
            raise OSError(f"ProxyCommand stopped reading: {self.reason() or exc}") from exc

    def recv(self, size: int) -> bytes:
        with self._ready:
            if not self._ready.wait_for(lambda: self._buffer or self._eof, self.timeout):
                raise TimeoutError("no data from ProxyCommand")
            data = bytes(self._buffer[:size])
            del self._buffer[:size]
            return data  # b"" only at end of file

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    @property
    def closed(self) -> bool:
        return self.process.poll() is not None

    _closed = closed

    def reason(self) -> str:
        """Why the command ended, from its exit status and the end of its stderr."""
        code = self.process.poll()
        text = self._stderr_tail()
        status = f"exited with {code}" if code is not None else "still running"
        return f"ProxyCommand `{self.command}` {status}" + (f": {text}" if text else "")

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed, the tail is kept
            self._stderr.seek(0)
            self._tail = self._stderr.read()[-1500:].decode("utf-8", "replace").strip()
        return self._tail

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.terminate()
            try:
                self.process.wait(2)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(2)
        self._stderr_tail()
        with contextlib.suppress(OSError):
            self._stderr.close()

    def shutdown(self, how: int = socket.SHUT_RDWR) -> None:
        """End the proxy now (the watchdog's way to wake blocked readers)."""
        with contextlib.suppress(OSError):
            self.process.terminate()
