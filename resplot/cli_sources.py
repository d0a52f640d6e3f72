"""What every `resplot` command does first with its arguments: the SOURCE specs checked (one
that can never be read fails now, not in a window that waits forever) and the SSH options every
source gets; and CliError, the failure printed as one line. Shared by resplot/cli.py (the window,
`sync`) and resplot/headless_cmds.py (snapshot, export, report).
"""

from __future__ import annotations


class CliError(Exception):
    """A user-facing failure: printed without a traceback."""


def ssh_options(args, asker, ask_host_key=None):
    """What every SSH source gets (resplot.ssh.options.SSHOptions): who answers a login (asked
    once per host per session), who is asked about unknown host keys, and the ssh config file
    when one was named."""
    from resplot.ssh.options import SSHOptions
    from resplot.ssh.prompts import Secrets

    config = None
    if args.ssh_config is not None:
        if not args.ssh_config.expanduser().is_file():
            raise CliError(f"--ssh-config {args.ssh_config}: no such file")
        config = args.ssh_config.expanduser()
    return SSHOptions(ask_host_key=ask_host_key, secrets=Secrets(asker), ssh_config=config)


def check_specs(texts: list[str]) -> list:
    """The specs parsed (resplot.sources.spec). Fail now, not in a window that waits forever, on
    a spec that can never be read: one that does not parse, or a local path (or glob) that names
    nothing. Remote ones are checked when they connect, since only the host knows its files."""
    import glob
    import os

    from resplot.sources.spec import LocalSpec, SpecError, parse_spec

    specs = []
    for text in texts:
        try:
            spec = parse_spec(text)
        except SpecError as exc:
            raise CliError(str(exc)) from None
        specs.append(spec)
        if not isinstance(spec, LocalSpec):
            continue
        for part in spec.parts:
            path = os.path.expanduser(part)
            if glob.has_magic(path):
                if glob.glob(path, recursive=True):
                    continue
                where = os.path.dirname(path.split("*")[0].split("?")[0].split("[")[0]) or "."
                if os.path.isdir(where):
                    continue  # stores may appear there later (a run about to start)
                raise CliError(f"no store matches {part!r}: {where} does not exist")
            if os.path.exists(path):
                if not os.access(path, os.R_OK):
                    raise CliError(f"cannot read {part!r}: permission denied")
                continue
            raise CliError(f"no store matches {part!r}: no such file or directory")
    return specs
