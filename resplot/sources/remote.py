"""What the two SSH sources share: an agent on the host an SSHSpec names, reached through
resplot's own SSH client (sources/ssh.py) or the system `ssh` binary (sources/openssh.py)."""

from __future__ import annotations

from abc import abstractmethod

from resplot.sources.agent import AgentSource
from resplot.sources.spec import SSHSpec
from resplot.ssh.options import SSHOptions


class RemoteSource(AgentSource):
    """The spec gives the label, the store patterns and the agent's interpreter; `_attach` sets
    up the transport's own state. No connection is made until the first poll."""

    compress = True

    def __init__(
        self,
        spec: SSHSpec,
        options: SSHOptions | None = None,
        *,
        label: str | None = None,
        python: str | None = None,
    ) -> None:
        # AgentSource's own, not super()'s: OpenSSHSource's next base is LocalSource, whose
        # set-up is for paths on this machine.
        AgentSource.__init__(self, spec, label or spec.label, [spec.path])
        self.parsed = spec
        self.python = spec.interpreter(python)
        self._attach(options or SSHOptions())

    @abstractmethod
    def _attach(self, options: SSHOptions) -> None:
        """The transport's state for these options (python and parsed are set)."""
