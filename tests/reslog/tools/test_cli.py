"""The reslog CLI against real SQLite stores (and PostgreSQL), in-process and as a subprocess."""

from __future__ import annotations

import csv
import io
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from reslog.tools import maintenance
from reslog.tools.cli import main, store_label
from schema import HEAD_REVISION
from tests.fixtures import stores
from tests.fixtures.signals import restore_ctrl_c
from tests.fixtures.stored_points import point_count
from tests.fixtures.stores import (
    add_events,
    add_points,
    heartbeat,
    make_run,
    make_sample_runs,
    new_store,
    set_status,
)

newer_code = stores.newer_code  # fixture: this code one schema revision ahead

RESLOG = Path(sys.executable).with_name("reslog")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def sample(store_path):
    engine = new_store(store_path)
    make_sample_runs(engine)
    engine.dispose()
    return store_path


# ---- ls ---------------------------------------------------------------------------------------


def test_ls_shows_runs_with_effective_status_step_and_host(capsys, sample):
    code, out, err = run_cli(capsys, "ls", sample)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "uid",
        "project",
        "name",
        "status",
        "step",
        "last",
        "point",
        "duration",
        "host",
    ]
    rows = {line.split()[2]: line.split() for line in lines[1:]}
    assert rows["wsd-0.5"][:5] == ["aaaa0001", "z2all", "wsd-0.5", "finished", "400"]
    assert rows["wsd-0.5"][-2:] == ["2h00m", "gpu-box"]
    assert rows["cos_lr1e-3"][3] == "failed"
    # stored "running", heartbeat long gone: it crashed
    assert rows["wsd_50%#"][3] == "crashed"


def test_the_store_defaults_to_reslog_store_then_runs_reslog_db(
    capsys, sample, tmp_path, monkeypatch
):
    monkeypatch.setenv("RESLOG_STORE", str(sample))
    code, out, _ = run_cli(capsys, "ls")
    assert code == 0 and "wsd-0.5" in out
    code, out, _ = run_cli(capsys, "show", "wsd-0.5")  # RUN alone: STORE is the default
    assert code == 0 and "aaaa0001" in out
    monkeypatch.delenv("RESLOG_STORE")
    monkeypatch.chdir(tmp_path)  # sample lives at tmp_path/runs/reslog.db
    code, out, _ = run_cli(capsys, "ls")
    assert code == 0 and "cos_lr1e-3" in out


def test_ls_of_an_empty_store_and_a_project_filter(capsys, store_path):
    engine = new_store(store_path)
    code, out, _ = run_cli(capsys, "ls", store_path)
    assert code == 0 and out.strip() == f"no runs in {store_path}"
    make_run(engine, name="a", project="p1")
    make_run(engine, name="b", project="p2")
    engine.dispose()
    code, out, _ = run_cli(capsys, "ls", store_path, "--project", "p2")
    assert [line.split()[2] for line in out.splitlines()[1:]] == ["b"]


# ---- errors: one line on stderr, exit 2, nothing created ----------------------------------------

READ_COMMANDS = [
    ["ls"],
    ["show", "{store}", "x"],
    ["tail", "{store}", "x"],
    ["export", "--format", "md"],
    ["check"],
    ["upgrade"],
]


def args_for(command: list[str], store: Path) -> list[str]:
    if "{store}" in command:
        return [a.replace("{store}", str(store)) for a in command]
    return [command[0], str(store), *command[1:]]


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_missing_store_is_an_error_and_is_never_created(capsys, tmp_path, command):
    store = tmp_path / "nowhere" / "reslog.db"
    code, _, err = run_cli(capsys, *args_for(command, store))
    assert code == 2
    assert err == f"reslog: no store at {store}\n"
    assert not store.exists() and not store.parent.exists()


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_file_that_is_not_a_store_is_refused(capsys, tmp_path, command):
    store = tmp_path / "notes.txt"
    store.write_text("not a database, just some text that is long enough " * 20)
    before = store.read_bytes()
    code, _, err = run_cli(capsys, *args_for(command, store))
    assert code == 2
    assert err == f"reslog: {store} is not a SQLite database\n"
    assert store.read_bytes() == before


def test_another_sqlite_database_and_an_empty_file_are_not_stores(capsys, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE things (x)")
    code, _, err = run_cli(capsys, "ls", other)
    assert code == 2 and err == f"reslog: {other} is not a reslog store (tables: things)\n"
    empty = tmp_path / "empty.db"
    empty.touch()
    code, _, err = run_cli(capsys, "show", empty, "x")
    assert code == 2 and err == f"reslog: {empty} is empty: no reslog store there\n"
    assert empty.stat().st_size == 0


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_url_whose_driver_is_not_installed_is_an_error_without_traceback(
    capsys, tmp_path, command
):
    # mysqldb is no dependency of reslog: its import fails like any missing driver would
    url = "mysql+mysqldb://user:secret@127.0.0.1:1/runs"
    code, _, err = run_cli(capsys, *args_for(command, url))
    assert code == 2
    assert err.startswith("reslog: cannot open mysql+mysqldb://user:***@127.0.0.1:1/runs: ")
    assert "MySQLdb" in err and "secret" not in err


def test_a_newer_schema_is_refused(capsys, store_path):
    new_store(store_path).dispose()
    with sqlite3.connect(store_path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    for command in (["ls"], ["check"], ["upgrade"]):
        code, _, err = run_cli(capsys, *args_for(command, store_path))
        assert code == 2
        assert "newer reslog (schema 9999" in err and err.count("\n") == 1


def test_an_older_schema_says_how_to_upgrade_and_upgrade_migrates_it(
    capsys, store_path, newer_code
):
    engine = new_store(store_path)
    make_run(engine, name="old", points={"train/loss": [(0, 1.0)]})
    engine.dispose()
    head = newer_code()
    code, _, err = run_cli(capsys, "ls", store_path)
    assert code == 2
    assert err.strip().endswith(f"upgrade it with: reslog upgrade {store_path}")
    code, out, _ = run_cli(capsys, "check", store_path)
    assert code == 1 and f"reslog upgrade {store_path}" in out

    code, out, err = run_cli(capsys, "upgrade", store_path)
    assert code == 0, err
    backup = Path(f"{store_path}.bak-{HEAD_REVISION}")
    assert out.strip() == (
        f"upgraded {store_path}: schema {HEAD_REVISION} → {head} (backup: {backup})"
    )
    with sqlite3.connect(backup) as conn:  # the backup is the untouched old store
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        assert rows == [(HEAD_REVISION,)]
        assert point_count(conn) == 1
    code, out, _ = run_cli(capsys, "ls", store_path)
    assert code == 0 and "old" in out
    code, out, _ = run_cli(capsys, "upgrade", store_path)
    assert code == 0 and out.strip() == f"{store_path} is already at schema {head}; nothing to do"


def test_upgrade_refuses_while_a_run_is_writing(capsys, store_path, newer_code):
    engine = new_store(store_path)
    make_run(engine, name="live", status="running", heartbeat_at=time.time())
    engine.dispose()
    head = newer_code()
    code, _, err = run_cli(capsys, "upgrade", store_path)
    assert code == 2 and "runs still writing (live)" in err
    code, out, _ = run_cli(capsys, "upgrade", store_path, "--force", "--no-backup")
    assert code == 0 and out.startswith(f"upgraded {store_path}: schema {HEAD_REVISION} → {head}")
    assert not Path(f"{store_path}.bak-{HEAD_REVISION}").exists()


def test_unknown_and_ambiguous_runs(capsys, sample):
    code, _, err = run_cli(capsys, "show", sample, "nope")
    assert code == 2 and err == "reslog: no run 'nope' in this store (see `reslog ls`)\n"
    engine = new_store(sample)
    make_run(engine, name="twin", uid="dddd0001" + "0" * 24)
    make_run(engine, name="twin", uid="dddd0002" + "0" * 24)
    engine.dispose()
    code, out, err = run_cli(capsys, "show", sample, "twin")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("reslog: 'twin' is the name of 2 runs: dddd0001 (started ")
    assert "; give a uid or a unique uid prefix" in err
    lines = out.splitlines()  # the two runs listed, none picked
    assert lines[0].split() == ["uid", "started", "status", "project", "name"]
    assert [line.split()[0] for line in lines[1:]] == ["dddd0001" + "0" * 24, "dddd0002" + "0" * 24]
    code, out, _ = run_cli(capsys, "show", sample, "dddd0002")
    assert code == 0 and "dddd0002" in out


def test_bad_export_format_is_a_usage_error(capsys, sample, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["export", str(sample), "--format", "xlsx", "-o", str(tmp_path / "x")])
    assert exc.value.code == 2
    assert "invalid choice: 'xlsx'" in capsys.readouterr().err
    code, _, err = run_cli(capsys, "export", sample, "-o", tmp_path / "x.xlsx")
    assert code == 2 and err.startswith("reslog: give --format csv|csv-wide|parquet|md|latex")
    assert not (tmp_path / "x.xlsx").exists()


def test_store_label_hides_a_password():
    assert store_label("postgresql+psycopg://me:s3cret@db:5432/runs") == (
        "postgresql+psycopg://me:***@db:5432/runs"
    )


# ---- show -------------------------------------------------------------------------------------


def test_show_prints_config_summary_tags_notes_keys_and_events(capsys, sample):
    code, out, err = run_cli(capsys, "show", sample, "wsd-0.5")
    assert code == 0, err
    assert "run       wsd-0.5  (aaaa0001" in out
    assert "status    finished" in out
    assert "tags      wsd, sweep" in out and "notes     decay for the last 50%" in out
    assert "  optim.lr        0.0003" in out and "  model.layers    8" in out
    assert "  valid/ppl  15.61" in out
    keys = {line.split()[0]: line.split() for line in out.split("\nkeys\n")[1].splitlines()[1:7]}
    # key, points, nan, last step, last, min, max
    assert keys["train/loss"] == ["train/loss", "5", "0", "400", "3", "3", "10.5"]
    assert keys["train/lr"][1:] == ["5", "0", "400", "0", "0", "0.0003"]
    assert "step 400  checkpoint/info  step 400" in out


def test_show_counts_nan_and_keeps_inf(capsys, sample):
    code, out, _ = run_cli(capsys, "show", sample, "cos")
    assert code == 2  # "cos" is not a uid prefix, nor a full name
    code, out, _ = run_cli(capsys, "show", sample, "bbbb")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("train/loss"))
    assert line.split() == ["train/loss", "4", "1", "300", "inf", "4.5", "inf"]
    assert "alert/error  loss is NaN" in out


# ---- tail -------------------------------------------------------------------------------------


def test_tail_follows_a_live_run_until_it_ends(capsys, store_path):
    engine = new_store(store_path)
    run = make_run(
        engine,
        name="live",
        status="running",
        created_at=time.time(),
        heartbeat_at=time.time(),
        points={"train/loss": [(0, 5.0)], "sys/cpu_pct": [(0, 50.0)]},
    )

    def writer() -> None:
        for step in range(1, 6):
            time.sleep(0.05)
            add_points(
                engine, run.id, {"train/loss": [(step, 5.0 - step)], "train/lr": [(step, 0.1)]}
            )
            heartbeat(engine, run.id)
        add_events(engine, run.id, [("checkpoint", "step 5", 5)], wall0=time.time())
        add_points(engine, run.id, {"train/loss": [(6, float("nan"))]})
        set_status(engine, run.id, "finished")

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        code, out, err = run_cli(
            capsys, "tail", store_path, "live", "--keys", "train/*", "--interval", "0.02"
        )
    finally:
        thread.join()
        engine.dispose()
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"live ({run.uid[:8]}) running"
    points = [line for line in lines if line.startswith("step ")]
    assert points[0] == "step 0  train/loss=5"  # sys/cpu_pct filtered out by --keys
    assert "step 5  train/loss=0  train/lr=0.1" in points
    assert points[-1] == "step 6  train/loss=nan"
    assert sum(line.startswith("step 3 ") for line in points) == 1  # nothing twice
    assert any("checkpoint/info  step 5" in line for line in lines)
    assert lines[-1] == "run finished"


def test_tail_of_a_finished_run_prints_its_last_points_and_exits(capsys, sample):
    code, out, _ = run_cli(capsys, "tail", sample, "wsd-0.5", "-n", "2", "--keys", "sys/*")
    assert code == 0
    assert out.splitlines() == [
        "wsd-0.5 (aaaa0001) finished",
        "step 0  sys/gpu1/util=96",
        "step 200  sys/gpu1/util=98",
        "run finished",
    ]  # the last two rows by id are the two sys/gpu1/util samples


def test_tail_n_counts_the_points_of_its_own_run_when_runs_write_side_by_side(capsys, store_path):
    engine = new_store(store_path)
    a = make_run(engine, name="a", uid="a" * 32)
    b = make_run(engine, name="b", uid="b" * 32)
    for step in range(10):  # two live runs: their rows alternate in the points table
        add_points(engine, a.id, {"loss": [(step, float(step))]})
        add_points(engine, b.id, {"loss": [(step, -float(step))]})
    engine.dispose()
    code, out, _ = run_cli(capsys, "tail", store_path, "a", "-n", "4")
    assert code == 0
    assert out.splitlines()[1:] == [f"step {s}  loss={s}" for s in range(6, 10)] + ["run finished"]


# ---- export -----------------------------------------------------------------------------------


def test_export_every_format(capsys, sample, tmp_path):
    for fmt, name in [
        ("csv", "p.csv"),
        ("csv-wide", "w.csv"),
        ("parquet", "p.parquet"),
        ("md", "t.md"),
        ("latex", "t.tex"),
        ("table-csv", "t.csv"),
    ]:
        out = tmp_path / name
        code, _, err = run_cli(capsys, "export", sample, "--format", fmt, "-o", out)
        assert code == 0, err
        assert err == f"wrote {out} ({fmt}, 3 runs)\n"
        assert out.stat().st_size > 0
    golden = Path(__file__).resolve().parents[2] / "golden"
    assert (tmp_path / "t.md").read_text() == (golden / "compare.md").read_text()


def test_export_runs_and_keys_to_stdout_with_format_from_suffix(capsys, sample, tmp_path):
    code, out, _ = run_cli(
        capsys,
        "export",
        sample,
        "--runs",
        "bbbb",
        "wsd-0.5",
        "--keys",
        "valid/p*",
        "--format",
        "csv",
    )
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert {(r[0], r[2]) for r in rows[1:]} == {
        ("cos_lr1e-3", "valid/ppl"),
        ("wsd-0.5", "valid/ppl"),
    }
    code, _, _ = run_cli(
        capsys, "export", sample, "--metrics", "valid/ppl", "-o", tmp_path / "x.tex"
    )
    assert code == 0 and "valid/ppl min step" in (tmp_path / "x.tex").read_text()


def test_export_of_an_unknown_run_writes_nothing(capsys, sample, tmp_path):
    out = tmp_path / "x.csv"
    code, _, err = run_cli(capsys, "export", sample, "--runs", "nope", "-o", out)
    assert code == 2 and "no run 'nope'" in err and not out.exists()


# ---- check ------------------------------------------------------------------------------------


def test_check_reports_stale_runs_and_fix_marks_them_crashed(capsys, sample):
    code, out, _ = run_cli(capsys, "check", sample)
    assert code == 1
    assert (
        "integrity ok" in out and f"schema    {HEAD_REVISION} (this reslog: {HEAD_REVISION})" in out
    )
    assert "PROBLEM  run cccc0003 (wsd_50%#) is stored as running" in out
    assert out.splitlines()[-1] == f"1 problem in {sample}"
    code, out, _ = run_cli(capsys, "check", sample, "--fix")
    assert code == 0 and "fixed     run cccc0003 (wsd_50%#) marked crashed" in out
    code, out, _ = run_cli(capsys, "check", sample)
    assert code == 0 and out.splitlines()[-1] == f"OK  {sample}"
    with sqlite3.connect(sample) as conn:
        row = conn.execute("SELECT status, ended_at FROM runs WHERE name = 'wsd_50%#'").fetchone()
    assert row == ("crashed", 1_700_000_000.0 + 20 + 1800)


def test_check_finds_orphan_rows(capsys, store_path):
    engine = new_store(store_path)
    make_run(engine, name="ok", points={"x": [(0, 1.0)]})
    engine.dispose()
    with sqlite3.connect(store_path) as conn:  # foreign keys are off in a plain connection
        conn.execute(
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (99, 1, 0, 0, 1)"
        )
        conn.execute("INSERT INTO events (run_id, wall, kind, title) VALUES (98, 0, 'note', 'x')")
        run_id = conn.execute("SELECT id FROM runs").fetchone()[0]
        conn.executemany(  # a key that is gone, in a run that is not
            "INSERT INTO points (run_id, key_id, step, wall, value) VALUES (?, 777, ?, 0, 1)",
            [(run_id, s) for s in range(3)],
        )
    code, out, _ = run_cli(capsys, "check", store_path)
    assert code == 1
    assert "PROBLEM  1 row in points points to a missing run" in out
    assert "PROBLEM  3 rows in points point to a missing key" in out
    assert "PROBLEM  1 row in events points to a missing run" in out


def test_check_runs_quick_check_unless_full_and_announces_a_long_pass(capsys, sample, monkeypatch):
    code, out, err = run_cli(capsys, "check", sample)
    assert code == 1  # the sample's stale run, and nothing else
    assert "integrity ok (quick_check; --full also matches every index with its table)" in out
    assert err == ""  # a small store: nothing to announce
    monkeypatch.setattr(maintenance, "ANNOUNCE_BYTES", 1)
    code, out, err = run_cli(capsys, "check", "--full", sample)
    assert code == 1 and "integrity ok\n" in out
    assert f"reading all 0.00 GiB of {Path(sample).name} for SQLite's integrity_check ..." in err


# ---- PostgreSQL -------------------------------------------------------------------------------


@pytest.mark.postgres
def test_ls_show_export_check_on_postgres(capsys, pg_store):
    engine = new_store(pg_store)
    make_sample_runs(engine)
    engine.dispose()
    code, out, err = run_cli(capsys, "ls", pg_store)
    assert code == 0, err
    assert "wsd-0.5" in out and "crashed" in out
    code, out, _ = run_cli(capsys, "show", pg_store, "bbbb")
    assert code == 0 and "train/loss" in out
    code, out, _ = run_cli(capsys, "export", pg_store, "--format", "md")
    golden = Path(__file__).resolve().parents[2] / "golden" / "compare.md"
    assert code == 0 and out == golden.read_text()
    code, out, _ = run_cli(capsys, "check", pg_store, "--fix")
    assert code == 0 and "marked crashed" in out


# ---- the real console script --------------------------------------------------------------------


@pytest.mark.integration
def test_console_script_runs_and_ctrl_c_exits_without_traceback(sample):
    assert RESLOG.exists(), f"console script missing: {RESLOG} (pip install -e .)"
    done = subprocess.run(
        [str(RESLOG), "ls", str(sample)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "wsd-0.5" in done.stdout
    missing = subprocess.run(
        [str(RESLOG), "show", str(sample) + ".nope", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and missing.stderr == f"reslog: no store at {sample}.nope\n"

    engine = new_store(sample)
    make_run(engine, name="live", status="running", heartbeat_at=time.time() + 3600)
    engine.dispose()
    proc = subprocess.Popen(
        [str(RESLOG), "tail", str(sample), "live", "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=restore_ctrl_c,
    )
    try:
        first = proc.stdout.readline()  # the tail is running once its header is out
        assert first.startswith("live (")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err


def test_a_store_warning_is_one_line_and_another_objects_leak_is_not_news(
    capsys, sample, monkeypatch
):
    """The store's own warning (here: a network file system) is printed on one line; a
    ResourceWarning from some other object the collector frees meanwhile (a leaked database
    connection elsewhere in the process) stays ignored, as Python's default filters have it."""
    import warnings

    from reslog.tools import read_cmds

    real = read_cmds.open_store

    def open_store(*args, **kwargs):
        warnings.warn("connection <x> was deleted while still open", ResourceWarning, stacklevel=1)
        warnings.warn(f"{sample} is on a network file system (nfs4)", RuntimeWarning, stacklevel=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(read_cmds, "open_store", open_store)
    code, out, err = run_cli(capsys, "ls", sample)
    assert code == 0 and "wsd" in out
    assert err == f"reslog: warning: {sample} is on a network file system (nfs4)\n"


@pytest.mark.integration
@pytest.mark.parametrize(
    "argv", [["ls"], ["show", "x"], ["tail", "x"], ["check"], ["export", "-o", "out.csv"]]
)
def test_a_fifo_named_as_the_store_is_one_line_not_a_hang(tmp_path, argv):
    """SQLite opening a FIFO blocks until a writer comes: every command refuses it first."""
    fifo = tmp_path / "reslog.db"
    os.mkfifo(fifo)
    out = subprocess.run(
        [sys.executable, "-m", "reslog.tools.cli", argv[0], str(fifo), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    assert out.returncode == 2
    assert out.stderr.strip() == (
        f"reslog: {fifo} is not a regular file (a FIFO, socket or device): not a store"
    )
