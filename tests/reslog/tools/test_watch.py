"""`reslog watch`: one line per state change or alert, and an --exec hook per line, against a
real store written by real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import reslog
from reslog.tools.watch import Watcher
from schema.store.connect import open_store
from tests.fixtures.logging_child import ROOT, Child
from tests.fixtures.signals import restore_ctrl_c
from tests.reslog.training.test_run_health import wait_until
from tests.reslog.training.test_writer_faults import wait_for_points


class WatchProcess:
    """`reslog watch STORE --exec CMD` in a subprocess; its stdout lines collected as they come."""

    def __init__(self, store: Path, hook_log: Path) -> None:
        fields = "$RESLOG_RUN|$RESLOG_RUN_ID|$RESLOG_STATUS|$RESLOG_STORE|$RESLOG_MESSAGE"
        hook = f'echo "{fields}" >> {hook_log}'
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reslog.tools.cli",
                "watch",
                str(store),
                "--interval",
                "0.2",
                "--exec",
                hook,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            preexec_fn=restore_ctrl_c,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def saw(self, *words: str) -> str | None:
        return next((ln for ln in self.lines if all(w in ln for w in words)), None)

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()


@pytest.mark.slow
def test_watch_reports_each_change_once_and_runs_the_hook(store_path, tmp_path):
    # Before the watch starts: a finished run with a NaN. That is the baseline, not news.
    old = reslog.init(store=store_path, name="old", system=False)
    old.log({"a": float("nan")})
    old.finish()
    hook_log = tmp_path / "hook.log"
    watch = WatchProcess(store_path, hook_log)
    child = None
    try:
        assert wait_until(lambda: watch.saw("watching", "1 runs, 0 live"))
        child = Child(store_path, stall_after=1.0)
        assert wait_until(lambda: watch.saw("child", "RUNNING", "started on"))
        child.send("log 3")
        child.send("nan")
        assert wait_until(lambda: watch.saw("NAN", "a is not finite (1 NaN; first at step 3)"))
        child.send("alert loss spiked")
        assert wait_until(lambda: watch.saw("ALERT", "loss spiked"))
        child.send("hang 3", wait=False)
        assert wait_until(lambda: watch.saw("STALLED"))  # the status, then the stall event
        assert wait_until(lambda: watch.saw("STALL", "stalled: no step logged for"))
        child.read()
        child.send("log 3")
        assert wait_until(lambda: watch.saw("RUNNING", "logging steps again"))
        os.kill(child.pid, signal.SIGKILL)
        child.proc.wait()
        assert wait_until(lambda: watch.saw("CRASHED", f"process {child.pid}"))
    finally:
        if child is not None:
            child.kill()
        err = watch.stop()
    assert err.strip() == ""
    assert not watch.saw("old")  # nothing about the run that ended before the watch
    statuses = [ln.split()[4] for ln in watch.lines[1:]]
    assert statuses == [
        "RUNNING",
        "NAN",
        "ALERT",
        "STALLED",
        "STALL",
        "RUNNING",
        "STALL",
        "CRASHED",
    ]

    def hook_lines() -> str | None:
        done = hook_log.exists() and hook_log.read_text()
        return done if done and len(done.splitlines()) == 8 else None

    hooks = wait_until(hook_lines)
    rows = [line.split("|", 4) for line in hooks.splitlines()]
    assert {r[0] for r in rows} == {"child"} and {r[1] for r in rows} == {child.uid}
    assert sorted(r[2] for r in rows) == sorted(s.lower() for s in statuses)
    assert {r[3] for r in rows} == {str(store_path)}
    assert any(r[2] == "crashed" and f"process {child.pid}" in r[4] for r in rows)


def test_watch_sees_throttling_onset_once_and_finish(store_path):
    run = reslog.init(store=store_path, name="gpu", system=False, flush_interval=0.05)
    run.log({"sys/gpu0/throttle": 0.0, "train/loss": 1.0})
    assert wait_for_points(store_path, 2) == 2
    engine = open_store(store_path)
    watcher = Watcher(engine, str(store_path))
    assert watcher.poll() == []  # the baseline
    run.log({"sys/gpu0/throttle": float(0x4 | 0x40), "train/loss": 1.0})
    assert wait_for_points(store_path, 4) == 4
    [notice] = watcher.poll()
    assert (
        notice.status == "throttled" and notice.message == "GPU 0 throttled: power cap, hw thermal"
    )
    run.log({"sys/gpu0/throttle": float(0x4), "train/loss": 1.0})  # still throttled: no news
    assert wait_for_points(store_path, 6) == 6
    assert watcher.poll() == []
    run.finish()
    [notice] = watcher.poll()
    assert notice.status == "finished" and notice.message.startswith("finished after")
    engine.dispose()


@pytest.mark.integration
def test_a_failing_hook_is_reported_and_the_watch_goes_on(store_path, tmp_path):
    reslog.init(store=store_path, name="first", system=False).finish()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reslog.tools.cli",
            "watch",
            str(store_path),
            "--interval",
            "0.2",
            "--exec",
            "exit 3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=restore_ctrl_c,
    )
    try:
        assert proc.stdout.readline().startswith("watching")
        run = reslog.init(store=store_path, name="second", system=False)
        assert "RUNNING" in proc.stdout.readline()
        run.finish()
        assert "FINISHED" in proc.stdout.readline()
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    err = proc.stderr.read()
    assert "--exec exited with status 3 for second running" in err


@pytest.mark.slow
def test_hook_values_are_escaped_and_capped_and_a_nul_never_ends_the_watch(store_path, tmp_path):
    """A NUL in a run name killed the watch (traceback, every later alert lost), and a name over
    128 KiB made every hook of its run fail (the kernel refuses such an environment value)."""
    from tests.fixtures.stores import make_run

    reslog.init(store=store_path, name="first", system=False).finish()
    hook_log = tmp_path / "hook.log"
    watch = WatchProcess(store_path, hook_log)
    try:
        wait_until(lambda: watch.saw("watching"))
        engine = open_store(store_path)
        make_run(engine, name="nul\x00name\x1b]2;t\x07", status="finished")
        make_run(engine, name="L" * 200_000, status="finished")
        engine.dispose()
        run = reslog.init(store=store_path, name="after", system=False)
        run.finish()
        lines = wait_until(
            lambda: (
                (
                    hook_log.exists()
                    and len(hook_log.read_text().splitlines()) >= 3
                    and hook_log.read_text()
                )
                or None
            )
        )
        assert watch.proc.poll() is None  # still watching
    finally:
        err = watch.stop()
    names = [line.split("|", 1)[0] for line in lines.splitlines()]
    assert "nul\\x00name\\x1b]2;t\\x07" in names
    assert "L" * 4095 + "…" in names
    assert "after" in names
    assert "Traceback" not in err and "cannot run --exec" not in err, err


@pytest.mark.integration
def test_reslog_notify_builds_its_json_so_a_title_cannot_add_fields():
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[dict] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook?token=secret"
    message = 'x", "channel": "#general", "text": "pwned'
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RESLOG_RUN": 'r"un',
        "RESLOG_STATUS": "alert",
        "RESLOG_MESSAGE": message,
    }
    try:
        for kind in ("slack", "feishu", "dingtalk"):
            done = subprocess.run(
                [sys.executable, "-m", "reslog.tools.cli", "notify", kind, url],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
    finally:
        server.shutdown()
        server.server_close()
    line = f'r"un ALERT: {message}'
    assert bodies == [
        {"text": line},
        {"msg_type": "text", "content": {"text": line}},
        {"msgtype": "text", "text": {"content": line}},
    ]
