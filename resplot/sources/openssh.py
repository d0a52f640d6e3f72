"""Remote stores through the system `ssh` binary (`host:path#via=openssh`), for what paramiko
cannot follow: GSSAPI/Kerberos, FIDO security keys, an open ControlMaster whose 2FA is already
done, an ssh build with site patches. VS Code Remote-SSH works the same way.

The agent protocol is the same as for the other sources; only the pipe differs: `ssh -T host
<launcher>` (reslog/agent/bundle.py: the agent runs from memory, its archive sent first on
stdin) with stdin/stdout as the frame stream, like LocalSource's subprocess. Nothing is written
on the host. ssh reads your config, keys, agent and known_hosts itself, and asks its own
questions on the terminal or through SSH_ASKPASS; resplot's dialogs are not used on this path.
Each source runs its own ssh process; with `ControlMaster auto` in your config they share one
connection, as every ssh command does.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile

from reslog.agent.bundle import NO_PYTHON, launcher
from resplot.sources.client import AgentClient, AgentConnectionError
from resplot.sources.local import LocalSource, _LocalClient
from resplot.sources.remote import RemoteSource
from resplot.ssh.errors import AuthFailed
from resplot.ssh.options import SSHOptions


class OpenSSHSource(RemoteSource, LocalSource):
    """A LocalSource whose agent process is `ssh host <the agent's launcher>`."""

    def _attach(self, options: SSHOptions) -> None:
        # Only the config file: ssh asks its own questions (host keys, logins) and keeps its
        # own timeouts.
        self.ssh_config = options.ssh_config
        self.ssh_binary = shutil.which("ssh") or "ssh"
        self.process = None
        self._stderr = None

    def ssh_argv(self, command: str) -> list[str]:
        argv = [self.ssh_binary, "-T", "-o", "ServerAliveInterval=5"]
        if self.ssh_config is not None:
            argv += ["-F", str(self.ssh_config)]
        if self.parsed.user:
            argv += ["-l", self.parsed.user]
        if self.parsed.port:
            argv += ["-p", str(self.parsed.port)]
        return [*argv, "--", self.parsed.host, command]

    def _connect(self) -> AgentClient:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _disconnect()
        try:
            self.process = subprocess.Popen(
                self.ssh_argv(launcher(self.python)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except OSError as exc:
            raise AgentConnectionError(
                f"{self.label}: cannot run {self.ssh_binary}: {exc}"
            ) from exc
        assert self.process.stdout is not None and self.process.stdin is not None
        client = _SSHProcessClient(self.process.stdout, self.process.stdin, self)
        try:
            client.boot()
        except (AgentConnectionError, AuthFailed):
            client.close()
            self._disconnect()
            raise
        return client


class _SSHProcessClient(_LocalClient):
    """Tells a refused login (a person must act: AuthFailed) and a host without a usable Python
    from a broken connection, by ssh's exit status and stderr."""

    _source: OpenSSHSource

    def explain(self, exc: AgentConnectionError) -> str:
        proc = self._source.process
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
        tail = self._source.agent_stderr()[-1500:]
        label = self._source.label
        if code == 255 and ("Permission denied" in tail or "Host key verification" in tail):
            raise AuthFailed(f"{label}: ssh refused ({tail})") from exc
        if code == NO_PYTHON:
            from resplot.sources.ssh import no_python_message

            return no_python_message(label, self._source.python, tail)
        if code is not None:
            return f"{label}: ssh exited with {code}: {tail or exc}"
        return super().explain(exc)
