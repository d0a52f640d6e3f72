"""Where a run comes from: host, pid, command line, git commit, DDP rank and world size."""

from __future__ import annotations

import os
import shlex
import socket
import sys
from pathlib import Path

from reslog.redact import redact_argv


def host() -> str:
    return socket.gethostname()


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed, with the values of secret-looking options redacted."""
    out = redact_argv([str(a) for a in (sys.argv if argv is None else argv)])
    return shlex.join(out)


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                continue
    return default


def rank() -> int:
    """Global rank from torchrun (RANK), else Slurm or Open MPI, else 0."""
    return _env_int(("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"), 0)


def world_size() -> int:
    return _env_int(("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"), 1)


def local_rank() -> int:
    return _env_int(("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"), 0)


def job_id() -> str:
    """The id of the job this process is one rank of: torchrun's run id (--rdzv-id, a fresh uuid
    with --standalone), else Slurm's job id; "" when neither is known. `init` makes it the default
    group, so the ranks of a job are joined without a `group=` (schema/rules/ranks.py)."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "").strip()
    if run_id and run_id.lower() != "none":
        return run_id
    slurm = os.environ.get("SLURM_JOB_ID", "").strip()
    return f"slurm-{slurm}" if slurm and world_size() > 1 else ""


def _git_dir(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():  # worktree or submodule: "gitdir: <path>"
            text = dot_git.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                target = Path(text.split(":", 1)[1].strip())
                return target if target.is_absolute() else (folder / target).resolve()
    return None


def _common_dir(git_dir: Path) -> Path:
    common = git_dir / "commondir"
    if common.is_file():
        target = Path(common.read_text().strip())
        return target if target.is_absolute() else (git_dir / target).resolve()
    return git_dir


def git_commit(start: str | os.PathLike[str] | None = None) -> str | None:
    """HEAD's commit of the repository holding `start` (default: the script, else the cwd).

    Read from the files under .git (no subprocess, works without git installed); None when
    there is no repository or it cannot be read.
    """
    if start is None:
        script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
        start = script.resolve().parent if script is not None and script.is_file() else Path.cwd()
    try:
        git_dir = _git_dir(Path(start).resolve())
        if git_dir is None:
            return None
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head.split(":", 1)[1].strip()
        for base in (git_dir, _common_dir(git_dir)):
            loose = base / ref
            if loose.is_file():
                return loose.read_text().strip() or None
        packed = _common_dir(git_dir) / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        return None
    return None
