"""The Poller under real Qt (offscreen) with real local stores and agent subprocesses."""

from __future__ import annotations

import math
import threading

import pytest

from resplot.data.cache import SeriesCache
from resplot.sources.base import SourceState
from resplot.sources.polling import load_sources
from resplot.sources.spec import parse_spec
from resplot.ssh.options import SSHOptions
from resplot.ui.poller import Poller, backoff_s
from schema.store.errors import SchemaTooNew, StoreNotFound
from tests.fixtures.stores import add_points, make_run, make_sample_runs, new_store


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "reslog.db"
    engine = new_store(path)
    run = make_run(engine, name="r", status="running", points={"train/loss": [(0, 1.0)]})
    yield str(path), engine, run
    engine.dispose()


@pytest.fixture
def poller(qtbot):
    p = Poller()
    p.set_interval(0.05)
    yield p
    assert p.stop(timeout=10)


def test_backoff_doubles_and_is_capped():
    assert [backoff_s(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff_s(50) == 30.0


def test_data_arrives_through_signals_and_live_appends_follow(qtbot, poller, store):
    path, engine, run = store
    label = poller.add_source(parse_spec(path))
    # The same spec, the same source:
    assert label == "local" and poller.add_source(parse_spec(path)) == label
    with qtbot.waitSignals([poller.runsChanged, poller.dataArrived], timeout=20_000):
        poller.start()
    ref = poller.cache.runs()[0].ref
    assert poller.cache.summary(ref, "train/loss").agg[:2] == (1, 0)  # one point, no NaN

    with qtbot.waitSignal(poller.dataArrived, timeout=20_000) as blocker:
        add_points(engine, run.id, {"train/loss": [(1, math.nan), (2, 0.5)]})
    assert blocker.args[0] == {ref}
    steps, _walls, values = poller.cache.live(ref, "train/loss")
    assert steps.tolist() == [1, 2] and math.isnan(values[0])  # the points seen arriving
    assert poller.cache.summary(ref, "train/loss").agg[:2] == (3, 1)  # folded into the summary


def test_a_failing_source_retries_without_stopping_the_others(qtbot, poller, store, tmp_path):
    path, _engine, _run = store
    states: list[tuple[str, SourceState]] = []
    poller.sourceState.connect(lambda label, state: states.append((label, state)))
    bad = poller.add_source(parse_spec(str(tmp_path / "missing" / "reslog.db")))
    good = poller.add_source(parse_spec(path))
    assert bad != good  # both "local": the second gets a distinct label
    with qtbot.waitSignal(poller.errored, timeout=20_000) as err:
        poller.start()
    assert "no store" in err.args[0]
    qtbot.waitUntil(
        lambda: any(s.state == "live" for lb, s in states if lb == good), timeout=20_000
    )
    failed = [s for lb, s in states if lb == bad and s.state == "error"]
    assert failed and failed[0].next_retry_s == 1.0 and "no store" in failed[0].error
    assert [r.name for r in poller.cache.runs()] == ["r"]


def test_the_hook_works_ahead_on_the_worker_before_data_arrive_and_a_failure_is_said_once(
    qtbot, poller, store
):
    """Poller.ahead (the window's work_ahead) runs on the source's worker thread with the
    runs that got points, once they are in the cache and before dataArrived is emitted; when
    it raises, the data still arrive and the failure is said once, not at every poll."""
    path, engine, run = store
    seen: list[tuple[bool, set, int]] = []

    def ahead(refs) -> None:
        ref = next(iter(refs))
        count = poller.cache.summary(ref, "train/loss").agg[0]
        seen.append((threading.current_thread() is threading.main_thread(), set(refs), count))
        if len(seen) > 1:
            raise RuntimeError("a bug in the window's hook")

    poller.ahead = ahead
    arrived: list[int] = []
    poller.dataArrived.connect(lambda _refs: arrived.append(len(seen)))
    errors: list[str] = []
    poller.errored.connect(errors.append)
    poller.add_source(parse_spec(path))
    with qtbot.waitSignal(poller.dataArrived, timeout=20_000):
        poller.start()
    ref = poller.cache.runs()[0].ref
    assert seen == [(False, {ref}, 1)] and arrived == [1]  # the hook first, off the GUI thread
    for step in (1, 2):
        with qtbot.waitSignal(poller.dataArrived, timeout=20_000):
            add_points(engine, run.id, {"train/loss": [(step, 1.0 / step)]})
    assert [s[2] for s in seen] == [1, 2, 3] and arrived == [1, 2, 3]
    assert len(errors) == 1 and "a bug in the window's hook" in errors[0]


def test_pause_remove_and_stop(qtbot, poller, store):
    path, engine, run = store
    label = poller.add_source(parse_spec(path))
    with qtbot.waitSignal(poller.dataArrived, timeout=20_000):
        poller.start()
    poller.set_paused(True)
    add_points(engine, run.id, {"train/loss": [(5, 5.0)]})
    with qtbot.assertNotEmitted(poller.dataArrived, wait=400):
        pass
    with qtbot.waitSignal(poller.dataArrived, timeout=20_000):
        poller.set_paused(False)
    with qtbot.waitSignal(poller.runsChanged, timeout=20_000):
        poller.remove_source(label)
    assert poller.cache.runs() == [] and poller.labels() == []


def test_load_sources_fetches_everything_once(tmp_path):
    engine = new_store(tmp_path / "a.db")
    make_sample_runs(engine)
    engine.dispose()
    cache = load_sources([parse_spec(str(tmp_path / "a.db"))], SeriesCache(), timeout=30)
    assert sorted(r.name for r in cache.runs()) == ["cos_lr1e-3", "wsd-0.5", "wsd_50%#"]
    with pytest.raises(StoreNotFound, match=r"nope\.db"):
        load_sources([parse_spec(str(tmp_path / "nope.db"))], timeout=5)
    newer = new_store(tmp_path / "n.db")
    with newer.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    newer.dispose()
    with pytest.raises(SchemaTooNew, match=r"n\.db"):
        load_sources([parse_spec(str(tmp_path / "n.db"))], timeout=5)


def test_failures_map_to_the_states_the_gui_shows():
    from resplot.sources.base import AuthFailed
    from resplot.sources.client import AgentConnectionError
    from resplot.ui.poller import classify

    assert classify(AuthFailed("denied")) == "auth_failed"
    assert classify(SchemaTooNew("newer")) == "error"
    assert classify(StoreNotFound("gone")) == "error"
    assert classify(AgentConnectionError("cut")) == "retrying"
    assert classify(TimeoutError("slow")) == "retrying"


def test_the_constructor_takes_interval_and_a_host_key_question_for_ssh_sources(qtbot, store):
    path, _engine, _run = store
    asked: list[tuple[str, str, str]] = []

    def ask(host: str, key_type: str, fingerprint: str) -> bool:
        asked.append((host, key_type, fingerprint))
        return False

    cache = SeriesCache()
    poller = Poller(cache, interval=0.3, ssh=SSHOptions(ask_host_key=ask))
    assert poller.cache is cache and poller.interval == 0.3 and poller.ssh.ask_host_key is ask
    assert Poller(cache, 2.0).interval == 2.0 and Poller().ssh.ask_host_key is None
    # No I/O on add_source: the SSH source only gets the question to ask later.
    remote = poller.add_source(parse_spec("poller-test-host.invalid:runs/reslog.db"))
    assert poller.source(remote).link.conn.ask_host_key is ask
    local = poller.add_source(parse_spec(path))  # a local source takes no such option
    assert poller.source(local).spec.text == path
    poller.source(remote).close()
    assert asked == []  # nothing connected, so nothing was asked


def test_stop_does_not_wait_out_a_tcp_connect_to_a_host_that_does_not_answer(qtbot, tmp_path):
    """A host that drops SYNs (down, firewalled): quitting must not wait for the connect
    timeout. A listening socket whose accept queue is full drops SYNs on Linux."""
    import socket

    from resplot.ssh.options import Timeouts

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))  # fills the queue
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host silent\n  HostName 127.0.0.1\n  Port {port}\n  User nobody\n")
    poller = Poller(interval=0.05)
    label = poller.add_source(
        parse_spec("silent:runs/reslog.db"),
        SSHOptions(ssh_config=cfg, timeouts=Timeouts(connect=300.0)),
    )
    link = poller.source(label).link

    def worker_holds_the_link() -> bool:
        if link.lock.acquire(blocking=False):
            link.lock.release()
            return False
        return True

    poller.start()
    qtbot.waitUntil(worker_holds_the_link, timeout=20_000)  # connecting to the silent host
    try:
        assert poller.stop(timeout=0.5)  # with the bug: blocked ~300 s, then False
    finally:
        filler.close()
        listener.close()
