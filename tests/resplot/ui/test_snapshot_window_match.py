"""A snapshot draws each run in the window's colour for it (the settings' colour book), and a
snapshot with nothing to draw exits non-zero naming what matched nothing."""

from __future__ import annotations

import pytest
from matplotlib.colors import to_hex

from resplot.cli import main
from resplot.data.cache import SeriesCache
from resplot.data.state import ViewState
from resplot.headless_cmds import window_colors
from resplot.ui import settings as settings_mod
from resplot.ui.window import MainWindow, make_poller
from tests.fixtures.stores import BASE_TIME, make_run, new_store
from tests.fixtures.windows import settle


def _store(path):
    engine = new_store(path)
    for i in range(4):
        loss = [(s, 3.0 - 0.01 * s + 0.1 * i) for s in range(50)]
        make_run(engine, name=f"run-{i}", created_at=BASE_TIME + i, points={"train/loss": loss})
    engine.dispose()


def _snapshot_colors(monkeypatch, argv) -> dict[str, str]:
    """Run `resplot snapshot` in this process and read back each run's line colour."""
    import resplot.draw.charts as charts

    pages = []
    real = charts.render

    def spy(*args, **kwargs):
        pages.append(real(*args, **kwargs))
        return pages[-1]

    monkeypatch.setattr(charts, "render", spy)
    assert main(argv) == 0
    page = pages[0]
    names = {}
    for (title, _ref, _key), line in page.lines().items():
        if title == "Loss":
            names[line.get_label().removesuffix(" train")] = to_hex(line.get_color())
    return names


@pytest.mark.integration
def test_a_snapshot_uses_the_windows_colours(qtbot, tmp_path, monkeypatch):
    path = tmp_path / "runs.db"
    _store(path)
    settings_path = tmp_path / "settings.json"
    # The window, where the user untick two runs, ticks them back in another order, and
    # picks a colour for one: its book differs from a fresh assignment in name order.
    state = ViewState(auto_tick=False)
    win = MainWindow(SeriesCache(), settings_mod.Settings(state=state), settings_path)
    qtbot.addWidget(win)
    win.resize(1280, 800)
    win.show()
    win.attach_poller(make_poller(win.cache, 0.2, win.ask_host_key))
    win.add_source(str(path))
    qtbot.waitUntil(lambda: len(win.cache.runs()) == 4, timeout=30_000)
    refs = {r.name: r.ref for r in win.cache.runs()}
    for name in ("run-3", "run-1", "run-0", "run-2"):
        win.tick(refs[name], True)
    settle(qtbot, win)
    win.set_run_color(refs["run-1"], "#123456")
    settle(qtbot, win)
    window = {n: win.state.look(r).color for n, r in refs.items()}
    win.close()  # saves the settings
    out = tmp_path / "snap.png"
    argv = ["snapshot", str(path), "-o", str(out), "--config", str(settings_path)]
    assert _snapshot_colors(monkeypatch, argv) == window
    assert window["run-1"] == "#123456"


def test_a_snapshot_with_nothing_to_draw_fails_and_says_why(tmp_path, capsys):
    path = tmp_path / "runs.db"
    _store(path)
    out = tmp_path / "empty.png"
    assert main(["snapshot", str(path), "-o", str(out), "--keys", "nope/*"]) == 1
    err = capsys.readouterr().err
    assert "nothing to draw" in err and "nope/*" in err and "train/loss" in err
    assert not out.exists()
    assert main(["snapshot", str(path), "-o", str(out), "--page", "system"]) == 1
    err = capsys.readouterr().err
    assert "system page found none of its series" in err and "train/loss" in err
    assert not out.exists()


def test_a_snapshot_reads_an_unreadable_settings_file_without_moving_it(tmp_path, capsys):
    """The window's settings are read only by a snapshot: a corrupt file stays where it is (the
    window, which writes a new one, moves it aside), and the snapshot says so and goes on."""
    settings = tmp_path / "settings.json"
    settings.write_text("{ not json", encoding="utf-8")
    assert window_colors(settings) == {}
    assert "is unreadable" in capsys.readouterr().err
    assert settings.read_text(encoding="utf-8") == "{ not json"
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
