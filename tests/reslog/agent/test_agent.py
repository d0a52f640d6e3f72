"""The stdlib agent (as the zipapp resplot ships) and its client, over real pipes to a real agent
process and real stores."""

from __future__ import annotations

import ast
import contextlib
import io
import math
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from reslog.agent import bundle, wire
from reslog.agent.serve import discover, serve
from reslog.agent.store import Store
from reslog.agent.wire import AgentError
from resplot.sources.base import StoreCursor
from resplot.sources.client import (
    AgentClient,
    AgentConnectionError,
    AgentRemoteError,
    decode_columns,
    decode_points,
    decode_rows,
)
from schema import HEAD_REVISION
from schema.store import chunk_read, envelope, points_by_id
from schema.store.errors import NotAStore, SchemaTooNew, StoreNotFound
from schema.store.read import fetch_points
from tests.fixtures.stores import add_events, add_points, new_store

pytestmark = pytest.mark.integration


@contextmanager
def agent_process(*extra: str, python: str | None = None, env=None) -> Iterator:
    # -I -S: no site-packages at all, so a non-stdlib import in the archive fails here.
    proc = subprocess.Popen(
        [python or sys.executable, "-I", "-S", "-c", bundle.boot_code(), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    client = AgentClient(proc.stdout, proc.stdin)
    client.boot()
    try:
        yield client, proc
    finally:
        client.close()
        proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def poll(client: AgentClient, path: str, cursor: StoreCursor | None = None, **kw):
    kw.setdefault("limit", 1_000_000)
    return client.receive(client.send_poll(path, cursor or StoreCursor(), **kw))


def cursor_of(header) -> StoreCursor:
    return StoreCursor(
        header["points_cursor"],
        header["events_cursor"],
        header["keys_cursor"],
        header["runs_fp"],
        header["beats_fp"],
    )


# ---- frames and the archive -------------------------------------------------------------------


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


def test_rows_shuffle_to_the_same_bytes_with_numpy_and_with_the_builtins(monkeypatch):
    rng = np.random.default_rng(5)
    assert chunk_read.numpy_modules()[0] is not None  # numpy's path: imported already
    cases = [(rows, size) for rows in (0, 1, 1023, 1024, 1025, 3000) for size in (1, 7, 110)]
    for rows, size in cases:
        data = rng.integers(0, 256, rows * size, dtype=np.uint8).tobytes()
        want = b"".join(data[k::size] for k in range(size))
        assert wire.shuffle_rows(data, size) == want, (rows, size)
    monkeypatch.setattr(chunk_read, "_numpy", None)  # an import not done (or in flight)
    data = rng.integers(0, 256, 3000 * 110, dtype=np.uint8).tobytes()
    assert wire.shuffle_rows(data, 110) == b"".join(data[k::110] for k in range(110))
    assert chunk_read.numpy_if_imported() is None  # and it did not import numpy itself


def test_a_frame_cut_short_is_a_protocol_error():
    first, body = wire.encode_frame({"op": "hello"}, b"12345678")
    cut = io.BytesIO(first + body[:3])
    with pytest.raises(wire.ProtocolError, match="stream closed"):
        wire.read_frame(cut)


def _imported(node) -> list:
    """The modules an import statement names (absolute imports only)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module + "." + a.name for a in node.names]
    return []


def _imports_guarded(tree) -> list:
    """Import statements inside a `try` whose handlers catch ImportError."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers
        ):
            out += [n for stmt in node.body for n in ast.walk(stmt) if _imported(n)]
    return out


def test_the_archive_is_stdlib_only_python38_and_reproducible():
    data = bundle.archive()
    inside = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for name in zf.namelist():
            inside[name] = zf.read(name).decode()
    assert "__main__.py" in inside and "schema/store/envelope.py" in inside
    ours = {"reslog", "schema"}
    trees = {name: ast.parse(source, feature_version=(3, 8)) for name, source in inside.items()}
    # An import under `try: ... except ImportError:` is optional (numpy's chunk decoder, used
    # where the host has numpy); a module only ever imported that way may import non-stdlib
    # modules itself, since a host without them falls back before running it.
    guarded = {node for tree in trees.values() for node in _imports_guarded(tree)}
    optional = {m for node in guarded for m in _imported(node)}
    # the agent decodes chunks without numpy too
    assert "schema.store.chunk_codec_numpy" in optional
    for name, tree in trees.items():
        module = name.removesuffix(".py").replace("/", ".")
        for node in ast.walk(tree):
            mods = _imported(node)
            if not mods:
                continue
            for mod in mods:
                if mod.split(".")[0] not in ours and (node in guarded or module in optional):
                    continue
                top = mod.split(".")[0]
                if top in ours:  # our own modules must be in the archive itself
                    parts = mod.split(".")
                    found = any(
                        "/".join(parts[:i]) + ".py" in inside
                        or "/".join(parts[:i]) + "/__init__.py" in inside
                        for i in range(len(parts), 0, -1)
                    )
                    assert found, f"{name} imports {mod}, which the archive lacks"
                else:
                    assert top in sys.stdlib_module_names or top == "__future__", (name, mod)
    bundle.archive.cache_clear()
    bundle.archive_hash.cache_clear()
    assert bundle.archive() == data  # same code, same bytes, same name on the hosts
    assert len(bundle.archive_hash()) == 16


def long_store(tmp_path, n=40_000):
    """A run whose series spans levels 1 and 2, with a restart (a resumed take)."""
    import reslog

    path = tmp_path / "long.db"
    run = reslog.init(project="p", name="long", store=path, system=False)
    for s in range(n):
        run.log({"loss": 1.0 + (s == 12_345) * 9.0, "lr": s * 1e-6}, step=s)
    run.finish()
    again = reslog.init(project="p", store=path, system=False, resume=run.uid)
    for s in range(n - 500, n + 100):
        again.log({"loss": 2.0}, step=s)
    again.finish()
    return path


def _numpy_mapped(pid: int) -> bool:
    """Whether a process has numpy's core extension mapped (imported), from /proc."""
    return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()


def test_numpy_is_imported_after_the_first_store_reply_not_at_hello(tmp_path):
    """hello only looks for numpy; its import (which held the GIL through the first poll) starts
    once the first reply read from a store is written, and the fine tiles then fold with it."""
    path = long_store(tmp_path, n=5_000)
    with agent_process() as (client, proc):
        info = client.hello()
        assert info["fold"] == "numpy" and info["pid"] == proc.pid
        client.discover([str(path)])
        assert not _numpy_mapped(proc.pid)  # nothing read from a store yet
        poll(client, str(path), series=True)
        deadline = time.monotonic() + 60
        while not _numpy_mapped(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _numpy_mapped(proc.pid)
        _header, sections = poll(client, str(path), tiles=[[1, 1, -1, 0, 1]])
        counts = decode_rows(sections["buckets"])["n"]  # 1,024 buckets of 2 steps, 2 points
        assert len(counts) == 1024 and (counts == 2).all()


def test_hello_reports_versions():
    with agent_process() as (client, proc):
        info = client.hello()
    assert info["protocol"] == wire.PROTOCOL == 3
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
    with agent_process(env={"HOME": str(tmp_path)}) as (client, _):
        assert client.discover(["~/runs/reslog.db"])[0] == [path]


# ---- the poll ---------------------------------------------------------------------------------


def test_a_first_poll_starts_at_the_end_with_every_series_row(sample):
    path, engine, _made = sample
    with agent_process() as (client, _):
        header, sections = poll(client, path, series=True)
    assert len(header["runs"]) == 3 and len(header["events"]) == 3
    assert header["runs"][2]["status"] == "running"  # raw: the client derives "crashed"
    with engine.connect() as conn:
        dbapi = conn.connection.dbapi_connection.cursor()
        high = points_by_id.max_point_id(dbapi)
        stored = envelope.series_rows(dbapi, "?")
    assert header["points_cursor"] == header["high"] == high and not header["more"]
    assert "points" not in sections  # history comes from series rows and tiles, not points
    cols = decode_columns(sections["series"])
    assert len(cols["run_id"]) == len(stored) == 10
    for i, row in enumerate(stored):
        for j, name in enumerate(envelope.SERIES_COLUMNS):
            got, want = cols[name][i].item(), row[j]
            assert got == want or (want is None and (got != got or got == 0)), (name, got, want)


def test_live_points_after_the_cursor_page_without_loss_or_repeat(sample):
    path, engine, made = sample
    with agent_process() as (client, _):
        header, _ = poll(client, path, series=True)
        cursor = cursor_of(header)
        for run in made:
            add_points(
                engine,
                run.id,
                {
                    "train/loss": [(s, s * 0.5) for s in range(1000, 1010)],
                    "new/key": [(1000, math.nan)],
                },
            )
        seen = []
        while True:
            header, sections = poll(client, path, cursor, limit=7)
            batch = decode_points(sections)
            assert len(batch) <= 7
            seen += list(
                zip(
                    batch.run_ids.tolist(),
                    batch.key_ids.tolist(),
                    batch.steps.tolist(),
                    batch.values.tolist(),
                    strict=True,
                )
            )
            cursor = cursor_of(header)
            if not header["more"]:
                break
        with engine.connect() as conn:
            want = fetch_points(conn, [m.id for m in made], after=high_before(made))
        assert [r[:3] for r in seen] == list(
            zip(want.run_ids, want.key_ids, want.steps, strict=True)
        )
        assert sum(math.isnan(r[3]) for r in seen) == 3
        assert {name for _i, name in header.get("keys", [])} <= {"new/key"}


def high_before(made) -> int:
    return 26  # the sample store's points, all written before the test adds any


def test_an_idle_poll_is_small_and_a_heartbeat_sends_only_beats(sample):
    path, engine, made = sample
    with agent_process() as (client, _):
        header, _ = poll(client, path, series=True)
        cursor = cursor_of(header)
        before = client.bytes_sent + client.bytes_received
        idle, sections = poll(client, path, cursor)
        idle_bytes = client.bytes_sent + client.bytes_received - before
        assert sections == {} and idle["points_cursor"] == cursor.points
        assert "runs" not in idle and "beats" not in idle and idle["events"] == []
        assert idle_bytes <= 1024, idle_bytes

        with engine.begin() as conn:
            conn.execute(
                text("UPDATE runs SET heartbeat_at = heartbeat_at + 1 WHERE id = :i"),
                {"i": made[2].id},
            )
        beat, _ = poll(client, path, cursor)
        assert "runs" not in beat and [b[0] for b in beat["beats"]] == [m.id for m in made]
        add_events(engine, made[0].id, [("note", "hello", 401)], wall0=0.0)
        new, _ = poll(client, path, cursor)
        assert [e[6] for e in new["events"]] == ["hello"]


# ---- errors -------------------------------------------------------------------------------------


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
            poll(client, str(tmp_path / "missing.db"))
        with pytest.raises(NotAStore, match="not a SQLite database"):
            poll(client, str(tmp_path / "junk.db"))
        assert not (tmp_path / "junk.db-wal").exists()  # nothing left beside a foreign file
        with pytest.raises(NotAStore, match="not a reslog store"):
            poll(client, str(tmp_path / "other.db"))
        with pytest.raises(NotAStore, match="directory"):
            poll(client, str(tmp_path))
        with pytest.raises(SchemaTooNew, match="schema 9999"):
            poll(client, str(newer))
        with pytest.raises(AgentRemoteError, match="unknown op"):
            client.call("frobnicate")
        with pytest.raises(AgentRemoteError, match="must be a 64-bit integer"):
            client.call("points", store=path, after="7")
        with pytest.raises(AgentRemoteError, match="at most 4096 tiles"):
            poll(client, path, tiles=[[1, 1, 1, 0, 5000]])
        with pytest.raises(AgentRemoteError, match="lists of 5 64-bit integers"):
            poll(client, path, tiles=[[1, 1, 1, 0]])
        with pytest.raises(AgentRemoteError, match=r"no rollup level|bad tile range"):
            poll(client, path, tiles=[[1, 1, 99, 0, 1]])
        assert len(poll(client, path)[0]["runs"]) == 3  # still serving
        assert proc.poll() is None


def test_a_deeply_nested_header_is_an_error_frame_not_a_dead_agent():
    with agent_process() as (client, proc):
        head = ("[" * 100_000 + "]" * 100_000).encode()
        client.wfile.write(wire.PREFIX.pack(len(head), 0) + head)
        client.wfile.flush()
        frame = wire.read_frame(client.rfile)
        assert frame is not None and frame[0]["ok"] is False
        assert client.hello()["protocol"] == wire.PROTOCOL and proc.poll() is None


def test_a_broken_stream_ends_the_agent_with_an_error_frame():
    with agent_process() as (client, proc):
        client.wfile.write(b"\xff\xff\xff\xff\x00\x00\x00\x00")
        client.wfile.flush()
        with pytest.raises(AgentConnectionError, match="bad frame prefix"):
            client.receive(1)
        assert proc.wait(timeout=10) == 2


def _old_python() -> str:
    """The oldest Python hosts may have (3.8); it is installed here and in CI (pyenv)."""
    for cand in ("/root/.pyenv/versions/3.8.18/bin/python", "python3.8"):
        exe = shutil.which(cand)
        if exe is None:
            continue
        probe = subprocess.run(
            [exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() == "(3, 8)":
            return exe
    from tests.fixtures.postgres import missing_system_dependency

    missing_system_dependency("python3.8 (the oldest interpreter the agent supports)")
    return ""


def test_the_agent_runs_under_python_3_8(tmp_path):
    python = _old_python()
    path = long_store(tmp_path, n=5_000)
    with agent_process(python=python) as (client, _):
        assert client.hello()["python"].startswith("3.8")
        _header, sections = poll(client, str(path), series=True, tiles=[[1, 1, 0, 0, 5]])
        assert len(decode_rows(sections["raw"])["step"]) == 5_000 + 100 - 500 + 500
        cols, _last, more = client.raw(str(path), 1, 1, 0, 10)
        assert cols["step"].tolist() == list(range(10)) and not more
        # Live points from the first id on: every chunk decoded by the stdlib codec, in pages.
        cursor, seen = StoreCursor(points=0), []
        while True:
            header, sections = poll(client, str(path), cursor, limit=3_000)
            batch = decode_points(sections)
            seen += list(
                zip(
                    batch.key_ids.tolist(), batch.steps.tolist(), batch.values.tolist(), strict=True
                )
            )
            cursor = cursor_of(header)
            if not header["more"]:
                break
    engine = new_store(path)
    with engine.connect() as conn:
        want = fetch_points(conn, [1], after=0)
    engine.dispose()
    assert len(seen) == 2 * 5_000 + 600
    assert seen == list(zip(want.key_ids, want.steps, want.values, strict=True))


def test_a_runs_list_larger_than_16_mib_is_served(tmp_path):
    """Thousands of runs with big configs (a sweep store): the reply header is over 16 MiB."""
    from schema.store.tables import runs

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
        rows = poll(client, str(path))[0]["runs"]
        assert len(rows) == 3000 and rows[-1]["config"] == config
        client.hello()  # still in step


def test_a_reply_too_large_for_a_frame_is_an_error_reply_and_the_stream_stays_in_step(
    sample, monkeypatch
):
    path, _engine, _made = sample
    monkeypatch.setattr(wire, "MAX_HEADER", 400)  # the sample's runs take more than that
    requests, out = io.BytesIO(), io.BytesIO()
    wire.write_frame(requests, {"op": "poll", "id": 1, "store": path})
    wire.write_frame(requests, {"op": "hello", "id": 2})
    requests.seek(0)
    assert serve(requests, out) == 0
    out.seek(0)
    first, _ = wire.read_frame(out)
    assert first["id"] == 1 and not first["ok"] and "too large" in first["error"]["message"]
    second, _ = wire.read_frame(out)
    assert second["id"] == 2 and second["ok"]


def test_a_store_upgraded_in_place_by_a_newer_reslog_is_refused_on_the_next_poll(sample):
    path, engine, _made = sample
    with agent_process() as (client, _proc):
        client.call("poll", store=path)
        with engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        with pytest.raises(SchemaTooNew, match="newer reslog"):
            client.call("poll", store=path)


def test_an_older_store_is_refused_with_the_upgrade_command(tmp_path):
    path = tmp_path / "old.db"
    new_store(path).dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    with agent_process() as (client, _proc), pytest.raises(Exception, match="reslog upgrade"):
        poll(client, str(path))


def test_a_store_whose_path_holds_glob_characters_is_found_as_written(tmp_path):
    folder = tmp_path / "sweep [lr*2]"
    path = folder / "reslog.db"
    new_store(path).dispose()
    assert discover([str(path)]) == {"stores": [str(path)], "missing": []}
    assert discover([str(folder)]) == {"stores": [str(path)], "missing": []}
    # A path that does not exist is still a pattern.
    assert discover([str(tmp_path / "sweep*" / "*.db")])["stores"] == [str(path)]


def test_the_agent_leaves_no_files_beside_what_is_not_a_store(tmp_path):
    wal = tmp_path / "wal.db"  # a WAL-mode database of someone else's
    with contextlib.closing(sqlite3.connect(wal)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE theirs (x)")
        conn.commit()
    plain = tmp_path / "plain.db"
    with contextlib.closing(sqlite3.connect(plain)) as conn:
        conn.execute("CREATE TABLE theirs (x)")
        conn.commit()
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    before = sorted(p.name for p in tmp_path.iterdir())
    for path in (wal, plain, corrupt):
        with pytest.raises(AgentError) as info:
            Store(str(path))
        assert info.value.kind == "NotAStore"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
