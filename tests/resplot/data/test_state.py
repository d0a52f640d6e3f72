"""View state and settings file: plain data, no widget."""

from __future__ import annotations

import json

import pytest

from resplot.data.model import RunRef
from resplot.data.state import StateError, ViewState
from resplot.ui import settings

A = RunRef("gpu-box", "/data/runs/reslog.db", "a" * 32)
B = RunRef("local", "/tmp/reslog.db", "b" * 32)


def test_round_trip_through_json():
    s = ViewState()
    s.add_source("gpu-box:runs/reslog.db")
    s.set_ticked(A, True)
    s.set_ticked(B, True)
    s.set_page("system")
    s.set_x_axis("tokens")
    s.set_smoothing(0.9)
    s.set_custom_keys("train/* , valid/*")
    s.set_poll_interval(2.5)
    s.paused = True
    s.log_y = False
    s.set_page("ranks")
    s.ranks_job, s.ranks_phase = "torchrun-7f3a9c", "data"
    s.set_ranks_stat("mean")
    back = ViewState.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s
    assert back.ticked == [A, B] and back.custom_keys == ["train/*", "valid/*"]


def test_ticking_is_idempotent_and_ordered():
    s = ViewState()
    s.set_ticked(A, True)
    s.set_ticked(A, True)
    assert s.ticked == [A]
    assert s.toggle(B) is True and s.ticked == [A, B]
    assert s.toggle(A) is False and s.ticked == [B]


@pytest.mark.parametrize(
    ("setter", "value", "message"),
    [
        ("set_page", "gpus", "page must be one of"),
        ("set_x_axis", "epoch", "x-axis must be one of"),
        ("set_smoothing", 1.0, "smoothing must be in"),
        ("set_smoothing", -0.1, "smoothing must be in"),
        ("set_poll_interval", 0.0, "poll interval must be between"),
        ("set_ranks_stat", "p99", "ranks cell must be one of max, mean, min"),
    ],
)
def test_bad_values_are_refused_with_the_allowed_range(setter, value, message):
    with pytest.raises(StateError, match=message):
        getattr(ViewState(), setter)(value)


def test_from_dict_ignores_unknown_keys_and_refuses_bad_values():
    assert ViewState.from_dict({"future_option": 1, "page": "timing"}).page == "timing"
    with pytest.raises(StateError, match="x-axis"):
        ViewState.from_dict({"x_axis": "bogus"})
    with pytest.raises(StateError, match="malformed"):
        ViewState.from_dict({"ticked": [{"source": "x"}]})


def test_settings_path_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RESPLOT_CONFIG", str(tmp_path / "c.json"))
    assert settings.config_path() == tmp_path / "c.json"
    monkeypatch.delenv("RESPLOT_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert settings.config_path() == tmp_path / "xdg" / "resplot" / "settings.json"


def test_settings_save_and_load(tmp_path):
    path = tmp_path / "cfg" / "settings.json"
    st = settings.Settings()
    st.state.set_ticked(A, True)
    st.state.set_page("custom")
    st.window = {"geometry": "abcd"}
    settings.save(st, path)
    back = settings.load(path)
    assert back.state == st.state and back.window == {"geometry": "abcd"}
    assert back.problem is None
    assert not list(path.parent.glob("*.tmp"))


def test_missing_file_gives_defaults(tmp_path):
    loaded = settings.load(tmp_path / "none.json")
    assert loaded.state == ViewState() and loaded.problem is None


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"state": {"page": "nope"}}'])
def test_corrupt_file_is_reported_and_backed_up(tmp_path, content):
    path = tmp_path / "settings.json"
    path.write_text(content)
    loaded = settings.load(path)
    assert loaded.state == ViewState()
    assert "unreadable" in loaded.problem
    backups = list(tmp_path.glob("settings.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_text() == content
    assert not path.exists()
