"""`resplot sync` ships chunks as the source stores them (the agent's `chunks` op): byte for
byte, a head the host sealed between two syncs, a sync killed by SIGKILL, a damaged chunk,
and an agent from before the op. Real stores written by reslog, the real agent (a
subprocess; over SSH in tests/resplot/test_sync.py), real child processes."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import reslog
import resplot.sources.sync as sync_mod
from reslog.tools.cli import main as reslog_main
from resplot.cli import main
from resplot.sources.spec import parse_spec
from resplot.sources.sync import Mirror, SyncError
from schema.store import chunk_codec, chunk_copy, chunk_write
from schema.store.sqlite_file import readonly_uri
from tests.fixtures.sshd import bulk_store
from tests.reslog.agent.test_agent import _old_python, agent_process
from tests.resplot.test_sync import assert_same, contents, keysets, log_run, unsealed

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "a7f5172"  # main before chunks travelled: its agent has no `chunks` op


def chunk_rows(path: Path, sealed: bool | None = None) -> list[tuple]:
    """(id_lo, id_hi, n, sealed, data) of a store's chunks, by id_lo."""
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        where = "" if sealed is None else f" WHERE sealed = {int(sealed)}"
        return con.execute(
            f"SELECT id_lo, id_hi, n, sealed, data FROM chunks{where} ORDER BY id_lo"
        ).fetchall()
    finally:
        con.close()


def cursor_of(mirror: Path) -> int:
    con = sqlite3.connect(readonly_uri(mirror), uri=True)
    try:
        return con.execute("SELECT points_after FROM mirror_cursors").fetchone()[0]
    finally:
        con.close()


def check_ok(store: Path, capsys) -> None:
    capsys.readouterr()
    assert reslog_main(["check", str(store), "--full"]) == 0, capsys.readouterr().err


@pytest.mark.slow
def test_sealed_chunks_arrive_byte_for_byte_and_a_second_store_gets_its_own_ids(tmp_path, capsys):
    one, two = tmp_path / "a" / "reslog.db", tmp_path / "b" / "reslog.db"
    log_run(one, "one", range(0, 1500), restart_at=600)
    log_run(two, "two", range(0, 900))
    mirror = tmp_path / "mirror.db"
    with Mirror(mirror) as m:
        first = m.sync(parse_spec(str(one)))
        second = m.sync(parse_spec(str(two)))
    sealed_one = chunk_rows(one, sealed=True)
    assert first.chunks == len(chunk_rows(one)) == len(sealed_one) > 0
    # The first store of a fresh mirror keeps its ids: its chunks are the source's, byte for
    # byte, bounds and all.
    got = chunk_rows(mirror)
    assert got[: len(sealed_one)] == sealed_one
    # The second store's ids follow the first's; only its ids stream was written again.
    theirs, ours = chunk_rows(two), got[len(sealed_one) :]
    assert second.chunks == len(theirs) == len(ours)
    top = max(r[1] for r in sealed_one)
    for (lo, hi, n, sealed, data), (lo2, hi2, n2, sealed2, data2) in zip(theirs, ours, strict=True):
        assert (lo2 - lo, hi2 - hi, n2, sealed2) == (top, top, n, sealed)
        a, b = chunk_codec.unpack(data), chunk_codec.unpack(data2)
        assert (a.steps, a.walls, a.values) == (b.steps, b.walls, b.values)
        assert list(chunk_codec.decode(data2).ids) == [
            i + top for i in chunk_codec.decode(data).ids
        ]
    want, more = contents(one), contents(two)
    for table in want:
        want[table] += more[table]
    got_contents = contents(mirror)
    for table in ("runs", "series", "rollups", "takes"):
        want[table].sort()
    for rows in (want["points"], got_contents["points"]):
        rows.sort(key=lambda r: r[:2])  # stable: each series stays in id order
    assert_same(got_contents, want)
    check_ok(mirror, capsys)


@pytest.mark.slow
def test_a_head_sealed_on_the_host_between_two_syncs_is_copied_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(chunk_write, "SEAL_ROWS", 300)
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    run = reslog.init(
        project="sync", name="live", store=str(source), system=False, flush_interval=0.05
    )
    step = 0

    def log(n: int) -> None:
        nonlocal step
        for _ in range(n):
            run.log({"train/loss": 1.0 / (step + 1), "train/lr": 1e-3}, step=step)
            step += 1
        time.sleep(0.3)  # flushed

    try:
        log(100)
        assert len(chunk_rows(source, sealed=False)) > 0 == len(chunk_rows(source, sealed=True))
        with Mirror(mirror) as m:
            first = m.sync(parse_spec(str(source)))
            assert first.points == 200 and unsealed(mirror) > 0
            cut = cursor_of(mirror)
            log(250)  # the heads the mirror holds are sealed with newer rows
            straddling = [r for r in chunk_rows(source, sealed=True) if r[0] <= cut < r[1]]
            assert straddling, "the host sealed the copied heads into a larger chunk"
            second = m.sync(parse_spec(str(source)))
            assert second.points == 500
            assert_same(contents(mirror), contents(source))
            log(10)
    finally:
        run.finish()
    with Mirror(mirror) as m:
        m.sync(parse_spec(str(source)))
    assert_same(contents(mirror), contents(source))
    assert unsealed(mirror) == 0
    assert keysets(mirror) == keysets(source)
    check_ok(mirror, capsys)


CHILD = textwrap.dedent(
    """
    import sys
    import resplot.sources.sync as sync_mod
    from resplot.sources.spec import parse_spec
    sync_mod.BATCH_POINTS = 200
    with sync_mod.Mirror(sys.argv[2]) as m:
        m.sync(parse_spec(sys.argv[1]), progress=lambda line: print(line, flush=True))
    print("done", flush=True)
    """
)


@pytest.mark.integration
def test_a_sync_killed_at_any_moment_resumes_with_nothing_lost_or_repeated(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(chunk_write, "SEAL_ROWS", 128)
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    log_run(source, "a", range(0, 3000), restart_at=1200, pace=100)
    assert len(chunk_rows(source)) > 10
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(7)
    kills = 0
    for _ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(source), str(mirror)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert child.stdout is not None
        # Killed a random moment after a random batch: inside a transaction, between two,
        # while the agent reads the next chunks.
        for _line in range(rng.randint(1, 3)):
            if child.stdout.readline().startswith("done"):
                break
        time.sleep(rng.uniform(0, 0.05))
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            kills += 1
        child.communicate()
    assert kills >= 3 and cursor_of(mirror) > 0
    with Mirror(mirror) as m:
        m.sync(parse_spec(str(source)))
        assert m.sync(parse_spec(str(source))).points == 0
    assert_same(contents(mirror), contents(source))
    check_ok(mirror, capsys)


@pytest.mark.slow
def test_a_damaged_chunk_stops_the_sync_and_writes_nothing_of_its_batch(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(chunk_write, "SEAL_ROWS", 256)
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    log_run(source, "a", range(0, 2000), pace=200)
    rows = chunk_rows(source)
    bad_lo = rows[len(rows) // 2][0]
    con = sqlite3.connect(source)
    with con:
        (blob,) = con.execute("SELECT data FROM chunks WHERE id_lo = ?", (bad_lo,)).fetchone()
        flipped = bytearray(blob)
        flipped[len(flipped) // 2] ^= 0x10
        con.execute("UPDATE chunks SET data = ? WHERE id_lo = ?", (bytes(flipped), bad_lo))
    con.close()
    monkeypatch.setattr(sync_mod, "BATCH_POINTS", 300)
    with Mirror(mirror) as m, pytest.raises(SyncError) as err:
        m.sync(parse_spec(str(source)))
    message = str(err.value)
    assert "\n" not in message and "arrived damaged" in message and "CRC-32" in message
    cut = cursor_of(mirror)
    assert 0 < cut < bad_lo
    # Exactly the points up to the committed cursor (a fresh mirror keeps the source's ids).
    con = sqlite3.connect(readonly_uri(mirror), uri=True)
    try:
        have = con.execute("SELECT coalesce(max(id_hi), 0) FROM chunks").fetchone()[0]
    finally:
        con.close()
    assert have == cut
    check_ok(mirror, capsys)
    assert main(["sync", str(source), str(mirror)]) == 1
    assert "arrived damaged" in capsys.readouterr().err


def _as_version_1(store: Path) -> None:
    """Every chunk of the store rewritten in format version 1, stream for stream."""
    with sqlite3.connect(store) as conn:
        for cid, blob in conn.execute("SELECT id, data FROM chunks").fetchall():
            s = chunk_codec.unpack(blob)
            old = chunk_codec.pack(s.n, s.steps, s.walls, s.ids, s.values, 1)
            conn.execute("UPDATE chunks SET data = ? WHERE id = ?", (old, cid))


@pytest.mark.integration
def test_an_agent_without_the_chunks_op_gets_points_as_rows(tmp_path):
    before = tmp_path / "before"
    before.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", BEFORE, "reslog", "schema"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
    # A launcher that takes the archive and the compiled code the client sends (as the boot code
    # would) and runs the agent of the code before instead: a real agent, only older.
    launcher = tmp_path / "old-python"
    launcher.write_text(
        f"#!{sys.executable}\n"
        "import struct, sys\n"
        "for _part in ('archive', 'compiled code'):\n"
        "    size = struct.unpack('<Q', sys.stdin.buffer.read(8))[0]\n"
        "    sys.stdin.buffer.read(size)\n"
        f"sys.path.insert(0, {str(before)!r})\n"
        "from reslog.agent.serve import main\n"
        "sys.exit(main())\n"
    )
    launcher.chmod(0o755)
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    log_run(source, "a", range(0, 800), restart_at=300)
    _as_version_1(source)  # what the code before wrote, and all its agent reads
    with Mirror(mirror) as m:
        report = m.sync(parse_spec(str(source)), python=str(launcher))
    assert report.chunks == 0 and report.points == len(contents(source)["points"])
    assert_same(contents(mirror), contents(source))


@pytest.mark.integration
def test_the_chunks_op_sends_the_stored_bytes_in_bounded_replies_under_python_3_8(
    tmp_path, monkeypatch
):
    python = _old_python()
    monkeypatch.setattr(chunk_write, "SEAL_ROWS", 256)
    source = tmp_path / "box" / "reslog.db"
    # Eight pauses, each a flush that seals ~300 rows: at least four chunks even where a busy
    # machine runs the writer late and two pauses' rows come in one flush (CI once had three
    # chunks of 1,200 steps and four pauses).
    log_run(source, "a", range(0, 2400), pace=300)
    stored = [(lo, hi, n, sealed, bytes(data)) for lo, hi, n, sealed, data in chunk_rows(source)]
    got, after, replies = [], 0, 0
    with agent_process(python=python) as (client, _):
        assert client.hello()["python"].startswith("3.8")
        while True:
            header, sections = client.call(
                "chunks", store=str(source), points_after=after, limit=500
            )
            replies += 1
            _about, data = sections["chunks"]
            at = 0
            for _run, _keys, lo, hi, n, _slo, _shi, sealed, size in header["chunks"]:
                got.append((lo, hi, n, sealed, bytes(data[at : at + size])))
                at += size
            after = header["points_cursor"]
            if not header["more"]:
                break
    assert got == stored and replies >= len(stored) // 2 > 1


def test_a_restart_inside_the_keys_logged_together_is_the_writers_take(tmp_path, capsys):
    """A resumed run logging the same keys from an older step: one keyset, its two sealed
    chunks folded as one group, the restart found in it (the writer's take, same since_id)."""
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    run = reslog.init(project="sync", name="r", store=str(source), system=False)
    for s in range(400):
        run.log({"train/loss": 1.0 / (s + 1), "train/lr": 1e-3}, step=s)
    run.finish()
    again = reslog.init(store=str(source), resume=run.uid, system=False)
    for s in range(200, 300):
        again.log({"train/loss": 0.5 / (s + 1), "train/lr": 2e-3}, step=s)
    again.finish()
    assert len(keysets(source)) == 1 and len(chunk_rows(source)) == 2
    with Mirror(mirror) as m:
        assert m.sync(parse_spec(str(source))).chunks == 2
    got, want = contents(mirror), contents(source)
    assert len(want["takes"]) == 2
    assert_same(got, want)
    con = sqlite3.connect(readonly_uri(mirror), uri=True)
    theirs = sqlite3.connect(readonly_uri(source), uri=True)
    try:
        query = "SELECT since_id, step FROM takes ORDER BY since_id"
        assert con.execute(query).fetchall() == theirs.execute(query).fetchall()  # delta 0
    finally:
        con.close()
        theirs.close()
    check_ok(mirror, capsys)


@pytest.mark.slow
def test_keysets_sealed_out_of_step_are_cut_inside_chunks_and_copied_once(
    tmp_path, monkeypatch, capsys
):
    """Training keys every step, a GPU key every third: their sealed chunks overlap in ids
    all along, so no reply ends between chunks and the agent cuts inside them; each point is
    still copied once, the crossing chunks' rows in two halves."""
    monkeypatch.setattr(chunk_write, "SEAL_ROWS", 64)
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    run = reslog.init(
        project="sync", name="two", store=str(source), system=False, flush_interval=0.05
    )
    for s in range(1500):
        run.log({"train/loss": 1.0 / (s + 1), "train/lr": 1e-3 * (s % 7)}, step=s)
        if s % 3 == 0:
            run.log({"gpu/util": float(s % 100)}, step=s)
        if s % 50 == 49:
            time.sleep(0.1)  # flushed: heads sealed at different steps for the two keysets
    run.finish()
    # The mirror already holds another store's run and key: this store's key and point ids
    # are not the mirror's, so keysets are mapped and ids streams written again.
    other = tmp_path / "other" / "reslog.db"
    first = reslog.init(project="sync", name="other", store=str(other), system=False)
    first.log({"aaa/first": 1.0, "train/lr": 2.0}, step=0)
    first.finish()
    # A reply bound below one sealed chunk of the training keys (64 rows, 128 points): a
    # reply holds a chunk or two, and the next chunk of the other keyset starts inside it.
    monkeypatch.setattr(sync_mod, "BATCH_POINTS", 60)
    with Mirror(mirror) as m:
        m.sync(parse_spec(str(other)))
        report = m.sync(parse_spec(str(source)))
        assert m.sync(parse_spec(str(source))).points == 0
    assert 0 < report.chunks < len(chunk_rows(source))  # some travelled as rows in range
    assert report.points == 2 * 1500 + 500
    got = {t: [r for r in rows if r[0] != first.uid] for t, rows in contents(mirror).items()}
    assert_same(got, contents(source))
    assert keysets(mirror) == keysets(source) | keysets(other)
    assert unsealed(mirror) == 0
    check_ok(mirror, capsys)


def test_legacy_rows_come_as_rows_then_the_chunks_after_them_as_they_are(
    tmp_path, monkeypatch, capsys
):
    """A store an upgrade left half converted: rows in `points` (smaller ids than every
    chunk) come by poll, the chunks logged since as they are, in one sync."""
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    rows = bulk_store(source, runs=1, keys=2, points=700, nan_every=11)
    log_run(source, "new", range(0, 600))
    monkeypatch.setattr(sync_mod, "BATCH_POINTS", 500)
    with Mirror(mirror) as m:
        report = m.sync(parse_spec(str(source)))
    assert report.points == rows + 2 * 600 and report.chunks == len(chunk_rows(source)) > 0
    assert_same(contents(mirror), contents(source))
    check_ok(mirror, capsys)


@pytest.mark.slow
def test_copied_heads_of_a_live_run_are_sealed_once_they_pile_up(tmp_path, monkeypatch, capsys):
    """A live run synced often: the host's heads come as they are; once a keyset's copies
    reach the writer's bound (here 4 heads, the host's own at 256) the mirror seals them."""
    monkeypatch.setattr(chunk_copy, "SEAL_HEADS", 4)
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    run = reslog.init(
        project="sync", name="live", store=str(source), system=False, flush_interval=0.05
    )
    try:
        with Mirror(mirror) as m:
            for round_ in range(2):
                for flush in range(6):
                    for s in range(10):
                        step = round_ * 60 + flush * 10 + s
                        run.log({"train/loss": 1.0 / (step + 1), "train/lr": 1e-3}, step=step)
                    time.sleep(0.15)  # a head a flush
                assert len(chunk_rows(source, sealed=False)) >= 6 * (round_ + 1)
                m.sync(parse_spec(str(source)))
                assert unsealed(mirror) < 4 and len(chunk_rows(mirror, sealed=True)) >= 1
                assert_same(contents(mirror), contents(source))
    finally:
        run.finish()
    with Mirror(mirror) as m:
        m.sync(parse_spec(str(source)))
    assert_same(contents(mirror), contents(source))
    assert unsealed(mirror) == 0
    check_ok(mirror, capsys)
