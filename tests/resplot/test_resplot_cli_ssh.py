"""`resplot snapshot`, `export` and `report` on a store reached over SSH, as a person runs them.

A real sshd (tests/fixtures/sshd.py) stands in for the GPU host; the CLI finds it through
`~/.ssh/config` (HOME points at a temp dir holding the fixture's config), exactly as it would
find `gpu-box` on a laptop.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
import sys

from resplot.cli import main as resplot_main
from tests.fixtures.stores import make_run, new_store


def test_snapshot_and_export_of_a_store_on_an_ssh_host(ssh_config, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(ssh_config, home / ".ssh" / "config")
    monkeypatch.setenv("HOME", str(home))

    db = tmp_path / "gpu host" / "runs" / "reslog.db"  # a space in the remote path, too
    engine = new_store(db)
    losses = [(s, math.nan if s == 5 else 4.0 / (1 + s)) for s in range(300)]
    for name, lr in (("wsd-1e-3", 1e-3), ("wsd-3e-4", 3e-4)):
        make_run(
            engine,
            name=name,
            config={"lr": lr, "batch_tokens": 524288},
            points={"train/loss": losses, "train/lr": [(s, lr) for s in range(300)]},
        )
    engine.dispose()
    spec = f"target:{db}#python={sys.executable}"

    png = tmp_path / "loss.png"
    assert resplot_main(["snapshot", spec, "-o", str(png), "--page", "training"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000

    out = tmp_path / "points.csv"
    assert resplot_main(["export", spec, "--format", "csv", "-o", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 2 * 300 * 2
    loss = {(r["run"], int(r["step"])): float(r["value"]) for r in rows if r["key"] == "train/loss"}
    assert math.isnan(loss[("wsd-1e-3", 5)]) and loss[("wsd-3e-4", 299)] == 4.0 / 300

    table = tmp_path / "table.md"
    assert resplot_main(["export", spec, "--format", "md", "-o", str(table)]) == 0
    text = table.read_text()
    assert "| lr" in text and "batch_tokens" not in text  # only the config key that differs

    # The HTML report through the same agent: every point here, NaN kept where it was logged.
    from tests.resplot.test_report import _columns

    report = tmp_path / "report.html"
    assert resplot_main(["report", spec, "-o", str(report)]) == 0
    data, dec = _columns(report)
    assert sorted(r["name"] for r in data["runs"]) == ["wsd-1e-3", "wsd-3e-4"]
    (loss,) = [s for s in data["series"] if s["key"] == "train/loss" and s["run"] == 1]
    steps, values = (dec["column"](loss["cols"][c]) for c in ("s", "v"))
    assert list(steps) == list(range(300)) and math.isnan(values[5])
    assert values[299] == 4.0 / 300  # float64, bit for bit


def test_an_unknown_host_key_is_refused_headless_with_a_clear_error(
    sshd_env, tmp_path, monkeypatch, capsys
):
    # Nobody can be asked in `resplot snapshot`: an unknown key must be refused, not trusted.
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    config = sshd_env.make_ssh_config(tmp_path / "ssh", known=False)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(config, home / ".ssh" / "config")
    monkeypatch.setenv("HOME", str(home))
    db = tmp_path / "r" / "reslog.db"
    new_store(db).dispose()

    rc = resplot_main(["snapshot", f"target:{db}", "-o", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert rc != 0
    assert "Traceback" not in err and "host key" in err.lower(), err
    assert not (tmp_path / "x.png").exists()
    assert (tmp_path / "ssh" / "known_hosts").read_text() == ""  # nothing was pinned
