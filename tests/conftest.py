"""Shared fixtures. Qt runs offscreen; system services are real (see tests/fixtures/)."""

from __future__ import annotations

import os

# Before any Qt import anywhere in the test session.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest

from tests.fixtures.browser import browser  # noqa: F401
from tests.fixtures.postgres import pg_store, postgres_url  # noqa: F401
from tests.fixtures.sshd import ssh_config, sshd_env  # noqa: F401
from tests.fixtures.stores import sample  # noqa: F401
from tests.fixtures.tcpproxy import tcp_proxy  # noqa: F401
from tests.lanes import mark_integration


@pytest.fixture
def store_path(tmp_path):
    """Path of a not-yet-existing SQLite store in a fresh temp dir."""
    return tmp_path / "runs" / "reslog.db"


@pytest.fixture(autouse=True, scope="session")
def _own_resplot_settings(tmp_path_factory):
    """resplot's default settings file is the test session's own, never the user's (a
    snapshot reads the window's run colours from it)."""
    if "RESPLOT_CONFIG" not in os.environ:
        path = tmp_path_factory.mktemp("resplot") / "settings.json"
        os.environ["RESPLOT_CONFIG"] = str(path)
        yield
        os.environ.pop("RESPLOT_CONFIG", None)
    else:
        yield


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests using a service fixture are marked ``integration`` before `-m` selects (see
    tests/lanes.py). Tests marked ``cuda`` are skipped, and counted as skipped, where there is
    no CUDA GPU (every machine but a GPU host; scripts/gpu_check.sh runs them there:
    docs/gpu.md). torch is imported only when such a test was collected."""
    mark_integration(items)
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    why = pytest.mark.skip(
        reason=f"needs a CUDA GPU: torch {torch.__version__} sees none "
        "(run on a GPU host: bash scripts/gpu_check.sh OUTDIR)"
    )
    for item in marked:
        item.add_marker(why)
