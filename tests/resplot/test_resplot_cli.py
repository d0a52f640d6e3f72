"""`resplot snapshot` and `resplot export` on a real store; errors are one line, no traceback."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from resplot.cli import main
from tests.fixtures.stores import BASE_TIME, make_run, new_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(store_path):
    engine = new_store(store_path)
    for i, lr in enumerate((3e-4, 1e-3)):
        make_run(
            engine,
            name=f"lr-{lr:g}",
            config={"lr": lr, "batch_tokens": 524288},
            created_at=BASE_TIME + i,
            points={
                "train/loss": [(s, 4.0 - s / 100 + i) for s in range(200)],
                "train/tokens": [(s, 1024.0 * s) for s in range(200)],
                "valid/loss": [(s, 3.5 - s / 200 + i) for s in range(0, 200, 50)],
                "sys/gpu0/util": [(s, 95.0) for s in range(200)],
                "time/step": [(s, 0.3) for s in range(200)],
                "time/forward": [(s, 0.1) for s in range(200)],
            },
            events=[("checkpoint", "step 100", 100)],
        )
    engine.dispose()
    return str(store_path)


@pytest.mark.parametrize("ext", ["png", "svg", "pdf"])
def test_snapshot_writes_each_format(store, tmp_path, ext, capsys):
    out = tmp_path / f"chart.{ext}"
    assert main(["snapshot", store, "-o", str(out)]) == 0
    data = out.read_bytes()
    if ext == "png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    elif ext == "svg":
        assert ET.fromstring(data).tag.endswith("svg")
    else:
        assert data[:5] == b"%PDF-"
    assert "training page, 2 runs" in capsys.readouterr().err


@pytest.mark.parametrize("page", ["system", "timing", "custom"])
def test_snapshot_pages_runs_and_x_axis(store, tmp_path, page):
    out = tmp_path / f"{page}.svg"
    args = [
        "snapshot",
        store,
        "-o",
        str(out),
        "--page",
        page,
        "--runs",
        "lr-0.001",
        "--x",
        "tokens",
        "--smoothing",
        "0.9",
        "--keys",
        "train/*",
    ]
    assert main(args) == 0
    svg = out.read_text()
    assert "lr-0.001" in svg and "lr-0.0003" not in svg


def test_snapshot_custom_keys_by_glob(store, tmp_path):
    out = tmp_path / "c.svg"
    assert main(["snapshot", store, "-o", str(out), "--keys", "valid/*"]) == 0
    assert "valid/loss" in out.read_text()


@pytest.mark.slow
def test_export_points_and_tables(store, tmp_path):
    long = tmp_path / "p.csv"
    assert main(["export", store, "--format", "csv", "-o", str(long), "--keys", "train/loss"]) == 0
    rows = list(csv.DictReader(io.StringIO(long.read_text())))
    assert len(rows) == 400 and {r["key"] for r in rows} == {"train/loss"}
    wide = tmp_path / "w.csv"
    assert main(["export", store, "--format", "csv-wide", "-o", str(wide)]) == 0
    assert "train/tokens" in wide.read_text().splitlines()[0]
    parquet = tmp_path / "p.parquet"
    assert main(["export", store, "--format", "parquet", "-o", str(parquet)]) == 0
    assert pq.read_table(parquet).num_rows == 2 * (200 * 4 + 4 + 200)
    md = tmp_path / "t.md"
    assert main(["export", store, "--format", "md", "-o", str(md), "--runs", "lr-*"]) == 0
    text = md.read_text()
    assert "| lr" in text and "batch_tokens" not in text  # only the differing config key
    tex = tmp_path / "t.tex"
    assert main(["export", store, "--format", "latex", "-o", str(tex)]) == 0
    assert "\\toprule" in tex.read_text()
    table = tmp_path / "t.csv"
    assert (
        main(
            ["export", store, "--format", "table-csv", "-o", str(table), "--metrics", "train/loss"]
        )
        == 0
    )
    header = next(csv.reader(io.StringIO(table.read_text())))
    assert "train/loss min" in header


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["snapshot", "{missing}", "-o", "{tmp}/x.png"], "no store matches"),
        (["snapshot", "{store}", "-o", "{tmp}/x.bmp"], ".png, .svg or .pdf"),
        (["snapshot", "{store}", "-o", "{tmp}/x.png", "--runs", "nope"], "no run matches 'nope'"),
        (["snapshot", "{store}", "-o", "{tmp}/x.png", "--smoothing", "1.5"], "smoothing must be"),
        (["snapshot", "{store}", "-o", "{tmp}/x.png", "--size", "big"], "--size must look"),
        (["export", "{store}", "--format", "parquet", "-o", "-"], "Parquet is binary"),
        (["export", "{store}", "--format", "csv", "-o", "{tmp}/no/such/dir/x.csv"], "cannot write"),
    ],
)
def test_errors_are_one_line_and_non_zero(store, tmp_path, capsys, argv, message):
    subs = {"{store}": store, "{missing}": str(tmp_path / "missing.db"), "{tmp}": str(tmp_path)}
    for k, v in subs.items():
        argv = [a.replace(k, v) for a in argv]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert err.startswith("resplot: error:") and message in err
    assert "Traceback" not in err


@pytest.mark.integration
def test_console_entry_point_runs_headless(store, tmp_path):
    out = tmp_path / "s.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "MPLBACKEND": "Agg"}
    ok = subprocess.run(
        [sys.executable, "-m", "resplot", "snapshot", store, "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert out.stat().st_size > 10_000
    argv = [
        sys.executable,
        "-m",
        "resplot",
        "export",
        str(tmp_path / "nope.db"),
        "--format",
        "csv",
        "-o",
        "-",
    ]
    bad = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith("resplot: error:")


def test_opening_the_window_without_a_display_says_what_to_do(store, monkeypatch, capsys):
    monkeypatch.setattr(sys, "platform", "linux")
    for var in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    assert main([store]) == 1
    err = capsys.readouterr().err
    assert "no display" in err and "resplot snapshot" in err


@pytest.mark.parametrize("word", ["synk", "snaphsot", "list"])
def test_an_unknown_subcommand_fails_at_once_naming_the_commands(word, monkeypatch, capsys):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")  # a window would open if it got that far
    assert main([word, "somewhere"]) == 1
    err = capsys.readouterr().err
    assert f"unknown command '{word}'" in err and "snapshot" in err and f"./{word}" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{tmp}/nope.db", "no such file or directory"),
        ("{tmp}/no/such/dir/*.db", "does not exist"),
        ("ftp://host/runs.db", "unsupported source scheme 'ftp'"),
        ("", "empty source"),
    ],
)
def test_the_window_refuses_a_source_it_can_never_read_before_opening(
    spec, message, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("QT_QPA_PLATFORM", "offscreen")
    assert main([spec.replace("{tmp}", str(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert err.startswith("resplot: error:") and message in err


@pytest.mark.slow
def test_a_directory_named_like_a_command_is_still_opened_as_a_store(store, tmp_path, monkeypatch):
    home = tmp_path / "cwd"
    (home / "plots").mkdir(parents=True)
    Path(store).rename(home / "plots" / "reslog.db")
    monkeypatch.chdir(home)
    assert main(["snapshot", "plots", "-o", str(tmp_path / "x.png")]) == 0
    from resplot.cli import _looks_like_command

    assert not _looks_like_command("plots") and _looks_like_command("synk")
