"""The agent on a host it does not control: it opens regular files only (a FIFO named *.db hung
it for good), its globs are bounded (`/**/*.db` walked the whole disk), a request's size is
capped (a 64 MiB header cost it 1.1 GB), and it ends when its client is gone (each cut SSH
connection left an agent on the host)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reslog.agent import bundle, wire
from reslog.agent.serve import bounded_glob
from reslog.agent.wire import AgentError
from resplot.sources.client import AgentClient, AgentRemoteError
from schema.store.errors import NotAStore
from tests.fixtures.stores import make_run, new_store
from tests.reslog.agent.test_agent import agent_process, poll

pytestmark = pytest.mark.integration


def wait_until(done, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    return bool(done())


def test_a_fifo_named_like_a_store_is_refused_not_opened(tmp_path):
    make_run(new_store(tmp_path / "real.db"), name="r")
    fifo = tmp_path / "trap.db"
    os.mkfifo(fifo)
    with agent_process() as (client, proc):
        stores, missing = client.discover([str(tmp_path)])
        assert stores == [str(tmp_path / "real.db")] and missing == []
        stores, _ = client.discover([str(tmp_path / "*.db")])
        assert stores == [str(tmp_path / "real.db")]
        with pytest.raises(NotAStore, match="not a regular file"):
            poll(client, str(fifo))  # named explicitly: said what it is, at once
        assert client.hello()["protocol"] == wire.PROTOCOL and proc.poll() is None


def tree(root: Path, width: int, depth: int) -> None:
    if depth == 0:
        (root / "s.db").write_bytes(b"x")
        return
    for i in range(width):
        sub = root / f"d{i}"
        sub.mkdir()
        tree(sub, width, depth - 1)


@pytest.mark.parametrize("pattern", ["**/*.db", "d1/**/s.db", "*/d[01]/*/s.db", "d?/**", "**"])
def test_the_bounded_glob_finds_what_glob_finds(tmp_path, pattern):
    tree(tmp_path, 3, 3)
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h.db").write_bytes(b"x")
    full = str(tmp_path / pattern)
    expected = {p.rstrip("/") for p in glob.glob(full, recursive=True)}  # glob adds a "/" to some
    assert bounded_glob(full, pattern) == sorted(expected)


def test_a_glob_that_would_walk_too_far_is_refused_with_a_message(tmp_path):
    tree(tmp_path, 4, 3)  # 85 folders
    with pytest.raises(AgentError, match=r"listed 50 folders without finishing; narrow"):
        bounded_glob(str(tmp_path / "**" / "*.db"), "**/*.db", limit=50)
    with agent_process() as (client, _):  # the real bound, over the real protocol
        with pytest.raises(AgentRemoteError, match="folders without finishing"):
            client.discover(["/**/*.db"])
        assert client.hello()["protocol"] == wire.PROTOCOL


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.parametrize(
    "op, fields",
    [
        ("points", {"after": 2**70}),
        ("poll", {"points_after": -(2**70)}),
        ("poll", {"series": [[1, 2**64]]}),
        ("tiles", {"tiles": [[1, 1, 1, 2**70, 0]]}),
        ("raw", {"run_id": 1, "key_id": 1, "stop": 2**63}),
    ],
)
def test_an_integer_past_64_bits_is_a_bad_request_not_an_agent_bug(tmp_path, op, fields):
    """JSON integers are unbounded: 2**70 reached SQLite as an OverflowError, answered as an
    internal error (AgentBug) instead of the client's mistake."""
    store = tmp_path / "s.db"
    make_run(new_store(store), name="r", points={"loss": [(0, 1.0)]})
    with agent_process() as (client, proc):
        client.hello()
        request = {"op": op, "id": 9, "store": str(store), **fields}
        wire.write_frame(client.wfile, request)
        client.wfile.flush()
        frame = wire.read_frame(client.rfile)
        assert frame is not None and frame[0]["ok"] is False, frame
        error = frame[0]["error"]
        assert error["type"] == "BadRequest", error
        assert "64-bit integer" in error["message"]
        assert client.hello()["protocol"] == wire.PROTOCOL and proc.poll() is None


def test_an_oversized_request_is_refused_in_step_without_reading_it_whole():
    with agent_process() as (client, proc):
        client.hello()
        head = b'{"op": "discover", "id": 7, "patterns": [' + b'"x",' * ((16 << 20) // 4) + b'"x"]}'
        client.wfile.write(wire.PREFIX.pack(len(head), 0) + head)
        client.wfile.flush()
        frame = wire.read_frame(client.rfile)
        assert frame is not None and frame[0]["ok"] is False
        assert "at most" in frame[0]["error"]["message"]
        assert client.hello()["protocol"] == wire.PROTOCOL  # still in step
        assert peak_rss_mb(proc.pid) < 100  # never held the 16 MiB request, let alone parsed it


def test_the_agent_ends_when_its_client_is_gone_even_if_its_stdin_stays_open():
    """The reader of its replies goes away while something else still holds its stdin open
    (an SSH session the server keeps, a wedged parent): it used to wait on stdin for good."""
    stdin_r, stdin_w = os.pipe()
    proc = subprocess.Popen(
        bundle.local_argv(sys.executable), stdin=stdin_r, stdout=subprocess.PIPE
    )
    os.close(stdin_r)
    writer = os.fdopen(stdin_w, "wb", buffering=0)  # kept open until the end
    try:
        client = AgentClient(proc.stdout, writer)
        client.boot()
        assert client.hello()["pid"] == proc.pid
        proc.stdout.close()  # the client is gone; its stdin stays open
        assert wait_until(lambda: proc.poll() is not None), "the agent outlived its client"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        writer.close()
