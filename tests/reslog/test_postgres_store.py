"""reslog on PostgreSQL (a real server on loopback): the same API, the same read-back."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text

import reslog
from reslog.training import writer as writer_module
from schema.store import points_by_id
from tests.fixtures.postgres import own_postgres  # noqa: F401 - a fixture
from tests.fixtures.tcpproxy import TCPProxy
from tests.reslog.test_reslog_api import read_run

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.postgres


def test_log_finish_and_read_back_with_nan_and_infinities(pg_store):
    run = reslog.init(
        project="p", name="pg", store=pg_store, system=False, config={"lr": 1e-3, "token": "t0"}
    )
    for i in range(300):
        run.log({"train/loss": 1.0 / (i + 1), "train/tokens": i * 4096, "ok": True})
    run.log({"nan": math.nan, "inf": math.inf, "-inf": -math.inf}, step=1000)
    run.summary["best"] = 0.5
    run.alert("spike", level="warning")
    assert run.finish() is True
    info, series, events = read_run(pg_store, run.uid)
    assert info.status == "finished" and info.config == {"lr": 1e-3, "token": "<redacted>"}
    assert info.summary == {"best": 0.5}
    assert series["train/loss"] == [(i, 1.0 / (i + 1)) for i in range(300)]
    assert series["train/tokens"] == [(i, float(i * 4096)) for i in range(300)]
    assert series["ok"][0] == (0, 1.0)
    assert math.isnan(series["nan"][0][1]) and series["nan"][0][0] == 1000
    assert series["inf"] == [(1000, math.inf)] and series["-inf"] == [(1000, -math.inf)]
    assert [(e.kind, e.title) for e in events] == [("alert", "spike")]
    # NaN reads back as None (NULL) from the raw points on PostgreSQL too, so one convention
    # holds on every backend
    engine = create_engine(pg_store)
    with engine.connect() as conn:
        raw = points_by_id.points_after(conn.connection.dbapi_connection.cursor(), "%s", None, 0)
    engine.dispose()
    assert len(raw) == 3 * 300 + 3
    assert [r[3] for r in raw if r[5] is None] == [1000]


def test_two_runs_share_keys_and_resume_continues(pg_store):
    a = reslog.init(project="p", store=pg_store, system=False)
    b = reslog.init(project="p", store=pg_store, system=False)
    a.log({"x": 1.0, "y": 2.0})
    b.log({"y": 3.0, "x": 4.0})
    a.finish()
    b.finish()
    again = reslog.init(store=pg_store, resume=a.uid, system=False)
    assert again.step == 1
    again.log({"x": 5.0})
    again.finish()
    _, series_a, events = read_run(pg_store, a.uid)
    _, series_b, _ = read_run(pg_store, b.uid)
    assert series_a == {"x": [(0, 1.0), (1, 5.0)], "y": [(0, 2.0)]}
    assert series_b == {"x": [(0, 4.0)], "y": [(0, 3.0)]}
    assert [e.kind for e in events] == ["resume"]


def test_server_unreachable_warns_once_and_the_data_arrives_when_it_is_back(pg_store, postgres_url):
    run = reslog.init(project="p", store=pg_store, system=False, flush_interval=0.1)
    run.log({"x": 0.0})
    dbname = pg_store.rsplit("/", 1)[1]
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")

    def set_reachable(ok: bool) -> None:
        with admin.connect() as conn:
            conn.execute(text(f"ALTER DATABASE {dbname} ALLOW_CONNECTIONS {str(ok).lower()}"))
            if not ok:  # cut the writer's open connection, as a server restart would
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :d"
                    ),
                    {"d": dbname},
                )

    try:
        time.sleep(0.5)
        with pytest.warns(RuntimeWarning, match="cannot write") as caught:
            set_reachable(False)
            for i in range(1, 100):
                run.log({"x": float(i)})
            deadline = time.monotonic() + 20
            while run._writer.last_error is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # several failed retries, still one warning
        assert len([w for w in caught if "cannot write" in str(w.message)]) == 1
    finally:
        set_reachable(True)
    assert run.finish(timeout=60) is True
    admin.dispose()
    _, series, _ = read_run(pg_store, run.uid)
    assert series["x"] == [(i, float(i)) for i in range(100)]


def test_a_server_gone_silent_mid_run_is_a_warning_and_a_reconnect_not_a_hang(pg_store):
    """A link that stops carrying packets without closing (a black hole: the proxy keeps the
    sockets open and forwards nothing) would block a write forever; the watchdog breaks it."""
    port = make_url(pg_store).port
    with TCPProxy(port) as proxy:
        url = make_url(pg_store).set(port=proxy.port)
        url = url.update_query_dict({"write_timeout": "2", "connect_timeout": "2"})
        run = reslog.init(store=url.render_as_string(False), system=False, flush_interval=0.1)
        run.log({"x": 0.0})
        deadline = time.monotonic() + 20
        while run._writer.committed < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.warns(RuntimeWarning, match="hung for 2 s") as caught:
            proxy.pause()
            for i in range(1, 100):
                run.log({"x": float(i)})
            deadline = time.monotonic() + 30
            while "hung" not in run._writer._warned and time.monotonic() < deadline:
                time.sleep(0.05)
        assert [w for w in caught if "hung" in str(w.message)]
        proxy.heal()  # the link carries packets again
        assert run.finish(timeout=60) is True
    _, series, _ = read_run(pg_store, run.uid)
    assert series["x"] == [(i, float(i)) for i in range(100)]


def test_a_server_that_never_answers_fails_init_and_ls_with_a_message():
    silent = socket.create_server(("127.0.0.1", 0))  # accepts (in the kernel), never answers
    try:
        url = f"postgresql+psycopg://u@127.0.0.1:{silent.getsockname()[1]}/db?connect_timeout=2"
        with pytest.raises(reslog.StoreError, match=r"cannot open .*timeout"):
            reslog.init(store=url, system=False)
        done = subprocess.run(
            [sys.executable, "-m", "reslog.tools.cli", "ls", url],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode != 0 and "timeout" in done.stderr
    finally:
        silent.close()


def test_a_role_without_create_gets_a_store_error_naming_the_privilege(pg_store):
    owner = create_engine(pg_store, isolation_level="AUTOCOMMIT")
    with owner.connect() as conn:
        conn.execute(text("DROP ROLE IF EXISTS reslog_reader"))
        conn.execute(text("CREATE ROLE reslog_reader LOGIN"))
        conn.execute(text("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
    url = make_url(pg_store).set(username="reslog_reader").render_as_string(False)
    try:
        with pytest.raises(reslog.StoreError) as info:
            reslog.init(store=url, system=False)
        message = str(info.value)
        assert "permission denied for schema public" in message
        assert "the role needs CREATE on schema public" in message
        assert "GRANT CREATE ON SCHEMA public TO <role>" in message
    finally:
        with owner.connect() as conn:
            conn.execute(text("DROP OWNED BY reslog_reader"))
            conn.execute(text("DROP ROLE reslog_reader"))
        owner.dispose()


def test_credentials_in_the_store_url_never_reach_the_run_row(pg_store):
    url = make_url(pg_store).set(password="hunter2").render_as_string(False)
    run = reslog.init(store=url, system=False, config={"db": url})
    run.finish()
    info, _, _ = read_run(pg_store, run.uid)
    assert info.config == {"db": url.replace("hunter2", "<redacted>")}
    assert "hunter2" not in json.dumps(info.config) and "hunter2" not in run.store


def wait_until(done, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done()


def outage_seconds(events) -> int:
    [event] = [e for e in events if e.kind == "writer" and "could not be written" in e.title]
    found = re.search(r"for (?:(\d+)m)?(\d+)s", event.title)
    assert found, event.title
    return int(found.group(1) or 0) * 60 + int(found.group(2))


def test_a_stopped_server_is_retried_on_its_backoff_and_an_outage_ending_in_finish_is_recorded(
    own_postgres,  # noqa: F811 - the fixture
    monkeypatch,
):
    """PostgreSQL stopped mid-run with more than wake_points waiting: every log() used to wake
    the writer (~900 connection attempts a second); the server back only while finish() runs
    left no `writer` event."""
    monkeypatch.setattr(writer_module, "OUTAGE_EVENT_S", 1.0)
    run = reslog.init(project="p", store=own_postgres.url, system=False, flush_interval=0.1)
    writer = run._writer
    run.log({"a": 0.0, "b": 0.0})
    wait_until(lambda: writer.committed >= 2)
    own_postgres.stop()
    stopped = time.monotonic()
    for i in range(60_000):  # 120,000 points waiting: more than wake_points
        run.log({"a": float(i), "b": 1.0})
    wait_until(lambda: writer.failures > 0)
    before, t0 = writer.failures, time.monotonic()
    while time.monotonic() - t0 < 3.0:
        run.log({"a": 1.0, "b": 2.0})
        time.sleep(0.001)
    tries, spent = writer.failures - before, time.monotonic() - t0
    assert tries <= math.log2(spent / 0.1) + 2, (tries, spent)
    own_postgres.start()
    back = time.monotonic()
    assert run.finish(timeout=60) is True  # the outage ends inside finish()
    meta, series, events = read_run(own_postgres.url, run.uid)
    assert meta.status == "finished" and len(series["a"]) == writer.logged // 2
    assert outage_seconds(events) >= int(back - stopped) - 1


def test_a_silent_server_outage_is_recorded_from_the_write_that_hung(pg_store, monkeypatch):
    """The outage began when the write that hung began, not when the watchdog broke it."""
    monkeypatch.setattr(writer_module, "OUTAGE_EVENT_S", 1.0)
    port = make_url(pg_store).port
    with TCPProxy(port) as proxy:
        url = make_url(pg_store).set(port=proxy.port)
        url = url.update_query_dict({"write_timeout": "3", "connect_timeout": "2"})
        with pytest.warns(RuntimeWarning, match="hung for 3 s"):
            run = reslog.init(store=url.render_as_string(False), system=False, flush_interval=0.1)
            run.log({"x": 0.0})
            wait_until(lambda: run._writer.committed >= 1)
            proxy.pause()
            silent = time.monotonic()
            run.log({"x": 1.0})
            wait_until(lambda: "hung" in run._writer._warned)
            time.sleep(2.0)
            proxy.heal()
            healed = time.monotonic()
            wait_until(lambda: run._writer._failing_since is None and run._writer.committed >= 2)
        assert run.finish(timeout=60) is True
    _meta, _series, events = read_run(pg_store, run.uid)
    assert outage_seconds(events) >= int(healed - silent) - 1
