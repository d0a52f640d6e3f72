"""`resplot sync`: a local mirror of runs, written by the real reslog writer on the source side,
read through the real agent (a subprocess, or over SSH to the sshd fixture), compared row by
row with the source: points, events, series rows, rollups and takes."""

from __future__ import annotations

import math
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

import reslog
import resplot.sources.sync as sync_mod
from resplot.cli import main
from resplot.sources.spec import parse_spec
from resplot.sources.sync import Mirror, SyncError
from resplot.ssh.options import SSHOptions
from schema.store import chunk_read, chunk_write
from schema.store.sqlite_file import readonly_uri
from tests.fixtures import sshd as sshd_fixtures

sshd_env = sshd_fixtures.sshd_env
ssh_config = sshd_fixtures.ssh_config


def contents(path: Path) -> dict[str, list]:
    """A store's rows with ids replaced by what they name (uid, key name): ids differ between a
    source and its mirror, the data must not."""
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        run = "(SELECT uid FROM runs WHERE runs.id = t.run_id)"
        key = "(SELECT name FROM keys WHERE keys.id = t.key_id)"
        agg = (
            "n, nan, posinf, neginf, vmin, vmax, min_at, max_at, vsum, step_lo, step_hi, last, "
            "wall_lo, wall_hi, bits, nonfinite_at"
        )
        return {
            "runs": con.execute(
                "SELECT uid, project, name, status, host, config, summary, tags FROM runs "
                "ORDER BY uid"
            ).fetchall(),
            "points": _points(con),
            "events": con.execute(
                f"SELECT {run}, wall, step, kind, level, title, body FROM events t ORDER BY id"
            ).fetchall(),
            "series": sorted(
                con.execute(
                    f"SELECT {run}, {key}, {agg}, levels, tail_step, tail_wall FROM series t"
                ).fetchall()
            ),
            "rollups": sorted(
                con.execute(f"SELECT {run}, {key}, level, bucket, {agg} FROM rollups t").fetchall()
            ),
            "takes": sorted(con.execute(f"SELECT {run}, {key}, step FROM takes t").fetchall()),
        }
    finally:
        con.close()


def _points(con) -> list:
    """Every point, superseded ones too, series by series (by uid, key name), each series in id
    (arrival) order. Across series the ids of a mirror need not interleave as the source's: a
    sync writes each series of a batch as its own chunks."""
    cur = con.cursor()
    uids = dict(cur.execute("SELECT id, uid FROM runs").fetchall())
    names = dict(cur.execute("SELECT id, name FROM keys").fetchall())
    out = []
    for run_id in sorted(uids, key=uids.get):
        for key_id in sorted(chunk_read.run_keys(cur, "?", run_id), key=names.get):
            out += [
                (uids[run_id], names[key_id], *r[1:])
                for r in chunk_read.series_all(cur, "?", run_id, key_id)
            ]
    return out


def keysets(path: Path) -> set[tuple[str, tuple[str, ...]]]:
    """(run name, key names) of every keyset holding chunks: the keys stored together."""
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        names = dict(con.execute("SELECT id, name FROM keys").fetchall())
        rows = con.execute(
            "SELECT r.name, k.key_ids FROM keysets k JOIN runs r ON r.id = k.run_id"
            " WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.keyset_id = k.id)"
        ).fetchall()
    finally:
        con.close()
    return {(run, tuple(sorted(names[int(i)] for i in text.split(",")))) for run, text in rows}


def unsealed(path: Path) -> int:
    """Head chunks (not sealed yet) in a store."""
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        return con.execute("SELECT count(*) FROM chunks WHERE sealed = 0").fetchone()[0]
    finally:
        con.close()


VSUM = {"series": 2 + 8, "rollups": 4 + 8}  # where the aggregate's sum sits in those rows


def assert_same(got: dict[str, list], want: dict[str, list]) -> None:
    """Equal, except that a sum of floats may differ in its last bits: it depends on how points
    were batched (the training writer's own flushes batch them differently than a sync)."""
    for table, rows in want.items():
        assert len(got[table]) == len(rows), table
        if table not in VSUM:
            assert got[table] == rows, table
            continue
        at = VSUM[table]
        for a, b in zip(got[table], rows, strict=True):
            assert a[:at] + a[at + 1 :] == b[:at] + b[at + 1 :], table
            assert a[at] == pytest.approx(b[at], rel=1e-12, abs=1e-300), table


def log_run(store: Path, name: str, steps: range, *, restart_at: int | None = None, pace: int = 0):
    """A finished run written by reslog: NaN and inf values, an event, and optionally a restart
    (steps going back, as a run resumed from a checkpoint does); `pace`: a pause after every
    `pace` steps, so the writer flushes (and seals) as it goes."""
    run = reslog.init(
        project="sync", name=name, store=str(store), system=False, flush_interval=0.05
    )
    for s in steps:
        value = math.nan if s % 97 == 5 else (math.inf if s % 251 == 7 else 1.0 / (s + 1))
        run.log({"train/loss": value, "train/lr": 3e-4 * (s % 10)}, step=s)
        if s == steps.start + 10:
            run.event("checkpoint", f"step {s}")
        if pace and s % pace == pace - 1:
            time.sleep(0.15)  # > flush_interval
    run.finish()
    if restart_at is not None:  # steps go back only in a process that resumes the run
        again = reslog.init(store=str(store), resume=run.uid, system=False, flush_interval=0.05)
        for s in range(restart_at, restart_at + 50):
            again.log({"train/loss": 0.5 / (s + 1)}, step=s)
        again.finish()
    return run


@pytest.mark.slow
def test_sync_copies_every_row_and_the_same_rollups(tmp_path):
    source = tmp_path / "box" / "reslog.db"
    log_run(source, "a", range(0, 3000), restart_at=1500)
    log_run(source, "b", range(0, 500))
    mirror = tmp_path / "mirror.db"
    with Mirror(mirror) as m:
        report = m.sync(parse_spec(str(source)))
    got, want = contents(mirror), contents(source)
    assert report.points == len(want["points"]) and report.new_runs == 2
    assert want["takes"], "the restart made a take"
    assert_same(got, want)
    assert unsealed(source) == unsealed(mirror) == 0  # ended runs: sealed, as finish() seals
    # Keys logged together share chunks in the mirror as in the source (the resumed take logs
    # train/loss alone: a keyset of its own).
    assert (
        keysets(mirror)
        == keysets(source)
        == {
            ("a", ("train/loss", "train/lr")),
            ("a", ("train/loss",)),
            ("b", ("train/loss", "train/lr")),
        }
    )


@pytest.mark.slow
def test_a_cut_sync_resumes_and_a_second_sync_copies_nothing(tmp_path, monkeypatch):
    source = tmp_path / "box" / "reslog.db"
    monkeypatch.setattr(chunk_write, "SEAL_ROWS", 256)  # sealed chunks of 256 rows: many
    log_run(source, "a", range(0, 2000), restart_at=700, pace=200)
    mirror = tmp_path / "mirror.db"
    monkeypatch.setattr(sync_mod, "BATCH_POINTS", 300)
    with Mirror(mirror) as m:
        first = m.sync(parse_spec(str(source)), max_batches=3)  # cut: as if the laptop lid closed
    assert 0 < first.points < len(contents(source)["points"])
    with Mirror(mirror) as m:  # a new process resumes from the committed cursor
        m.sync(parse_spec(str(source)))
        again = m.sync(parse_spec(str(source)))
    assert again.points == 0 and again.events == 0
    assert_same(contents(mirror), contents(source))
    assert unsealed(mirror) == 0
    assert keysets(mirror) == keysets(source)  # chunks travel whole: keys stay together


def test_sync_follows_a_live_run_and_takes_its_final_status(tmp_path):
    source = tmp_path / "box" / "reslog.db"
    mirror = tmp_path / "mirror.db"
    run = reslog.init(
        project="sync", name="live", store=str(source), system=False, flush_interval=0.05
    )
    stop = threading.Event()

    def train() -> None:
        step = 0
        while not stop.is_set():
            run.log({"train/loss": 1.0 / (step + 1)}, step=step)
            step += 1
            time.sleep(0.001)

    trainer = threading.Thread(target=train)
    trainer.start()
    try:
        with Mirror(mirror) as m:
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 3 and time.monotonic() < deadline:  # three syncs that found new points
                seen += m.sync(parse_spec(str(source))).points > 0
            assert seen == 3
            assert contents(mirror)["runs"][0][3] == "running"
            assert unsealed(mirror) > 0  # a running run's heads stay heads
            stop.set()
            trainer.join()
            run.finish()
            m.sync(parse_spec(str(source)))
    finally:
        stop.set()
        trainer.join()
        run.finish()
    got, want = contents(mirror), contents(source)
    assert_same(got, want)
    assert got["runs"][0][3] == "finished"
    assert unsealed(mirror) == 0  # the sync that copied its end sealed it


@pytest.mark.slow
def test_the_mirror_outlives_the_source_store(tmp_path, capsys):
    source = tmp_path / "box" / "reslog.db"
    log_run(source, "kept", range(0, 400))
    mirror = tmp_path / "mirror.db"
    assert main(["sync", str(source), str(mirror)]) == 0
    assert "1 runs (1 new)" in capsys.readouterr().err
    for path in source.parent.iterdir():  # the instance is released: its disk is gone
        path.unlink()
    assert main(["sync", str(source.parent / "*.db"), str(mirror)]) == 1
    assert "the mirror keeps what it has" in capsys.readouterr().err
    out = tmp_path / "points.csv"
    assert main(["export", str(mirror), "--format", "csv", "-o", str(out)]) == 0
    assert "kept" in out.read_text()
    assert len(contents(mirror)["points"]) == 800


def test_sync_over_ssh(ssh_config, tmp_path):
    source = tmp_path / "box" / "reslog.db"
    log_run(source, "remote", range(0, 1000), restart_at=300)
    mirror = tmp_path / "mirror.db"
    spec, ssh = parse_spec(f"target:{source}"), SSHOptions(ssh_config=ssh_config)
    opts = {"python": sys.executable}
    with Mirror(mirror) as m:
        report = m.sync(spec, ssh=ssh, **opts)
        assert m.sync(spec, ssh=ssh, **opts).points == 0
    assert report.chunks > 0  # the agent on the host sent its chunks as they are
    assert report.points == len(contents(source)["points"])
    assert_same(contents(mirror), contents(source))


@pytest.mark.slow
def test_two_sources_into_one_mirror_keep_their_own_cursors(tmp_path):
    one, two = tmp_path / "a" / "reslog.db", tmp_path / "b" / "reslog.db"
    log_run(one, "one", range(0, 300))
    log_run(two, "two", range(0, 200))
    mirror = tmp_path / "mirror.db"
    assert main(["sync", str(one), str(two), str(mirror)]) == 0
    names = sorted(r[2] for r in contents(mirror)["runs"])
    assert names == ["one", "two"]
    assert len(contents(mirror)["points"]) == 2 * (300 + 200)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sync", "{src}"], "at least one SOURCE and the MIRROR"),
        (["sync", "{src}", "gpu:mirror.db"], "must be a local store path"),
        (["sync", "postgresql://u@h/db", "{tmp}/m.db"], "not supported"),
    ],
)
def test_sync_usage_errors(argv, message, tmp_path, capsys):
    source = tmp_path / "box" / "reslog.db"
    log_run(source, "x", range(0, 10))
    argv = [a.replace("{src}", str(source)).replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_a_postgres_source_is_refused_by_the_api_too(tmp_path):
    with Mirror(tmp_path / "m.db") as m, pytest.raises(SyncError, match="not supported"):
        m.sync(parse_spec("postgresql+psycopg://u@127.0.0.1:1/db"))


def test_a_runs_group_and_job_type_reach_the_mirror(tmp_path):
    """A sweep's group and a run's job type are columns of a later store version than the
    first: the mirror keeps them as the source holds them (its sweep stays one group)."""
    source, mirror = tmp_path / "box" / "reslog.db", tmp_path / "mirror.db"
    source.parent.mkdir()
    run = reslog.init(
        project="p", name="lr3e-4", group="sweep-a", job_type="train", store=source, system=False
    )
    run.log({"loss": 1.0}, step=0)
    run.finish()
    with Mirror(mirror) as m:
        m.sync(parse_spec(str(source)))
    query = "SELECT uid, run_group, job_type FROM runs"
    want = sqlite3.connect(readonly_uri(source), uri=True).execute(query).fetchall()
    got = sqlite3.connect(readonly_uri(mirror), uri=True).execute(query).fetchall()
    assert want[0][1:] == ("sweep-a", "train")
    assert got == want
