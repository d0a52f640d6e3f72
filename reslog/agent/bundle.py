"""The agent as one zipapp: this package and the stdlib-only parts of `schema` it reads with.

resplot uploads the archive to a host as `agent-<hash>.pyz` and runs it with the host's
`python3 -I` (a local store gets the same archive in a subprocess). The archive is built from
the installed files in a fixed order with fixed timestamps, so its bytes, and the hash in its
name, change exactly when the agent's code does. The two package `__init__` files in it are
stubs: the real ones import SQLAlchemy and the logging library, which a GPU host need not have.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENT_FILES = ("__init__.py", "__main__.py", "serve.py", "store.py", "tile_workers.py", "wire.py")
# The schema modules the agent imports; each imports only the standard library and these.
SCHEMA_FILES = (
    "buckets.py", "columns.py", "envelope.py", "liveness.py", "revision.py", "rollup.py",
    "sqlite_file.py",
)  # fmt: skip
STUB = b'"""Part of the reslog agent archive (see reslog/agent/bundle.py)."""\n'
MAIN = b"import sys\nfrom reslog.agent.serve import main\nsys.exit(main())\n"
EPOCH = (2020, 1, 1, 0, 0, 0)


def _add(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


@cache
def archive() -> bytes:
    """The agent's zipapp (bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        _add(zf, "__main__.py", MAIN)
        _add(zf, "reslog/__init__.py", STUB)
        for name in AGENT_FILES:
            _add(zf, f"reslog/agent/{name}", (ROOT / "reslog" / "agent" / name).read_bytes())
        _add(zf, "schema/__init__.py", STUB)
        for name in SCHEMA_FILES:
            _add(zf, f"schema/{name}", (ROOT / "schema" / name).read_bytes())
    return buf.getvalue()


@cache
def archive_hash() -> str:
    """sha256 prefix of the archive: an uploaded agent-<hash>.pyz is never stale."""
    return hashlib.sha256(archive()).hexdigest()[:16]
