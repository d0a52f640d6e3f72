"""What every GPU check script shares: the no-CUDA refusal, the command line, the device facts,
and the result file each check leaves in OUTDIR (``<name>.json``, read by ``summary.py``).

A check's result: ``ok`` True (met), False (not met) or None (measured, nothing to judge, or a
CPU dry run whose numbers mean nothing), a one-line ``summary`` for the table, and ``details``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

EXIT_NO_CUDA = 3  # distinct from a failed check (1) and a usage error (2)

# Trainer overrides for a measured loop: no validation, no checkpoint, a log every step, quiet.
JUST_STEPS = [
    "--train.eval_every",
    "0",
    "--train.ckpt_every",
    "0",
    "--train.save_final",
    "false",
    "--logging.log_every",
    "1",
    "--logging.print_every",
    "0",
]


def child_env() -> dict[str, str]:
    """This process's environment for a child Python, with the repository first on PYTHONPATH
    and the rest kept: gpu_check.sh puts the carried wheels' folder there (.gpu-site), without
    which a child cannot import SQLAlchemy on the GPU host."""
    path = [str(ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def require_cuda(check: str, dry_run: bool = False) -> None:
    """Exit with EXIT_NO_CUDA and a sentence saying so, unless CUDA is here (or a CPU dry run
    was asked for, which runs the same code on a tiny model to test the script itself)."""
    if dry_run or cuda_available():
        return
    import torch

    print(
        f"{check}: no CUDA device here (torch {torch.__version__}, "
        "torch.cuda.is_available() is False); this check runs on a GPU machine "
        "(scripts/gpu_check.sh, docs/gpu.md). --cpu-dry-run runs it on a tiny model to test the "
        "script.",
        file=sys.stderr,
    )
    sys.exit(EXIT_NO_CUDA)


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description.strip().split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for the result and logs")
    p.add_argument(
        "--cpu-dry-run",
        action="store_true",
        help="run on the CPU with a tiny model to test the script (the numbers mean nothing)",
    )
    return p


def device_facts() -> dict[str, Any]:
    """The device, driver and software a result was measured with."""
    import torch

    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "host": platform.node(),
    }
    try:
        import triton

        facts["triton"] = triton.__version__
    except ImportError:
        facts["triton"] = None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        facts.update(
            gpu=torch.cuda.get_device_name(0),
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 1),
            sms=props.multi_processor_count,
        )
        try:
            import pynvml

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
            facts["driver"] = driver.decode() if isinstance(driver, bytes) else driver
            pynvml.nvmlShutdown()
        except Exception as exc:
            facts["driver"] = f"unknown ({exc!r})"
    else:
        facts["gpu"] = None
    return facts


class Result:
    """One check's outcome, written to ``OUT/<name>.json`` when the check ends."""

    def __init__(self, name: str, out: Path, dry_run: bool = False):
        self.name, self.out, self.dry_run = name, Path(out), dry_run
        self.out.mkdir(parents=True, exist_ok=True)
        self.started = time.time()
        self.ok: bool | None = None
        self.summary = ""
        self.details: dict[str, Any] = {}

    def judge(self, ok: bool | None, summary: str) -> None:
        # A dry run tests the script, not the machine: its numbers are never a verdict.
        self.ok = None if self.dry_run else ok
        self.summary = ("CPU dry run: " if self.dry_run else "") + summary

    def write(self) -> Path:
        path = self.out / f"{self.name}.json"
        record = {
            "check": self.name,
            "ok": self.ok,
            "summary": self.summary,
            "dry_run": self.dry_run,
            "seconds": round(time.time() - self.started, 1),
            "device": device_facts(),
            "details": self.details,
        }
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=1, default=str))
        os.replace(tmp, path)
        return path

    def exit_code(self) -> int:
        return 1 if self.ok is False else 0


def start(check: str, args: argparse.Namespace) -> tuple[Result, str]:
    """A check's Result and its device ("cuda"; "cpu" for --cpu-dry-run), once CUDA is there."""
    require_cuda(check, args.cpu_dry_run)
    return Result(check, args.out, args.cpu_dry_run), "cpu" if args.cpu_dry_run else "cuda"


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def read_points(store: str | Path, run: str) -> dict[str, list[tuple[int, float, float | None]]]:
    """{key: [(step, wall, value), ...] in id order} of one run (uid or name) of a SQLite store:
    what the writer committed, read back with the schema's own helpers."""

    from schema.store import points_by_id
    from schema.store.connect import open_store
    from schema.store.read import dbapi_cursor, find_run, key_names

    engine = open_store(str(store), readonly=True)
    try:
        with engine.connect() as conn:
            run_id, _ = find_run(conn, run)
            names = key_names(conn)
            out: dict[str, list[tuple[int, float, float | None]]] = {}
            rows = points_by_id.points_after(*dbapi_cursor(conn), [run_id], 0)
            for _id, _run, key_id, step, wall, value in rows:
                out.setdefault(names[key_id], []).append((step, wall, value))
            return out
    finally:
        engine.dispose()


def json_or_none(path: str | Path) -> Any:
    """The JSON in a file, or None when the file is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
