"""The stdlib agent and its client, over real pipes to a real agent process and real stores."""

from __future__ import annotations

import ast
import io
import math
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from sqlalchemy import text

from reslog import agent as wire
from resplot.agent_client import (
    AGENT_PATH,
    AgentClient,
    AgentConnectionError,
    AgentRemoteError,
    agent_hash,
    agent_source,
)
from resplot.sources.base import StoreCursor
from schema import HEAD_REVISION
from schema.errors import NotAStore, SchemaTooNew, StoreNotFound
from schema.read import fetch_points
from tests.fixtures.stores import add_events, add_points, make_run, new_store


@contextmanager
def agent_process(*extra: str) -> Iterator[tuple[AgentClient, subprocess.Popen[bytes]]]:
    # -I -S: no site-packages at all, so a non-stdlib import in the agent fails here.
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(AGENT_PATH), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    client = AgentClient(proc.stdout, proc.stdin)
    try:
        yield client, proc
    finally:
        client.close()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def test_frames_round_trip_header_and_payload_with_nan_and_inf():
    buf = io.BytesIO()
    values = np.array([1.5, math.nan, math.inf, -math.inf, -0.0], dtype="<f8")
    header = {"op": "x", "floats": [math.nan, math.inf, -math.inf, 1e-300], "text": "ü∞"}
    written = wire.write_frame(buf, header, values.tobytes())
    wire.write_frame(buf, {"second": True})
    assert written == len(buf.getvalue()) - len(wire.encode_frame({"second": True})[0])
    buf.seek(0)
    got, payload = wire.read_frame(buf)
    assert math.isnan(got["floats"][0]) and got["floats"][1:] == [math.inf, -math.inf, 1e-300]
    assert got["text"] == "ü∞"
    back = np.frombuffer(payload, dtype="<f8")
    assert np.array_equal(back, values, equal_nan=True)
    assert np.signbit(back[-1])
    assert wire.read_frame(buf) == ({"second": True}, b"")
    assert wire.read_frame(buf) is None  # clean EOF between frames


def test_a_frame_cut_short_is_a_protocol_error():
    first, body = wire.encode_frame({"op": "hello"}, b"12345678")
    cut = io.BytesIO(first + body[:3])
    with pytest.raises(wire.ProtocolError, match="stream closed"):
        wire.read_frame(cut)


def test_agent_file_is_stdlib_only_and_python38_syntax():
    source = agent_source().decode()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported
    assert wire.SCHEMA_REVISION == HEAD_REVISION  # the agent's copy of the schema revision
    assert len(agent_hash()) == 16 and agent_hash() != "0" * 16


def test_hello_reports_versions():
    with agent_process() as (client, proc):
        info = client.hello()
    assert info["protocol"] == wire.PROTOCOL
    assert info["schema"] == HEAD_REVISION
    assert info["pid"] == proc.pid
    assert info["python"].count(".") == 2


def test_discover_expands_globs_directories_and_home(tmp_path, sample):
    path, _engine, _ = sample
    (tmp_path / "runs" / "notes.txt").write_text("not a store")
    other = new_store(tmp_path / "runs" / "b.db")
    other.dispose()
    with agent_process() as (client, _):
        stores, missing = client.discover([str(tmp_path / "runs" / "*"), str(tmp_path / "nope.db")])
        assert stores == sorted([path, str(tmp_path / "runs" / "b.db")])
        assert missing == [str(tmp_path / "nope.db")]
        by_dir, _ = client.discover([str(tmp_path / "runs")])
        assert by_dir == stores
    home = tmp_path / "runs"
    env_agent = subprocess.Popen(
        [sys.executable, "-I", "-S", str(AGENT_PATH)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={"HOME": str(home.parent)},
    )
    client = AgentClient(env_agent.stdout, env_agent.stdin)
    try:
        assert client.discover(["~/runs/reslog.db"])[0] == [path]
    finally:
        client.close()
        env_agent.wait(timeout=10)


def test_runs_keys_points_and_events_requests(sample):
    path, engine, made = sample
    with agent_process() as (client, _):
        runs = client.runs(path)
        assert [r["uid"] for r in runs] == [m.uid for m in made]
        assert runs[2]["status"] == "running"  # raw: the client derives "crashed" itself
        keys = client.keys(path)
        assert set(keys.values()) >= {"train/loss", "valid/ppl", "sys/gpu1/util"}
        assert client.keys(path, after=max(keys)) == {}

        batch = client.points(path)
        with engine.connect() as conn:
            want = fetch_points(conn, [m.id for m in made])
        assert batch.cursor == want.cursor and not batch.more
        assert batch.run_ids.tolist() == want.run_ids
        assert batch.key_ids.tolist() == want.key_ids
        assert batch.steps.tolist() == want.steps
        assert batch.walls.tolist() == want.walls
        assert np.array_equal(batch.values, np.array(want.values), equal_nan=True)
        assert np.isnan(batch.values).sum() == 1 and np.isposinf(batch.values).sum() == 1

        only_cos = client.points(path, run_ids=[made[1].id])
        assert set(only_cos.run_ids.tolist()) == {made[1].id}
        assert client.points(path, run_ids=[]).cursor == 0

        events, cursor, more = client.events(path)
        assert [e[6] for e in events] == ["step 200", "step 400", "loss is NaN"]
        assert cursor == events[-1][0] and not more
        assert client.events(path, after=cursor)[0] == []


def test_points_page_by_cursor_and_limit_without_loss_or_repeat(sample):
    path, engine, made = sample
    with agent_process() as (client, _):
        cursor, seen = 0, []
        while True:
            batch = client.points(path, cursor, limit=3)
            assert len(batch) <= 3
            seen += list(zip(batch.run_ids.tolist(), batch.steps.tolist(), strict=True))
            cursor = batch.cursor
            if not batch.more:
                break
        with engine.connect() as conn:
            want = fetch_points(conn, [m.id for m in made])
        assert seen == list(zip(want.run_ids, want.steps, strict=True))
        add_points(engine, made[0].id, {"train/loss": [(500, -math.inf)]})
        tail = client.points(path, cursor)
        assert tail.steps.tolist() == [500] and np.isneginf(tail.values[0])


def test_poll_returns_everything_new_in_one_round_trip_and_idle_is_tiny(sample):
    path, engine, made = sample
    with agent_process() as (client, _):
        header, payload = client.receive(client.send_poll(path, StoreCursor()))
        assert len(header["runs"]) == 3 and len(header["events"]) == 3
        assert header["n"] == len(payload) // wire.ROW_PACKED.size > 0
        cursor = StoreCursor(
            header["points_cursor"],
            header["events_cursor"],
            header["keys_cursor"],
            header["runs_fp"],
            header["beats_fp"],
        )
        before = client.bytes_sent + client.bytes_received
        idle, payload = client.receive(client.send_poll(path, cursor))
        idle_bytes = client.bytes_sent + client.bytes_received - before
        assert payload == b"" and idle["n"] == 0
        assert "runs" not in idle and "beats" not in idle and idle["events"] == []
        assert idle_bytes <= 2048, idle_bytes

        # A heartbeat alone sends the small beat rows, not the runs with their configs.
        with engine.begin() as conn:
            conn.execute(
                text("UPDATE runs SET heartbeat_at = heartbeat_at + 1 WHERE id = :i"),
                {"i": made[2].id},
            )
        beat, _ = client.receive(client.send_poll(path, cursor))
        assert "runs" not in beat and [b[0] for b in beat["beats"]] == [m.id for m in made]
        add_events(engine, made[0].id, [("note", "hello", 401)], wall0=0.0)
        new, _ = client.receive(client.send_poll(path, cursor))
        assert [e[6] for e in new["events"]] == ["hello"]


def test_compressed_replies_decode_the_same(tmp_path):
    engine = new_store(tmp_path / "big.db")
    run = make_run(engine, points={"x": [(i, math.sin(i)) for i in range(20_000)]})
    with agent_process() as (client, _):
        plain = client.points(str(tmp_path / "big.db"))
        client.compress = True
        before = client.bytes_received
        packed = client.points(str(tmp_path / "big.db"))
        assert client.bytes_received - before < len(plain) * wire.ROW_PACKED.size
    assert np.array_equal(plain.values, packed.values) and packed.cursor == plain.cursor
    assert set(packed.run_ids.tolist()) == {run.id}
    engine.dispose()


def test_store_errors_come_back_as_error_frames_and_the_agent_keeps_serving(tmp_path, sample):
    path, _engine, _ = sample
    (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    newer = tmp_path / "newer.db"
    new_store(newer).dispose()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with agent_process() as (client, proc):
        with pytest.raises(StoreNotFound, match="no store at"):
            client.runs(str(tmp_path / "missing.db"))
        with pytest.raises(NotAStore, match="not a SQLite database"):
            client.runs(str(tmp_path / "junk.db"))
        with pytest.raises(NotAStore, match="not a reslog store"):
            client.keys(str(tmp_path / "other.db"))
        with pytest.raises(NotAStore, match="directory"):
            client.runs(str(tmp_path))
        with pytest.raises(SchemaTooNew, match="schema 9999"):
            client.points(str(newer))
        with pytest.raises(AgentRemoteError, match="unknown op"):
            client.call("frobnicate")
        with pytest.raises(AgentRemoteError, match="must be an integer"):
            client.call("points", store=path, after="7")
        assert len(client.runs(path)) == 3  # still serving
        assert proc.poll() is None


def test_a_broken_stream_ends_the_agent_with_an_error_frame():
    with agent_process() as (client, proc):
        client.wfile.write(b"\xff\xff\xff\xff\x00\x00\x00\x00")
        client.wfile.flush()
        with pytest.raises(AgentConnectionError, match="bad frame prefix"):
            client.receive(1)
        assert proc.wait(timeout=10) == 2


def test_a_large_backlog_read_by_helper_processes_is_identical(tmp_path, monkeypatch):
    engine = new_store(tmp_path / "p.db")
    for r in range(3):
        make_run(
            engine,
            name=f"r{r}",
            points={
                f"k{k}": [(s, math.nan if s % 50 == 0 else s / 7) for s in range(700)]
                for k in range(2)
            },
        )
    engine.dispose()
    monkeypatch.setattr(wire, "PARALLEL_MIN_ROWS", 100)
    store = wire.Store(str(tmp_path / "p.db"))
    try:
        serial_head, serial = store.points({"after": 5, "limit": 3000})
        head, parallel = store.points({"after": 5, "limit": 3000, "jobs": 3})
        run_only, _ = store.points({"after": 0, "run_ids": [2], "jobs": 3})
    finally:
        store.close()
    assert head == serial_head and serial_head["n"] == 3000 and serial_head["more"]
    assert parallel == serial
    assert run_only["n"] == 1400


def _old_pythons() -> list[str]:
    """Python 3.8 interpreters that really run here (a pyenv shim may exist and still fail)."""
    found = []
    for cand in ("/root/.pyenv/versions/3.8.18/bin/python", "python3.8"):
        exe = shutil.which(cand)
        if exe is None:
            continue
        probe = subprocess.run(
            [exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 8)":
            found.append(exe)
            break
    return found


@pytest.mark.parametrize("python", _old_pythons())
def test_the_agent_runs_under_an_old_python(python, sample):
    """Hosts may only have an old python3; run this where one is installed."""
    path, _engine, _ = sample
    proc = subprocess.Popen(
        [python, "-I", "-S", str(AGENT_PATH)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    client = AgentClient(proc.stdout, proc.stdin)
    try:
        assert client.hello()["python"].startswith("3.8")
        assert len(client.points(path)) == 26
    finally:
        client.close()
        proc.wait(timeout=10)


def test_an_overview_samples_every_series_evenly_without_aliasing(tmp_path):
    # 31 keys interleaved per step and a sample of 1 row in 31: `id % 31` would see one key
    # only; the hashed sample must see all of them about equally, and the sparse key whole.
    path = tmp_path / "wide.db"
    engine = new_store(path)
    run = make_run(engine, name="wide")
    engine.dispose()
    con = sqlite3.connect(path)
    keys = [
        con.execute("INSERT INTO keys (name) VALUES (?)", (f"k{i}",)).lastrowid for i in range(31)
    ]
    sparse = con.execute("INSERT INTO keys (name) VALUES ('valid/loss')").lastrowid
    rows = []
    for step in range(3000):
        rows += [(run.id, k, step, 1e9 + step, float(step)) for k in keys]
        if step % 250 == 0:
            rows.append((run.id, sparse, step, 1e9 + step, -1.0))
    con.executemany(
        "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, ?, ?, ?, ?)", rows
    )
    con.commit()
    high = con.execute("SELECT max(id) FROM points").fetchone()[0]
    con.close()
    from resplot.agent_client import decode_points

    with agent_process() as (client, _):
        small, _ = client.receive(client.send_poll(str(path), StoreCursor(), overview=3000))
        assert "overview" not in small  # 93,012 rows is below the default threshold

        cursor = StoreCursor()
        reply, payload = client.receive(
            client.send_poll(str(path), cursor, overview=3000, overview_min=10_000)
        )
        assert reply["overview"] == high and reply["points_cursor"] == 0 and reply["more"]
        batch = decode_points(reply, payload)
        ids, ns = np.unique(batch.key_ids, return_counts=True)
        counts = dict(zip(ids.tolist(), ns.tolist(), strict=True))
        assert set(counts) == {*keys, sparse}
        assert counts[sparse] == 12
        dense = np.array([counts[k] for k in keys])
        assert 2700 < dense.sum() < 3300
        assert dense.min() > 0.5 * dense.mean() and dense.max() < 1.5 * dense.mean()
        for k in keys:
            steps = batch.steps[batch.key_ids == k]
            assert np.all(np.diff(steps) > 0) and steps.max() > 2700  # id order, whole span

        # Helper interpreters reading id spans of the sample give the same bytes.
        again, payload3 = client.receive(
            client.send_poll(str(path), cursor, overview=3000, overview_min=10_000, jobs=3)
        )
        assert again["n"] == reply["n"] and payload3 == payload

        # After a cursor: only rows past it are sampled.
        half = high // 2
        reply, payload = client.receive(
            client.send_poll(
                str(path), StoreCursor(points=half), overview=3000, overview_min=10_000
            )
        )
        assert reply["points_cursor"] == half
        assert decode_points(reply, payload).steps.min() >= 1400


def test_a_runs_list_larger_than_16_mib_is_served(tmp_path):
    """Thousands of runs with big configs (a sweep store): the reply header is over 16 MiB.
    It used to be refused as a broken frame, so the source reconnected forever."""
    from schema.tables import runs

    path = tmp_path / "sweep.db"
    engine = new_store(path)
    config = '{"' + '": "v", "'.join(f"k{i:04d}" for i in range(700)) + '": "v"}'  # ~6 KB
    with engine.begin() as conn:
        conn.execute(
            runs.insert(),
            [
                {
                    "uid": f"u{i:08d}",
                    "project": "p",
                    "name": f"run{i}",
                    "status": "finished",
                    "created_at": 1.7e9 + i,
                    "heartbeat_at": 1.7e9 + i,
                    "config": config,
                }
                for i in range(3000)
            ],
        )
    engine.dispose()
    with agent_process() as (client, _proc):
        rows = client.runs(str(path))
        assert len(rows) == 3000 and rows[-1]["config"] == config
        client.hello()  # still in step


def test_a_reply_too_large_for_a_frame_is_an_error_reply_and_the_stream_stays_in_step(
    sample, monkeypatch
):
    path, _engine, _made = sample
    monkeypatch.setattr(wire, "MAX_HEADER", 400)  # the sample's runs take more than that
    requests, out = io.BytesIO(), io.BytesIO()
    wire.write_frame(requests, {"op": "runs", "id": 1, "store": path})
    wire.write_frame(requests, {"op": "hello", "id": 2})
    requests.seek(0)
    assert wire.serve(requests, out) == 0
    out.seek(0)
    first, _ = wire.read_frame(out)
    assert first["id"] == 1 and not first["ok"] and "too large" in first["error"]["message"]
    second, _ = wire.read_frame(out)
    assert second["id"] == 2 and second["ok"]


def test_a_store_upgraded_in_place_by_a_newer_reslog_is_refused_on_the_next_poll(sample):
    """A newer reslog on the host migrates the store while the agent holds it open (same file):
    the agent must not go on reading columns the new schema may have moved."""
    path, engine, _made = sample
    with agent_process() as (client, _proc):
        client.call("poll", store=path)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(SchemaTooNew, match="newer reslog"):
            client.call("poll", store=path)
        with pytest.raises(SchemaTooNew):
            client.runs(path)


def test_a_store_whose_path_holds_glob_characters_is_found_as_written(tmp_path):
    from tests.fixtures.stores import new_store

    folder = tmp_path / "sweep [lr*2]"
    path = folder / "reslog.db"
    new_store(path).dispose()
    assert wire.discover([str(path)]) == {"stores": [str(path)], "missing": []}
    assert wire.discover([str(folder)]) == {"stores": [str(path)], "missing": []}
    # A path that does not exist is still a pattern.
    assert wire.discover([str(tmp_path / "sweep*" / "*.db")])["stores"] == [str(path)]
