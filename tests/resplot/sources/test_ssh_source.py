"""SSHSource against a real sshd: the agent run from memory, live incremental fetch, host keys,
auth, ProxyJump, a connection cut mid-fetch and healed, timeouts, one channel per host.

The agent runs under this venv's interpreter (`sys.executable`, an absolute path, so root's
shell rc on the test host cannot swap it) unless a test is about the interpreter search.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from resplot.data.cache import SeriesCache
from resplot.sources import open_source
from resplot.sources.base import AuthFailed
from resplot.sources.client import AgentConnectionError
from resplot.sources.spec import parse_spec
from resplot.sources.ssh import HostKeyNotTrusted, SSHSource
from resplot.ssh.options import SSHOptions, Timeouts
from tests.fixtures import sshd as sshd_fixtures
from tests.fixtures.compare import assert_cache_matches_store, want_every_tile
from tests.fixtures.sshd import SSHEnv, bulk_store, generate_key
from tests.fixtures.stores import add_points, make_run, new_store
from tests.fixtures.tcpproxy import TCPProxy

sshd_env = sshd_fixtures.sshd_env
ssh_config = sshd_fixtures.ssh_config

pytestmark = pytest.mark.sshd


def source(
    spec: str, cfg: Path, tmp_path: Path, python: str | None = sys.executable, **options
) -> SSHSource:
    return SSHSource(parse_spec(spec), SSHOptions(ssh_config=cfg, **options), python=python)


def live_points(cache: SeriesCache) -> int:
    """Points that arrived live, over every series."""
    return sum(
        len(cache.live(r.ref, k)[0])
        for r in cache.runs()
        for k in cache.keys(r.ref)
        if cache.live(r.ref, k) is not None
    )


def poll_until(src: SSHSource, cache: SeriesCache, done, timeout: float = 60.0) -> int:
    """Poll like the poller does (errors retried) until done(); returns how many polls failed."""
    failures = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            src.poll(cache)
        except AgentConnectionError:
            failures += 1
            time.sleep(0.2)
            continue
        if done():
            return failures
        time.sleep(0.05)
    raise AssertionError("the source did not catch up in time")


# -- specs -----------------------------------------------------------------------------------


def test_ssh_url_and_scp_forms_name_host_user_port_path_and_interpreter():
    s = parse_spec("ssh://alice@gpu1:2222/data/runs/*.db")
    assert (s.host, s.user, s.port, s.path, s.python) == (
        "gpu1",
        "alice",
        2222,
        "/data/runs/*.db",
        None,
    )
    assert s.label == "alice@gpu1:2222"
    s = parse_spec("gpu1:runs/reslog.db#python=~/miniconda3/envs/lm/bin/python")
    assert (s.host, s.user, s.port, s.path) == ("gpu1", None, None, "runs/reslog.db")
    assert s.python == "~/miniconda3/envs/lm/bin/python"
    assert parse_spec("ssh://gpu1/~/runs.db").path == "~/runs.db"


def test_open_source_gives_an_ssh_source_for_host_path_specs(ssh_config, tmp_path):
    src = open_source(
        parse_spec("target:/nonexistent/*.db"),
        SSHOptions(ssh_config=ssh_config),
        python=sys.executable,
    )
    try:
        assert isinstance(src, SSHSource)
    finally:
        src.close()


# -- starting the agent ----------------------------------------------------------------------


def agent_command_line(pid: int) -> list[str]:
    """The agent's argv on the host (the fixture's host is this machine)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def test_the_agent_runs_from_memory_and_nothing_is_written_on_the_host(
    ssh_config, tmp_path, monkeypatch
):
    engine = new_store(tmp_path / "s" / "reslog.db")
    make_run(engine, name="a", points={"train/loss": [(0, 2.0), (1, 1.5)]})
    src = source(f"target:{tmp_path}/s/reslog.db", ssh_config, tmp_path)
    try:
        cache = SeriesCache()
        src.poll(cache)
        assert [r.name for r in cache.runs()] == ["a"]
        argv = agent_command_line(src.link.client.info["pid"])
        assert argv[:4] == [sys.executable, "-I", "-S", "-c"]  # the archive came over stdin
        maps = Path(f"/proc/{src.link.client.info['pid']}/maps").read_text()
        assert ".pyz" not in maps and not any(".pyz" in a for a in argv)
    finally:
        src.close()


def test_a_host_without_sftp_serves_its_stores(tmp_path, monkeypatch):
    """dropbear and hardened servers have no SFTP subsystem: the agent needs none."""
    from tests.fixtures.sshd import start_sshd

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    root = tmp_path / "nosftp"
    key = root / "client"
    root.mkdir(mode=0o700)
    (root / "authorized_keys").write_text(generate_key(key))
    server = start_sshd(root, root / "authorized_keys", "nosftp", sftp=False)
    try:
        assert "Subsystem" not in (root / "nosftp_config").read_text()
        (tmp_path / "known").write_text(server.known_hosts_line())
        cfg = tmp_path / "cfg"
        cfg.write_text(
            f"Host nosftp\n  HostName 127.0.0.1\n  Port {server.port}\n"
            f"  IdentityFile {key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {tmp_path / 'known'}\n"
        )
        engine = new_store(tmp_path / "reslog.db")
        make_run(engine, name="a", points={"train/loss": [(0, 2.0), (1, 1.5)]})
        src = source(f"nosftp:{tmp_path}/reslog.db", cfg, tmp_path)
        try:
            cache = SeriesCache()
            src.poll(cache)
            assert [r.name for r in cache.runs()] == ["a"]
        finally:
            src.close()
    finally:
        server.stop()


def test_with_no_python_named_the_launcher_finds_one_on_the_host(ssh_config, tmp_path):
    new_store(tmp_path / "reslog.db")
    src = source(f"target:{tmp_path}/reslog.db", ssh_config, tmp_path, python=None)
    try:
        src.poll(SeriesCache())
        assert tuple(map(int, src.link.client.info["python"].split(".")[:2])) >= (3, 8)
    finally:
        src.close()


def test_a_python_too_old_for_the_agent_is_named_with_its_version(ssh_config, tmp_path):
    from tests.reslog.agent.test_agent_launcher import old_python

    python = old_python("3.6")
    new_store(tmp_path / "reslog.db")
    src = source(f"target:{tmp_path}/reslog.db", ssh_config, tmp_path, python=python)
    try:
        with pytest.raises(
            AgentConnectionError, match=r"needs Python >= 3\.8.*3\.6\.\d+.*#python="
        ):
            src.poll(SeriesCache())
    finally:
        src.close()


def test_a_missing_interpreter_is_reported_by_name(ssh_config, tmp_path):
    new_store(tmp_path / "reslog.db")
    src = source(f"target:{tmp_path}/reslog.db", ssh_config, tmp_path, python="/no/such/python3")
    try:
        with pytest.raises(AgentConnectionError, match=r"/no/such/python3.*not found.*#python="):
            src.poll(SeriesCache())
    finally:
        src.close()


# -- fetching --------------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import math, sys, time
    import reslog
    run = reslog.init(project="p", name="live", store=sys.argv[1], system=False,
                      flush_interval=0.05)
    print("started", flush=True)
    sys.stdin.readline()  # the source is connected: go
    for s in range(int(sys.argv[2])):
        run.log({"train/loss": math.nan if s % 37 == 5 else 10 / (s + 1), "train/lr": 1e-3 * s},
                step=s)
        if s % 20 == 19:
            time.sleep(0.01)
    run.finish()
    """
)


def test_incremental_fetch_while_a_process_logs_ends_equal_to_the_store(ssh_config, tmp_path):
    db = tmp_path / "live" / "reslog.db"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "1500"],
        cwd=Path(__file__).resolve().parents[3],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    src = source(f"target:{tmp_path}/live/*.db", ssh_config, tmp_path)
    cache = SeriesCache()
    sizes = []
    try:
        assert writer.stdout.readline().strip() == "started"  # the store exists from here on
        # The first poll connects and starts the agent (about a second here), longer than the
        # writer takes to log everything: it starts logging once the source is up.
        src.poll(cache)
        writer.stdin.write("go\n")
        writer.stdin.flush()
        while writer.poll() is None:
            src.poll(cache)
            want_every_tile(cache)  # tiles read mid-way, kept current by the live points
            sizes.append(live_points(cache))
            time.sleep(0.05)
        assert writer.wait() == 0
        src.poll(cache)
        engine = new_store(db)
        assert assert_cache_matches_store(cache, engine, src.label, str(db)) == 2
        engine.dispose()
    finally:
        writer.kill()
        src.close()
    run = cache.runs()[0]
    assert [cache.summary(run.ref, k).agg[0] for k in cache.keys(run.ref)] == [1500, 1500]
    assert [r.status for r in cache.runs()] == ["finished"]
    # It really was incremental: several polls saw a part of the points arrive.
    assert len({n for n in sizes if 0 < n < sizes[-1]}) >= 2


def test_many_stores_on_one_host_share_one_connection_and_channel(ssh_config, tmp_path):
    for name in ("a", "b"):
        make_run(new_store(tmp_path / name / "reslog.db"), name=name, points={"x": [(0, 1.0)]})
    one = source(f"target:{tmp_path}/a/reslog.db", ssh_config, tmp_path)
    two = source(f"target:{tmp_path}/b/reslog.db", ssh_config, tmp_path)
    try:
        cache = SeriesCache()
        one.poll(cache)
        channel = one.link.channel
        two.poll(cache)
        assert two.link is one.link
        assert two.link.channel is channel
        assert sorted(r.name for r in cache.runs()) == ["a", "b"]
        one.poll(cache)  # still the same channel after both used it
        assert one.link.channel is channel
    finally:
        one.close()
        two.close()


def test_a_glob_is_expanded_on_the_host(ssh_config, tmp_path):
    for name in ("x1", "x2", "y"):
        make_run(new_store(tmp_path / "runs" / f"{name}.db"), name=name)
    src = source(f"target:{tmp_path}/runs/x*.db", ssh_config, tmp_path)
    try:
        cache = SeriesCache()
        src.poll(cache)
        assert sorted(r.name for r in cache.runs()) == ["x1", "x2"]
    finally:
        src.close()


def test_the_source_socket_has_tcp_nodelay(ssh_config, tmp_path):
    new_store(tmp_path / "reslog.db")
    src = source(f"target:{tmp_path}/reslog.db", ssh_config, tmp_path)
    try:
        src.poll(SeriesCache())
        sock = src.link.conn.socket
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        src.close()


def test_a_store_behind_a_proxyjump_is_read_through_the_jump_host(ssh_config, sshd_env, tmp_path):
    make_run(new_store(tmp_path / "reslog.db"), name="far", points={"x": [(0, 1.0), (1, 2.0)]})
    src = source(f"behind:{tmp_path}/reslog.db", ssh_config, tmp_path)
    try:
        cache = SeriesCache()
        src.poll(cache)
        assert src.link.conn.hops == 2
        assert [r.name for r in cache.runs()] == ["far"]
    finally:
        src.close()


def test_replies_are_compressed_through_a_jump_host_and_plain_to_this_machine(
    ssh_config, sshd_env, tmp_path
):
    """A host on loopback gets its replies plain (zlib there only costs CPU at both ends); any
    other way, here through a jump host, compressed. Both read the same points."""
    points = [(s, 1.0 + (s % 97) / 7.0) for s in range(30_000)]
    make_run(new_store(tmp_path / "reslog.db"), name="r", points={"loss": points})
    got = {}
    for alias in ("target", "behind"):
        src = source(f"{alias}:{tmp_path}/reslog.db", ssh_config, tmp_path)
        try:
            src.poll(SeriesCache())
            client = src.client
            before = client.bytes_received
            cols, _last, more = client.raw(str(tmp_path / "reslog.db"), 1, 1, 0, 2**62)
            got[alias] = (client.compress, client.bytes_received - before, cols)
        finally:
            src.close()
    (plain, plain_bytes, a), (packed, packed_bytes, b) = got["target"], got["behind"]
    assert not more and (plain, packed) == (False, True)
    assert plain_bytes > 30_000 * 24 and packed_bytes < plain_bytes / 3
    assert all(np.array_equal(a[c], b[c]) for c in ("step", "wall", "value", "id"))
    assert a["step"].tolist() == list(range(30_000))


# -- trust and credentials -------------------------------------------------------------------


def test_an_unknown_host_key_is_asked_about_and_refusal_reads_as_auth_failed(
    sshd_env: SSHEnv, tmp_path, monkeypatch
):
    from resplot.ui.poller import classify

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", known=False)
    new_store(tmp_path / "reslog.db")
    asked = []
    src = source(
        f"target:{tmp_path}/reslog.db",
        cfg,
        tmp_path,
        ask_host_key=lambda *a: asked.append(a) or False,
    )
    try:
        with pytest.raises(HostKeyNotTrusted, match="refused the host key") as info:
            src.poll(SeriesCache())
        assert classify(info.value) == "auth_failed"  # the poller retries it slowly
        assert len(asked) == 1 and asked[0][2].startswith("SHA256:")
    finally:
        src.close()
    accepting = source(f"target:{tmp_path}/reslog.db", cfg, tmp_path, ask_host_key=lambda *a: True)
    try:
        accepting.poll(SeriesCache())
        assert f"[127.0.0.1]:{sshd_env.target.port}" in (tmp_path / "ssh/known_hosts").read_text()
    finally:
        accepting.close()


def test_a_changed_host_key_stops_the_source(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", known=False)
    generate_key(tmp_path / "other")
    other = " ".join((tmp_path / "other.pub").read_text().split()[:2])
    (tmp_path / "ssh/known_hosts").write_text(f"[127.0.0.1]:{sshd_env.target.port} {other}\n")
    src = source(f"target:{tmp_path}/x.db", cfg, tmp_path, ask_host_key=lambda *a: True)
    try:
        with pytest.raises(HostKeyNotTrusted, match="HOST KEY CHANGED"):
            src.poll(SeriesCache())
    finally:
        src.close()


def test_a_wrong_key_fails_as_auth_failed_naming_the_key(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    generate_key(tmp_path / "wrong_key")
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", identity=tmp_path / "wrong_key")
    src = source(f"target:{tmp_path}/x.db", cfg, tmp_path)
    try:
        with pytest.raises(AuthFailed, match="wrong_key"):
            src.poll(SeriesCache())
    finally:
        src.close()


# -- broken links ----------------------------------------------------------------------------


def wait_for_bytes(proxy: TCPProxy, n: int, timeout: float = 60.0) -> None:
    """Until `n` more bytes came down through the proxy (a reply well under way)."""
    start = proxy.bytes_down
    deadline = time.monotonic() + timeout
    while proxy.bytes_down < start + n and time.monotonic() < deadline:
        time.sleep(0.002)


def test_a_cut_mid_fetch_then_healed_loses_and_duplicates_no_point(sshd_env, tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    db = tmp_path / "big" / "reslog.db"
    db.parent.mkdir()
    bulk_store(db, runs=4, keys=4, points=25_000, nan_every=1000)
    proxy = TCPProxy(sshd_env.target.port)
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", target_port=proxy.port)
    src = source(f"target:{db}", cfg, tmp_path)
    src.limit = 20_000  # many live batches, so the cut lands between and inside them
    cache = SeriesCache()
    cut_at = []

    def cut_when_streaming() -> None:
        # Once a good part of the reply (live points and raw tiles) has flowed.
        wait_for_bytes(proxy, 600_000)
        proxy.down()
        cut_at.append(proxy.cut())
        time.sleep(0.5)
        proxy.heal()

    try:
        src.poll(cache)  # runs and summaries; the live cursor at the end
        engine = new_store(db)
        for run in cache.runs():
            add_points(
                engine,
                1 + int(run.name[-1]),
                {f"train/k{k}": [(s, 0.5) for s in range(25_000, 40_000)] for k in range(4)},
            )
        want_every_tile(cache, level=1)  # and every raw point of the history, as tiles
        cutter = threading.Thread(target=cut_when_streaming)
        cutter.start()
        with pytest.raises(AgentConnectionError):
            src.poll(cache)
        cutter.join()
        assert cut_at == [1]
        assert live_points(cache) < 4 * 4 * 15_000  # the cut really landed mid-fetch
        poll_until(
            src, cache, lambda: live_points(cache) >= 4 * 4 * 15_000 and cache.wanted_count() == 0
        )
        src.poll(cache)  # and one more: nothing new, nothing repeated
        assert live_points(cache) == 4 * 4 * 15_000
        assert assert_cache_matches_store(cache, engine, src.label, str(db)) == 16
        engine.dispose()
    finally:
        src.close()
        proxy.close()
    assert proxy.connections >= 2  # it did reconnect


def test_a_silent_link_times_out_the_request_and_the_next_poll_reconnects(
    sshd_env, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    make_run(new_store(tmp_path / "reslog.db"), name="r", points={"x": [(0, 1.0)]})
    proxy = TCPProxy(sshd_env.target.port)
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", target_port=proxy.port)
    quick = Timeouts(request=1.0, keepalive_interval=30)
    src = source(f"target:{tmp_path}/reslog.db", cfg, tmp_path, timeouts=quick)
    try:
        cache = SeriesCache()
        src.poll(cache)
        proxy.pause()  # packets vanish; nothing is closed
        with pytest.raises(AgentConnectionError, match="no answer from the agent in 1 s"):
            src.poll(cache)
        assert not src.link.conn.is_open  # a timeout counts as a lost connection
        proxy.heal()
        # The reconnect with the default request timeout: a fresh agent's first answer took
        # more than 1 s once, in CI on a loaded 2-core machine (the timeout under test is the
        # silent link's, above).
        src.link.timeouts = Timeouts(keepalive_interval=30)
        src.poll(cache)
        assert proxy.connections == 2
        assert [r.name for r in cache.runs()] == ["r"]
    finally:
        src.close()
        proxy.close()


def test_close_from_another_thread_unblocks_a_poll_stuck_on_a_dead_link(
    sshd_env, tmp_path, monkeypatch
):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    new_store(tmp_path / "reslog.db")
    proxy = TCPProxy(sshd_env.target.port)
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", target_port=proxy.port)
    src = source(f"target:{tmp_path}/reslog.db", cfg, tmp_path)  # 30 s request timeout
    try:
        src.poll(SeriesCache())
        proxy.pause()
        errors = []

        def stuck_poll() -> None:
            try:
                src.poll(SeriesCache())
            except Exception as exc:
                errors.append(exc)

        worker = threading.Thread(target=stuck_poll)
        worker.start()
        time.sleep(0.3)
        src.close()
        worker.join(10)
        assert not worker.is_alive()
        assert errors and isinstance(errors[0], AgentConnectionError)
    finally:
        proxy.close()


def test_a_killed_agent_is_restarted_on_the_same_connection(ssh_config, tmp_path):
    import os
    import signal

    make_run(new_store(tmp_path / "reslog.db"), name="r", points={"x": [(0, 1.0)]})
    src = source(f"target:{tmp_path}/reslog.db", ssh_config, tmp_path)
    try:
        cache = SeriesCache()
        src.poll(cache)
        sock, pid = src.link.conn.socket, src.link.client.info["pid"]
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(AgentConnectionError, match="agent was killed by a signal"):
            src.poll(cache)
        src.poll(cache)
        assert src.link.conn.socket is sock  # same SSH connection, new channel
        assert src.link.client.info["pid"] != pid
    finally:
        src.close()


def exported_points(path: Path) -> list[tuple]:
    import csv

    with open(path, newline="") as f:
        return [(r["key"], int(r["step"]), r["value"]) for r in csv.DictReader(f)]


@pytest.mark.parametrize("fault", ["cut", "stall"])
def test_an_export_resumes_from_the_page_a_cut_or_a_stall_broke(
    sshd_env, tmp_path, monkeypatch, fault
):
    """`resplot export` failed on any connection cut or a stall longer than the request
    timeout ("cannot write out.csv"), where `resplot sync` recovers exactly."""
    from resplot.ui.exports import export_points

    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    db = tmp_path / "big" / "reslog.db"
    db.parent.mkdir()
    bulk_store(db, runs=1, keys=2, points=30_000)
    proxy = TCPProxy(sshd_env.target.port)
    cfg = sshd_env.make_ssh_config(tmp_path / "ssh", target_port=proxy.port)
    src = source(f"target:{db}", cfg, tmp_path, timeouts=Timeouts(request=2.0))
    src.raw_page = 2_000  # 30 pages: the fault lands between and inside them
    cache = SeriesCache()
    faults = []

    def break_link() -> None:
        wait_for_bytes(proxy, 300_000)
        if fault == "cut":
            proxy.down()
            faults.append(proxy.cut())
            time.sleep(0.5)
        else:
            proxy.pause()  # packets vanish, nothing closes: the request times out
            faults.append(1)
            time.sleep(3.0)
        proxy.heal()

    out = tmp_path / "out.csv"
    try:
        src.poll(cache)
        breaker = threading.Thread(target=break_link)
        breaker.start()
        export_points(cache, src.reader, [r.ref for r in cache.runs()], out, "csv")
        breaker.join()
    finally:
        src.close()
        proxy.close()
    assert faults == [1] and proxy.connections >= 2  # it broke, and the export reconnected
    got = exported_points(out)
    assert len(got) == len(set(got)) == 2 * 30_000  # nothing lost, nothing twice
