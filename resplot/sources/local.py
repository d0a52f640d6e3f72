"""Local stores, read through the agent running as a subprocess of resplot.

The agent runs as `sys.executable -I -S -c BOOT` with its archive sent on stdin (the same archive
and launcher remote hosts get, reslog/agent/bundle.py: nothing is written to or run from a
file), on a pipe pair rather than in-process: it is then byte for byte the remote path
(framing, process boundary, agent death and reconnect), and its reads cost the agent's own CPU
and GIL, never the GUI's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from reslog.agent.bundle import local_argv
from resplot.sources.agent import AgentSource
from resplot.sources.client import AgentClient, AgentConnectionError
from resplot.sources.spec import LocalSpec


class LocalSource(AgentSource):
    def __init__(
        self, spec: LocalSpec, label: str | None = None, *, python: str | None = None
    ) -> None:
        patterns = [str(Path(p).expanduser().absolute()) for p in spec.parts]
        super().__init__(spec, label or spec.label, patterns)
        self.python = python or sys.executable
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def agent_pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _connect(self) -> AgentClient:
        # stderr goes to a file: a pipe nobody drains could block an agent that writes a lot.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _disconnect()
        try:
            self.process = subprocess.Popen(
                local_argv(self.python),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "0"},
            )
        except OSError as exc:
            raise AgentConnectionError(f"cannot start the agent ({self.python}): {exc}") from exc
        assert self.process.stdout is not None and self.process.stdin is not None
        client = _LocalClient(self.process.stdout, self.process.stdin, self)
        try:
            client.boot()
        except AgentConnectionError:
            client.close()
            self._disconnect()
            raise
        return client

    def agent_stderr(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()[-2000:].decode("utf-8", "replace").strip()

    def _disconnect(self) -> None:
        super()._disconnect()
        proc, self.process = self.process, None
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=2)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


class _LocalClient(AgentClient):
    """Adds the agent's exit status and stderr to a broken-connection error."""

    def __init__(self, rfile, wfile, source: LocalSource) -> None:
        super().__init__(rfile, wfile)
        self._source = source

    def explain(self, exc: AgentConnectionError) -> str:
        proc = self._source.process
        code = None
        if proc is not None:
            try:  # EOF usually means it is exiting: give it a moment to report its status
                code = proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                code = None
        detail = self._source.agent_stderr()
        extra = f" (agent exited with {code})" if code is not None else ""
        extra += f": {detail}" if detail else ""
        return f"{exc}{extra}"
