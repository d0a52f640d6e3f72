"""Text from a store reaches a terminal as text: `reslog ls/show/tail/export md|latex` output
fed to a real VT emulator (pyte), with run names, keys, config and events that carry escape
sequences (retitle, clear screen, OSC 52 clipboard, colours, cursor moves), bidi overrides and
a 1 MiB name. The hostile rows are written straight into the store, as a store written by
anyone (or an older reslog) can hold them; `reslog.init` itself refuses NUL and caps lengths."""

from __future__ import annotations

import contextlib
import io
import json

import pyte
import pytest

import reslog
from reslog.tools.cli import main
from tests.fixtures.stores import add_events, make_run, new_store

TITLE = "\x1b]2;pwned\x07"  # retitle the window
CLEAR = "\x1b[2J\x1b[H"  # clear the screen, cursor home
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: write the clipboard
RED = "\x1b[31m"
FAKE_ROW = "\r\x1b[Kdeadbeef  prod  fake-run  finished"  # overwrite the line with a forged row
RLO = "\u202e"  # right-to-left override: "txt.exe" shows as "exe.txt"
MARK = "BEFORE-THE-COMMAND"


@pytest.fixture
def hostile_store(tmp_path):
    store = tmp_path / "reslog.db"
    engine = new_store(store)
    made = make_run(
        engine,
        name=f"evil{TITLE}{CLEAR}{FAKE_ROW}",
        project=f"p{CLIPBOARD}",
        uid="a" * 32,
        config={"lr": f"{RED}0.1", f"k{TITLE}": 1, "path": f"{RLO}txt.exe"},
        notes=f"n{CLEAR}",
        points={f"loss{RED}": [(0, 1.0)], "gpu/util": [(0, 50.0)]},
    )
    add_events(
        engine,
        made.id,
        [("alert", f"title{TITLE}{RLO}gnp.exe", 0, "warning", f"line one\nline two{CLEAR}")],
        wall0=1.7e9,
    )
    engine.dispose()
    return store


def add_huge_name(store) -> None:
    engine = new_store(store)
    make_run(engine, name="x" * (1 << 20), uid="b" * 32, points={"loss": [(0, 1.0)]})
    engine.dispose()


def cli_output(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()


def on_screen(output: str) -> tuple[pyte.Screen, str]:
    """(the screen after a terminal printed MARK then `output`, its text)."""
    screen = pyte.HistoryScreen(200, 60, history=100_000)
    stream = pyte.ByteStream(screen)
    stream.feed((MARK + "\r\n" + output.replace("\n", "\r\n")).encode())
    lines = [
        "".join(c.data for c in line.values()).rstrip()
        for line in [*screen.history.top, *[screen.buffer[y] for y in range(screen.lines)]]
    ]
    return screen, "\n".join(lines)


def assert_inert(screen: pyte.Screen, text: str) -> None:
    assert screen.title == ""  # nothing retitled the window
    assert text.lstrip().startswith(MARK)  # nothing cleared the screen
    assert not any(line.startswith("deadbeef") for line in text.splitlines())  # no forged row
    assert RLO not in text
    red = [c for y in range(screen.lines) for c in screen.buffer[y].values() if c.fg != "default"]
    assert red == []  # no colour was switched on


def test_ls_shows_escapes_and_cuts_cells(hostile_store):
    add_huge_name(hostile_store)
    output = cli_output("ls", str(hostile_store))
    screen, text = on_screen(output)
    assert_inert(screen, text)
    assert "evil\\x1b]2;pwned\\x07" in text
    assert len(output) < 2000  # a 1 MiB name made `reslog ls` print 10 MB
    assert "x" * 47 + "…" in text
    full = cli_output("ls", str(hostile_store), "--full")
    assert "x" * (1 << 20) in full and "\x1b" not in full


def test_show_and_tail_escape_names_config_keys_and_events(hostile_store):
    output = cli_output("show", str(hostile_store), "a" * 8)
    screen, text = on_screen(output)
    assert_inert(screen, text)
    assert "\\x1b[31m0.1" in text and "\\u202etxt.exe" in text
    assert "title\\x1b]2;pwned\\x07\\u202egnp.exe" in text
    assert "line one\nline two\\x1b[2J" in text  # a body keeps its lines, nothing else
    assert "loss\\x1b[31m" in text
    tail = cli_output("tail", str(hostile_store), "a" * 8, "--lines", "5")
    assert_inert(*on_screen(tail))


@pytest.mark.parametrize("fmt", ["md", "latex"])
def test_table_exports_keep_whole_values_and_no_controls(hostile_store, fmt):
    output = cli_output("export", str(hostile_store), "--format", fmt)
    screen, text = on_screen(output)
    assert_inert(screen, text)
    assert "\x1b" not in output and RLO not in output
    add_huge_name(hostile_store)
    assert "x" * (1 << 20) in cli_output("export", str(hostile_store), "--format", fmt)  # whole


def test_init_refuses_nul_and_caps_names(tmp_path):
    store = tmp_path / "reslog.db"
    with pytest.raises(ValueError, match=r"name=.*NUL"):
        reslog.init(store=store, name="a\x00b", system=False)
    with pytest.raises(ValueError, match=r"project=.*at most 200"):
        reslog.init(store=store, project="p" * 201, system=False)
    with pytest.raises(ValueError, match=r"tags=.*at most 128"):
        reslog.init(store=store, tags=["t" * 129], system=False)
    run = reslog.init(store=store, name="n" * 200, project="p" * 200, system=False)
    run.finish()
    assert json.loads(json.dumps(run.name)) == "n" * 200
