"""`reslog import tensorboard|csv`: event files written by the real torch.utils.tensorboard,
read back exactly (compared with TensorBoard's own loader), idempotent, and bad input refused
with one line naming the file."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util import tensor_util
from torch.utils.tensorboard import SummaryWriter

import reslog
from reslog.tools.cli import main
from tests.test_reslog_api import read_run


def write_tensorboard(logdir: Path) -> None:
    """Two runs as people lay them out: LOGDIR/lr-0.1 and LOGDIR/lr-0.01/train."""
    for sub, lr in (("lr-0.1", 0.1), ("lr-0.01/train", 0.01)):
        w = SummaryWriter(str(logdir / sub))
        for step in range(0, 300, 3):
            w.add_scalar("train/loss", 10.0 / (step + 1) + lr, step)
            w.add_scalar("train/lr", lr * 0.999**step, step, new_style=True)
        w.add_scalar("val/loss", math.nan, 150)
        w.add_scalar("val/loss", math.inf, 151)
        w.add_scalar("val/loss", -2.5, 299)
        w.add_histogram("weights", np.arange(10.0), 0)
        w.add_text("note", "hello", 0)
        w.close()


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float, float]]]:
    """TensorBoard's own reading: scalars, and 0-d numeric tensors (add_scalar(new_style=True))."""
    ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    ea.Reload()
    out = {
        tag: [(e.step, e.wall_time, e.value) for e in ea.Scalars(tag)]
        for tag in ea.Tags()["scalars"]
    }
    for tag in ea.Tags()["tensors"]:
        values = [
            (e.step, e.wall_time, tensor_util.make_ndarray(e.tensor_proto)) for e in ea.Tensors(tag)
        ]
        if all(v.ndim == 0 and v.dtype.kind == "f" for _, _, v in values):
            out[tag] = [(s, w, float(v)) for s, w, v in values]
    return out


def stored_points(store: Path, uid: str) -> dict[str, list[tuple[int, float, float]]]:
    with sqlite3.connect(store) as conn:
        rows = conn.execute(
            "SELECT k.name, p.step, p.wall, p.value FROM points p JOIN keys k ON k.id = p.key_id "
            "JOIN runs r ON r.id = p.run_id WHERE r.uid = ? ORDER BY p.id",
            (uid,),
        ).fetchall()
    out: dict[str, list[tuple[int, float, float]]] = {}
    for name, step, wall, value in rows:
        out.setdefault(name, []).append((step, wall, math.nan if value is None else value))
    return out


def same(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(
        x[:2] == y[:2] and (x[2] == y[2] or (math.isnan(x[2]) and math.isnan(y[2])))
        for x, y in zip(a, b, strict=True)
    )


def test_tensorboard_scalars_come_back_exactly_one_run_per_folder(tmp_path, capsys):
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "imported 'lr-0.01/train': 3 keys, 203 points, 2 non-scalar values not imported" in out
    assert out.strip().endswith(f"2 run(s), 406 points imported into {store}")
    df = reslog.open(store).runs()
    assert sorted(df["name"]) == ["lr-0.01/train", "lr-0.1"]
    for folder in (logdir / "lr-0.1", logdir / "lr-0.01" / "train"):
        uid = df[df["name"] == folder.relative_to(logdir).as_posix()]["uid"].iloc[0]
        expected = tensorboard_scalars(folder)
        got = stored_points(store, uid)
        assert sorted(got) == sorted(expected) == ["train/loss", "train/lr", "val/loss"]
        for tag in expected:
            assert same(got[tag], expected[tag]), tag
        info = read_run(store, uid)[0]
        assert info.status == "finished" and info.project == "tensorboard"
        walls = [w for pts in expected.values() for _, w, _ in pts]
        assert (info.created_at, info.ended_at) == (min(walls), max(walls))


def test_a_second_import_is_a_no_op(tmp_path, capsys):
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    assert main(["import", "tensorboard", str(logdir), "--store", str(store), "--progress"]) == 0
    captured = capsys.readouterr()
    assert "already imported 'lr-0.1'" in captured.out
    assert captured.out.strip().endswith(
        f"0 run(s), 0 points imported into {store}; 2 already there"
    )
    assert "import tensorboard: 2 runs, 0 points" in captured.err  # the progress line
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2,)
        assert conn.execute("SELECT count(*) FROM points").fetchone() == (406,)


def test_a_truncated_event_file_is_one_line_naming_it_and_its_run_is_not_written(tmp_path, capsys):
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    bad = next((logdir / "lr-0.1").iterdir())
    bad.write_bytes(bad.read_bytes()[:-7])
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"reslog: import tensorboard: {bad}: truncated at byte ")
    with sqlite3.connect(store) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM runs")]
    assert "lr-0.1" not in names  # the run of the bad file: nothing of it
    assert names == ["lr-0.01/train"]  # read (and written whole) before the bad one


def test_a_file_that_is_not_an_event_file_is_refused(tmp_path, capsys):
    folder = tmp_path / "tb" / "run"
    folder.mkdir(parents=True)
    (folder / "events.out.tfevents.123.host").write_bytes(b"this is not a tfrecord file at all")
    assert (
        main(["import", "tensorboard", str(tmp_path / "tb"), "--store", str(tmp_path / "s.db")])
        == 2
    )
    err = capsys.readouterr().err
    assert "not a TensorBoard event file" in err and str(folder) in err


def test_csv_long_round_trips_reslogs_own_export(tmp_path, capsys):
    src = tmp_path / "src.db"
    run = reslog.init(project="p", name="orig", store=src, system=False)
    for step in range(5):
        run.log({"train/loss": 1.0 / (step + 1), "val/loss": math.nan if step == 2 else 0.5})
    run.finish()
    csv_path = tmp_path / "points.csv"
    assert main(["export", str(src), "--format", "csv", "-o", str(csv_path)]) == 0
    dst = tmp_path / "dst.db"
    assert main(["import", "csv", str(csv_path), "--store", str(dst), "--project", "q"]) == 0
    assert "imported 'orig': 2 keys, 10 points" in capsys.readouterr().out
    original = read_run(src)[1]
    info, imported, _ = read_run(dst)
    assert info.project == "q" and sorted(imported) == sorted(original)
    for key in original:
        assert same([(s, 0, v) for s, v in imported[key]], [(s, 0, v) for s, v in original[key]])


def test_csv_wide_with_a_bad_cell_names_the_line_and_writes_nothing(tmp_path, capsys):
    path = tmp_path / "hist.csv"
    path.write_text("step,loss,acc\n0,2.5,\n1,2.0,0.5\n2,oops,0.6\n")
    store = tmp_path / "s.db"
    assert main(["import", "csv", str(path), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err == f"reslog: import csv: {path}:4: column 'loss': 'oops' is not a number\n"
    path.write_text("step,loss,acc\n0,2.5,\n1,2.0,0.5\n2,1.5,0.6\n")
    assert main(["import", "csv", str(path), "--store", str(store), "--name", "w"]) == 0
    info, series, _ = read_run(store)
    assert info.name == "w"
    assert series == {"loss": [(0, 2.5), (1, 2.0), (2, 1.5)], "acc": [(1, 0.5), (2, 0.6)]}


def test_csv_without_a_step_column_is_refused(tmp_path, capsys):
    path = tmp_path / "x.csv"
    path.write_text("a,b\n1,2\n")
    assert main(["import", "csv", str(path), "--store", str(tmp_path / "s.db")]) == 2
    assert f"{path}: no 'step' column" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["tensorboard", "csv"])
def test_a_missing_path_is_one_line(tmp_path, capsys, kind):
    missing = tmp_path / "nope"
    assert main(["import", kind, str(missing), "--store", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(missing) in err
