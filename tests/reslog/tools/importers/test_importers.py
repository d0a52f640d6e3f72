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
from reslog.tools.maintenance import check_store
from schema.store import chunk_read, points_by_id
from tests.reslog.test_reslog_api import read_run


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
    """{key: [(step, wall, value)]} of a run, every point of each series in id order (NaN for a
    NaN), read from chunks and legacy rows alike."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    with sqlite3.connect(store) as conn:
        cur = conn.cursor()
        found = cur.execute("SELECT id FROM runs WHERE uid = ?", (uid,)).fetchone()
        if found is None:
            return out
        names = dict(cur.execute("SELECT id, name FROM keys").fetchall())
        for key_id in sorted(chunk_read.run_keys(cur, "?", found[0])):
            out[names[key_id]] = [
                (step, wall, math.nan if value is None else value)
                for _id, step, wall, value in chunk_read.series_all(cur, "?", found[0], key_id)
            ]
    return out


def point_count(store: Path) -> int:
    """Every point in the store (chunks and legacy rows)."""
    with sqlite3.connect(store) as conn:
        return len(points_by_id.points_after(conn.cursor(), "?", None, 0))


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
        # Imported runs are written whole: sealed chunks only, as a finished run's are.
        assert conn.execute("SELECT count(*) FROM chunks WHERE sealed = 0").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] > 0
    assert point_count(store) == 406


def test_a_record_still_being_written_is_left_for_the_next_import(tmp_path, capsys):
    """The newest file of a folder may end in a record being written (a live run, or one
    killed mid-write): everything before it comes in, the rest with the next import."""
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    bad = next((logdir / "lr-0.1").iterdir())
    whole = bad.read_bytes()
    bad.write_bytes(whole[:-7])
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f"  {bad}: its last " in out and "the next import reads them" in out
    bad.write_bytes(whole)  # the writer finished the record
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "already imported 'lr-0.01/train'" in out and "updated 'lr-0.1'" in out
    uid = next(r for r in reslog.open(store).runs().itertuples() if r.name == "lr-0.1").uid
    expected, got = tensorboard_scalars(logdir / "lr-0.1"), stored_points(store, uid)
    assert sorted(got) == sorted(expected)
    for tag in expected:
        assert same(got[tag], expected[tag]), tag


def test_a_torn_record_in_an_older_file_is_one_line_naming_it(tmp_path, capsys):
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    folder = logdir / "lr-0.1"
    w = SummaryWriter(str(folder))  # another file beside it: the first one is complete
    w.add_scalar("train/loss", 0.5, 400)
    w.close()
    older = sorted(folder.iterdir())[0]  # not the newest by name, as the import orders them
    older.write_bytes(older.read_bytes()[:-7])
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"reslog: import tensorboard: {older}: truncated at byte ")
    with sqlite3.connect(store) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM runs")]
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


# -- imports that keep up -----------------------------------------------------------------------


def test_a_folder_that_grew_imports_what_was_appended_and_matches_tensorboard(tmp_path, capsys):
    logdir = tmp_path / "tb"
    w = SummaryWriter(str(logdir / "live"))
    for step in range(100):
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
    w.flush()
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    assert "imported 'live': 1 keys, 100 points" in capsys.readouterr().out
    for step in range(100, 250):  # the run goes on, the same file grows; then a second file
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
        w.add_scalar("train/lr", 0.1, step)
    w.close()
    w = SummaryWriter(str(logdir / "live"))
    w.add_scalar("train/loss", 0.001, 250)
    w.close()
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "updated 'live': 301 new points in 2 keys" in out
    assert out.strip().endswith("0 run(s), 301 points imported into " + str(store) + "; 1 updated")
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    assert "already imported 'live'" in capsys.readouterr().out  # idempotent
    [uid] = reslog.open(store).runs()["uid"].tolist()
    expected, got = tensorboard_scalars(logdir / "live"), stored_points(store, uid)
    assert sorted(got) == sorted(expected) == ["train/loss", "train/lr"]
    for tag in expected:  # as sets: both files were made in one second, and TensorBoard reads
        # "...20287.10" before "...20287.9", the order of their names
        assert same(sorted(got[tag]), sorted(expected[tag])), tag
    with reslog.open(store) as r:
        assert r.keys(uid).set_index("key").loc["train/loss", "points"] == 251
    info = read_run(store, uid)[0]
    assert info.ended_at == max(w for pts in expected.values() for _, w, _ in pts)


def test_replace_rebuilds_a_run_from_its_files(tmp_path, capsys):
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    with sqlite3.connect(store) as conn:  # someone damages a run's points
        conn.execute("DELETE FROM chunks WHERE id % 2 = 0")
    assert point_count(store) < 406
    capsys.readouterr()
    assert main(["import", "tensorboard", str(logdir), "--store", str(store), "--replace"]) == 0
    out = capsys.readouterr().out
    assert "replaced 'lr-0.1': 3 keys, 203 points" in out
    assert out.strip().endswith(f"2 run(s), 406 points imported into {store}")
    df = reslog.open(store).runs()
    assert len(df) == 2
    for folder in (logdir / "lr-0.1", logdir / "lr-0.01" / "train"):
        uid = df[df["name"] == folder.relative_to(logdir).as_posix()]["uid"].iloc[0]
        expected, got = tensorboard_scalars(folder), stored_points(store, uid)
        for tag in expected:
            assert same(got[tag], expected[tag]), tag
    assert check_store(str(store)).problems == []


def tensorboard_hparams(folder: Path) -> dict:
    """TensorBoard's own decoding of a folder's session start info."""
    from tensorboard.plugins.hparams import plugin_data_pb2

    ea = EventAccumulator(str(folder))
    ea.Reload()
    content = ea.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    out = {}
    for key, value in hparams.items():
        kind = value.WhichOneof("kind")
        out[key] = getattr(value, kind)
    return out


def test_hparams_become_the_config_and_rich_values_are_listed_by_tag_and_kind(tmp_path, capsys):
    logdir = tmp_path / "tb"
    hp = {"lr": 0.01, "layers": 4, "optimizer": "adam", "warmup": 0.1}
    with SummaryWriter(str(logdir / "sweep")) as w:  # add_hparams: a session subfolder
        w.add_hparams(hp, {"hparam/accuracy": 0.91}, run_name="trial-0")
        w.add_scalar("train/loss", 0.5, 0)
        w.add_histogram("weights", np.arange(10.0), 0)
        w.add_histogram("weights", np.arange(10.0), 1)
        w.add_image("sample", np.zeros((3, 4, 4)), 0)
        w.add_text("note", "hello", 0)
    # Keras' layout: the HParams callback writes the session into the run folder, the
    # TensorBoard callback its scalars into train/ and validation/ below it.
    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from torch.utils.tensorboard.summary import hparams as hparams_summaries

    keras = logdir / "keras-run-0"
    _exp, ssi, _sei = hparams_summaries({"units": 64, "dropout": 0.2}, {"val_accuracy": 0.0})
    top = EventFileWriter(str(keras))
    top.add_event(event_pb2.Event(wall_time=1.7e9, step=0, summary=ssi))
    top.close()
    for sub in ("train", "validation"):
        with SummaryWriter(str(keras / sub)) as w:
            for epoch in range(3):
                w.add_scalar("epoch_loss", 1.0 / (epoch + 1), epoch)
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert (
        "4 non-scalar values not imported (histograms: weights; images: sample; text: note/"
        "text_summary)" in out
    )
    runs = {r.name: r for r in reslog.open(store).runs().itertuples()}
    # add_hparams' session folder is read into the run of the curves beside it.
    assert sorted(runs) == ["keras-run-0/train", "keras-run-0/validation", "sweep"]
    trial = read_run(store, runs["sweep"].uid)
    assert trial[0].config == tensorboard_hparams(logdir / "sweep" / "trial-0")
    assert trial[0].config == {"lr": 0.01, "layers": 4, "optimizer": "adam", "warmup": 0.1}
    assert trial[1]["hparam/accuracy"] == [(0, pytest.approx(0.91))]
    assert trial[1]["train/loss"] == [(0, 0.5)]
    keras_config = tensorboard_hparams(keras)
    for sub in ("train", "validation"):
        info = read_run(store, runs[f"keras-run-0/{sub}"].uid)[0]
        assert info.config == keras_config == {"units": 64, "dropout": pytest.approx(0.2)}
    [skipped] = [e for e in read_run(store, runs["sweep"].uid)[2] if e.kind == "skipped"]
    assert (
        skipped.body == "note/text_summary (text): 1\nsample (images): 1\nweights (histograms): 2"
    )
    # the same values, named, are what the import said; a second import adds nothing
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    assert capsys.readouterr().out.count("already imported") == 3


def test_hparams_of_each_layout_land_on_the_run_with_the_curves_types_kept(tmp_path, capsys):
    """The three layouts docs/cli.md shows, each written by its real writer: PyTorch's
    add_hparams (a timestamped session folder below the curves), Keras' (the session in the
    folder above train/ and validation/) and TensorBoard's hparams_config (the experiment at
    the top, each trial's session beside its curves). TensorBoard's own hparams_pb and
    hparams_config_pb build what tf.summary would write (no TensorFlow here)."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.hparams import summary_v2 as hp
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def write_summary(folder: Path, summary) -> None:
        writer = EventFileWriter(str(folder))
        writer.add_event(event_pb2.Event(wall_time=1.7e9, step=0, summary=summary))
        writer.close()

    logdir = tmp_path / "tb"
    # PyTorch: a SummaryWriter loop, then add_hparams with its default (timestamped) folder.
    with SummaryWriter(str(logdir / "torch-lr3e-4")) as w:
        for step in range(200):
            w.add_scalar("train/loss", 3.0 - step / 100, step)
        w.add_hparams(
            {"lr": 3e-4, "layers": 12, "optimizer": "adamw", "warmup": True}, {"hparam/loss": 1.01}
        )
    # Keras: the HParams callback's session above the TensorBoard callback's folders.
    keras = {"units": 64, "dropout": 0.2, "warmup": True, "optimizer": "sgd"}
    write_summary(logdir / "keras", hp.hparams_pb(keras))
    for sub in ("train", "validation"):
        with SummaryWriter(str(logdir / "keras" / sub)) as w:
            for epoch in range(3):
                w.add_scalar("epoch_loss", 1.0 / (epoch + 1), epoch)
    # hparams_config: the experiment at the top, a trial's session beside its curves.
    write_summary(
        logdir / "config",
        hp.hparams_config_pb(
            hparams=[
                hp.HParam("lr", hp.RealInterval(1e-5, 1e-2)),
                hp.HParam("warmup", hp.Discrete([True, False])),
            ],
            metrics=[hp.Metric("epoch_loss")],
        ),
    )
    # TensorBoard's tutorial: each trial logs its hparams and one final metric, which is no
    # add_hparams session folder (the folder above holds no scalars): a run of its own.
    write_summary(logdir / "config" / "trial-0", hp.hparams_pb({"lr": 1e-3, "warmup": False}))
    with SummaryWriter(str(logdir / "config" / "trial-0")) as w:
        w.add_scalar("epoch_loss", 0.7, 1)
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    runs = {r.name: r for r in reslog.open(store).runs().itertuples()}
    assert sorted(runs) == ["config/trial-0", "keras/train", "keras/validation", "torch-lr3e-4"]
    info, points, _ = read_run(store, runs["torch-lr3e-4"].uid)
    assert len(points["train/loss"]) == 200 and points["hparam/loss"] == [(0, pytest.approx(1.01))]
    # PyTorch writes a bool as the number 1.0 (its number branch comes first): the file holds
    # no bool, as TensorBoard's own reading shows; the others keep their types.
    (session,) = [p for p in (logdir / "torch-lr3e-4").iterdir() if p.is_dir()]
    assert tensorboard_hparams(session)["warmup"] == 1.0
    assert info.config == {"lr": 3e-4, "layers": 12, "optimizer": "adamw", "warmup": 1}
    assert type(info.config["layers"]) is int and type(info.config["lr"]) is float
    for sub in ("train", "validation"):
        config = read_run(store, runs[f"keras/{sub}"].uid)[0].config
        assert config == keras and config["warmup"] is True  # bool stays bool
    trial, points, _ = read_run(store, runs["config/trial-0"].uid)
    assert trial.config == {"lr": 1e-3, "warmup": False} and trial.config["warmup"] is False
    assert points["epoch_loss"] == [(1, pytest.approx(0.7))]
    # Appending: the session folder's offsets are kept with the run's; nothing read twice.
    capsys.readouterr()
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    assert capsys.readouterr().out.count("already imported") == 4
    assert read_run(store, runs["torch-lr3e-4"].uid)[0].config == info.config


def test_a_run_imported_by_an_older_reslog_is_not_read_twice(tmp_path, capsys):
    """An older reslog recorded no `import` event: where its import stopped is unknown, so the
    folder is not appended to (that would store every point twice); --replace reads it."""
    logdir = tmp_path / "tb"
    write_tensorboard(logdir)
    store = tmp_path / "runs.db"
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    with sqlite3.connect(store) as conn:
        conn.execute("DELETE FROM events WHERE kind = 'import'")
    capsys.readouterr()
    assert main(["import", "tensorboard", str(logdir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.count("by an older reslog, which did not record where it stopped: skipped") == 2
    assert point_count(store) == 406
