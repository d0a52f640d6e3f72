"""Remote stores through the system `ssh` binary (`host:path#via=openssh`), for what paramiko
cannot follow: GSSAPI/Kerberos, FIDO security keys, an open ControlMaster whose 2FA is already
done, an ssh build with site patches. VS Code Remote-SSH works the same way.

The agent protocol is the same as for the other sources; only the pipe differs: `ssh -T host
exec python3 -I agent.pyz` with stdin/stdout as the frame stream, like LocalSource's subprocess.
The agent is copied over the same binary (`cat > file` on the host, only when that exact
version is missing). ssh reads your config, keys, agent and known_hosts itself, and asks its own
questions on the terminal or through SSH_ASKPASS; resplot's dialogs are not used on this path.
Each source runs its own ssh process; with `ControlMaster auto` in your config they share one
connection, as every ssh command does.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess

from resplot.sources.agent import AgentSource
from resplot.sources.client import (
    AGENT_DIR,
    AgentClient,
    AgentConnectionError,
    agent_archive,
    agent_hash,
)
from resplot.sources.local import LocalSource
from resplot.sources.spec import SSHSpec
from resplot.ssh.errors import AuthFailed
from resplot.ssh.options import SSHOptions

UPLOAD_TIMEOUT_S = 120.0


class OpenSSHSource(LocalSource):
    """A LocalSource whose agent process is `ssh host exec python3 agent.pyz`."""

    compress = True

    def __init__(
        self,
        spec: SSHSpec,
        options: SSHOptions | None = None,
        *,
        label: str | None = None,
        python: str | None = None,
        agent_dir: str = AGENT_DIR,
        ssh_binary: str | None = None,
    ) -> None:
        AgentSource.__init__(self, spec, label or spec.label, [spec.path])
        self.parsed = spec
        self.python = spec.interpreter(python)
        # Only the config file: ssh asks its own questions (host keys, logins) and keeps its
        # own timeouts.
        self.ssh_config = options.ssh_config if options is not None else None
        self.agent_dir = agent_dir
        self.ssh_binary = ssh_binary or shutil.which("ssh") or "ssh"
        self.process = None
        self._stderr = None
        self.uploads = 0

    def ssh_argv(self, command: str) -> list[str]:
        argv = [self.ssh_binary, "-T", "-o", "ServerAliveInterval=5"]
        if self.ssh_config is not None:
            argv += ["-F", str(self.ssh_config)]
        if self.parsed.user:
            argv += ["-l", self.parsed.user]
        if self.parsed.port:
            argv += ["-p", str(self.parsed.port)]
        return [*argv, "--", self.parsed.host, command]

    def _agent_path(self) -> str:
        name = f"agent-{agent_hash()}.pyz"
        if self.agent_dir.startswith("/"):
            return shlex.quote(f"{self.agent_dir.rstrip('/')}/{name}")
        return f'"$HOME"/{shlex.quote(self.agent_dir.rstrip("/") + "/" + name)}'

    def _ensure_agent(self) -> str:
        """Copy the agent unless the host has this exact version (same size, hashed name)."""
        data, path = agent_archive(), self._agent_path()
        script = (
            f'f={path}; if [ "$(wc -c < "$f" 2>/dev/null)" -eq {len(data)} ] 2>/dev/null; '
            f'then echo have; else mkdir -p "$(dirname "$f")" && cat > "$f.part.$$" && '
            f'mv "$f.part.$$" "$f" && echo sent; fi'
        )
        try:
            done = subprocess.run(
                self.ssh_argv(script), input=data, capture_output=True,
                timeout=UPLOAD_TIMEOUT_S, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AgentConnectionError(
                f"{self.label}: cannot run {self.ssh_binary}: {exc}"
            ) from exc
        said = done.stdout.decode("utf-8", "replace").split()
        if done.returncode != 0 or not said or said[-1] not in ("have", "sent"):
            self._raise_ssh_failure(done.returncode, done.stderr.decode("utf-8", "replace"))
        self.uploads += said[-1] == "sent"
        return path

    def _raise_ssh_failure(self, code: int, stderr: str) -> None:
        tail = stderr.strip()[-1500:]
        if "Permission denied" in tail or "Host key verification failed" in tail:
            raise AuthFailed(f"{self.label}: ssh refused ({tail})")
        raise AgentConnectionError(f"{self.label}: ssh exited with {code}: {tail}")

    def _connect(self) -> AgentClient:
        import tempfile

        from resplot.sources.local import _LocalClient

        path = self._ensure_agent()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _disconnect()
        try:
            self.process = subprocess.Popen(
                self.ssh_argv(f"exec {self.python} -I {path}"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except OSError as exc:
            raise AgentConnectionError(
                f"{self.label}: cannot run {self.ssh_binary}: {exc}"
            ) from exc
        assert self.process.stdout is not None and self.process.stdin is not None
        return _LocalClient(self.process.stdout, self.process.stdin, self)
