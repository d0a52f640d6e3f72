"""The window's "keep a local copy" with the real poller and a real store: the copy follows the
source, and when the source's store is gone its runs come back from the copy, marked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from resplot.data.cache import SeriesCache
from resplot.ui import settings as settings_mod
from resplot.ui.local_copies import LocalCopies, data_dir, mirror_name
from resplot.ui.window import MainWindow, make_poller
from tests.fixtures.stores import make_run, new_store


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "box" / "reslog.db"
    engine = new_store(path)
    make_run(engine, name="rented", points={"train/loss": [(s, 1.0 / (s + 1)) for s in range(300)]})
    engine.dispose()
    return path


@pytest.mark.integration
def test_a_kept_source_is_shown_from_its_copy_once_its_store_is_gone(qtbot, store, tmp_path):
    cache = SeriesCache()
    win = MainWindow(cache, settings_mod.Settings(), tmp_path / "settings.json")
    qtbot.addWidget(win)
    poller = make_poller(cache, 0.2, win.ask_host_key)
    copies = LocalCopies(
        tmp_path / "mirrors", ssh=replace(poller.ssh, ask_host_key=None), interval=0.2
    )
    win.attach_local_copies(copies)
    win.attach_poller(poller)
    try:
        spec = str(store)
        win.add_source(spec)
        with qtbot.waitSignal(copies.synced, timeout=30_000):
            copies.start()
            win.local_copies.keep(spec)
        assert copies.mirror_path(spec).exists()
        assert "Keep a local copy" in " ".join(a.text() for a in win.file_menu.actions())
        for path in store.parent.iterdir():
            path.unlink()  # the box is released
        with qtbot.waitSignal(copies.hostGone, timeout=30_000) as gone:
            pass
        assert gone.args[0] == spec
        label = win.local_copies.labels[spec]
        assert label.endswith("(local copy)")
        qtbot.waitUntil(lambda: any(r.ref.source == label for r in cache.runs()), timeout=30_000)
        assert [r.name for r in cache.runs() if r.ref.source == label] == ["rented"]
    finally:
        copies.stop()
        poller.stop()


def test_the_kept_list_survives_a_restart_and_dropping_keeps_the_file(tmp_path, store):
    first = LocalCopies(tmp_path / "mirrors")
    path = first.keep(str(store))
    first.sync_one(str(store))
    again = LocalCopies(tmp_path / "mirrors")
    assert again.is_kept(str(store)) and again.mirror_path(str(store)) == path
    again.drop(str(store))
    assert not LocalCopies(tmp_path / "mirrors").is_kept(str(store)) and path.exists()


@pytest.mark.parametrize(
    ("platform", "env", "expected"),
    [
        ("darwin", {}, "~/Library/Application Support"),
        ("linux", {"XDG_DATA_HOME": "/data/me"}, "/data/me"),
        ("linux", {}, "~/.local/share"),
    ],
)
def test_the_data_directory_follows_each_platform_s_convention(platform, env, expected):
    # Windows: tests/resplot/ssh/test_ssh_portability.py (with Windows path rules)
    got = data_dir(platform, env)
    assert got.name == "resplot"
    assert str(got.parent) == str(Path(expected).expanduser())


def test_mirror_names_are_readable_and_distinct():
    a, b = mirror_name("gpu-box:runs/reslog.db"), mirror_name("gpu-box:runs/reslog.db#x")
    assert a.startswith("gpu-box_runs_reslog.db-") and a.endswith(".db") and a != b
