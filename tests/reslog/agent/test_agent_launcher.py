"""How the agent starts: from memory, under the first interpreter that fits, never from a file.

Real processes throughout: a real second user (useradd) planting a file where an agent archive
used to be cached, real old interpreters (pyenv's 3.6 and 2.7) in front of a good one on PATH,
the launcher run by a real `sh` as a login shell would.
"""

from __future__ import annotations

import io
import marshal
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

import pytest

from reslog.agent import bundle
from resplot.data.cache import SeriesCache
from resplot.sources.client import AgentClient
from resplot.sources.local import LocalSource
from resplot.sources.spec import parse_spec
from tests.fixtures.postgres import missing_system_dependency
from tests.fixtures.stores import make_run, new_store
from tests.fixtures.users import other_user  # noqa: F401 - a fixture

pytestmark = pytest.mark.integration

PYENV = Path("/root/.pyenv/versions")


def old_python(version: str) -> str:
    """A real interpreter of `version` ("3.6", "2.7"), as hosts have them (pyenv here and in
    CI)."""
    for path in sorted(PYENV.glob(f"{version}.*/bin/python{version}")):
        probe = subprocess.run(
            [str(path), "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(
            tuple(map(int, version.split(".")))
        ):
            return str(path)
    missing_system_dependency(
        f"python{version} under {PYENV} (an interpreter too old for the agent)"
    )
    return ""


def good_python() -> str:
    """A real (not venv) interpreter that fits: the base of this venv's."""
    return os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def start_launcher(python: str | None, env: dict[str, str], **kw) -> subprocess.Popen:
    """The launcher as an SSH server runs a command: `sh -c <command>` under the login."""
    command = bundle.launcher(python, **kw)
    return subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def host(tmp_path: Path, on_path: dict[str, str], in_home: dict[str, str]) -> dict[str, str]:
    """A login environment whose PATH holds only `on_path` ({name: interpreter}) and whose home
    holds `in_home` ({relative path: interpreter}), as symlinks to real interpreters."""
    bin_dir, home = tmp_path / "bin", tmp_path / "home"
    bin_dir.mkdir()
    home.mkdir()
    for name, target in on_path.items():
        (bin_dir / name).symlink_to(target)
    for rel, target in in_home.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).symlink_to(target)
    return {"PATH": str(bin_dir), "HOME": str(home)}


def test_the_launcher_passes_an_old_python_and_finds_a_conda_one(tmp_path):
    env = host(
        tmp_path,
        {"python3": old_python("3.6"), "python": old_python("2.7")},
        {"miniconda3/bin/python3": good_python()},
    )
    proc = start_launcher(None, env)
    assert proc.stdin is not None and proc.stdout is not None
    client = AgentClient(proc.stdout, proc.stdin)
    client.boot()
    info = client.hello()
    client.close()
    assert proc.wait(timeout=30) == 0
    probe = "import platform; print(platform.python_version())"
    version = subprocess.run(
        [good_python(), "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert info["python"] == version
    cmdline = Path(f"/proc/{info['pid']}/cmdline")
    assert not cmdline.exists()  # it ended with the session


def test_with_no_python_that_fits_the_launcher_says_what_it_found(tmp_path):
    env = host(tmp_path, {"python3": old_python("3.6"), "python": old_python("2.7")}, {})
    # The search as it runs, minus system places this machine has a good Python in.
    candidates = tuple(c for c in bundle.CANDIDATES if not c.startswith("/"))
    proc = start_launcher(None, env, candidates=candidates)
    _out, err = proc.communicate(bundle.boot_bytes(), timeout=60)
    assert proc.returncode == bundle.NO_PYTHON
    text = err.decode()
    assert "needs Python >= 3.8" in text
    assert "python3 (3.6." in text and "python (2.7." in text


def test_a_named_python_that_is_missing_is_said_to_be_missing(tmp_path):
    env = host(tmp_path, {"python3": good_python()}, {})
    proc = start_launcher("~/envs/lm/bin/python", env)
    _out, err = proc.communicate(b"", timeout=60)
    assert proc.returncode == bundle.NO_PYTHON
    assert f"{env['HOME']}/envs/lm/bin/python (not found)" in err.decode()


def _boot_with_code(python: str, main_source: str, monkeypatch) -> tuple[int, bytes, bytes]:
    """Boot an agent under `python` whose compiled code (bundle.code_blob) holds `main_source`
    as __main__.py, the archive's source untouched: what runs says which one the host took."""
    from importlib.util import MAGIC_NUMBER

    code = {"__main__.py": compile(main_source, "<reslog-agent>/__main__.py", "exec")}
    monkeypatch.setattr(bundle, "_code", MAGIC_NUMBER + zlib.compress(marshal.dumps(code)))
    bundle.boot_code.cache_clear()
    try:
        proc = subprocess.Popen(
            bundle.local_argv(python),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        out, err = proc.communicate(bundle.boot_bytes(), timeout=60)
    finally:
        bundle.boot_code.cache_clear()
    return proc.returncode, out, err


def test_a_host_of_the_clients_python_runs_the_compiled_code_and_another_the_source(
    monkeypatch,
):
    """The compiled code the client sends after the archive is run where the host's bytecode
    magic is the client's (nothing compiled on the host); under another Python (3.8 here) the
    archive's source is compiled as before and the real agent answers."""
    main = "import sys; sys.stdout.write('compiled code ran'); sys.exit(7)"
    status, out, _err = _boot_with_code(sys.executable, main, monkeypatch)
    assert (status, out) == (7, b"compiled code ran")
    old = old_python("3.8")
    status, out, err = _boot_with_code(old, main, monkeypatch)
    # The source's agent: stdin ended after the boot bytes, so it served nothing and exited 0.
    assert (status, out) == (0, b""), err.decode()


def test_bytes_that_are_not_this_agent_are_refused(tmp_path):
    env = host(tmp_path, {"python3": good_python()}, {})
    proc = start_launcher(None, env)
    wrong = bytearray(bundle.boot_bytes())
    wrong[-100] ^= 0xFF
    _out, err = proc.communicate(bytes(wrong), timeout=60)
    assert proc.returncode == 3
    assert f"did not hold agent {bundle.archive_hash()}" in err.decode()


def planted_archive(marker: Path, size: int) -> bytes:
    """A zipapp that leaves `marker` when run, padded to `size` bytes by a stored member (a zip
    comment holds at most 65,535 bytes, and the agent's archive has grown past that)."""

    def archive(pad: int) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("__main__.py", f"open({str(marker)!r}, 'w').write('ran')\n")
            zf.writestr("pad", b" " * pad, compress_type=zipfile.ZIP_STORED)
        return buf.getvalue()

    data = archive(size - len(archive(0)))  # a stored member's bytes add one for one
    assert len(data) == size
    return data


def test_an_archive_another_user_planted_is_never_run(tmp_path, other_user):  # noqa: F811
    """Another local user leaves a file of the agent's size where resplot once cached the agent
    (a shared /tmp); resplot reading a local store must not run it as you."""
    tmp_path.chmod(0o755)
    marker = tmp_path / "ran"
    size = len(bundle.archive())
    uid = os.getuid()
    names = [
        f"reslog-agent-{uid}-{bundle.archive_hash()}.pyz",
        f"agent-{bundle.archive_hash()}.pyz",
    ]
    planted = [Path(tempfile.gettempdir()) / name for name in names]
    for path in planted:
        path.unlink(missing_ok=True)
        other_user.run(["sh", "-c", 'cat > "$0"', str(path)], input=planted_archive(marker, size))
        assert path.stat().st_uid != uid
    store = tmp_path / "reslog.db"
    make_run(new_store(store), name="mine", points={"loss": [(0, 1.0)]})
    src = LocalSource(parse_spec(str(store)))
    try:
        cache = SeriesCache()
        src.poll(cache)
        assert [r.name for r in cache.runs()] == ["mine"]
    finally:
        src.close()
        for path in planted:
            path.unlink(missing_ok=True)
    assert not marker.exists()


def test_the_local_agent_leaves_no_file_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    tempfile.tempdir = None  # read TMPDIR again
    try:
        store = tmp_path / "reslog.db"
        new_store(store)
        src = LocalSource(parse_spec(str(store)))
        try:
            src.poll(SeriesCache())
        finally:
            src.close()
        assert list((tmp_path / "tmp").iterdir()) == []
    finally:
        tempfile.tempdir = None
