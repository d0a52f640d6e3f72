"""`reslog import parquet`: reslog's own Parquet export read back bit for bit (a round trip),
and the neptune-exporter's layout (Neptune's history after its service closed), values
compared cell by cell with the rows written."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import reslog
from reslog.tools.cli import main
from reslog.tools.maintenance import check_store
from tests.reslog.test_reslog_api import read_run


def exported(store: Path, out: Path) -> list[tuple]:
    assert main(["export", str(store), "--format", "parquet", "-o", str(out)]) == 0
    table = pq.read_table(out)
    columns = [table.column(c).to_pylist() for c in ("run", "key", "step", "wall", "value")]
    rows = zip(*columns, strict=True)
    return [(r, k, s, w, "nan" if math.isnan(v) else v) for r, k, s, w, v in rows]


def test_reslogs_own_parquet_export_round_trips_bit_for_bit(tmp_path, capsys):
    src = tmp_path / "src.db"
    for name, offset in (("wsd", 0.0), ("cos", 1.0)):
        run = reslog.init(project="p", name=name, store=src, system=False)
        for step in range(200):
            value = math.nan if step == 7 else (math.inf if step == 8 else 1.0 / (step + 1))
            run.log({"train/loss": value + offset, "train/lr": 3e-4 * 0.99**step}, step=step)
        run.log({"valid/ppl": 15.6 + offset}, step=199)
        run.finish()
    first = exported(src, tmp_path / "a.parquet")
    dst = tmp_path / "dst.db"
    assert main(["import", "parquet", str(tmp_path / "a.parquet"), "--store", str(dst)]) == 0
    out = capsys.readouterr().out
    assert "imported 'wsd': 3 keys, 401 points" in out and "imported 'cos'" in out
    assert exported(dst, tmp_path / "b.parquet") == first  # every cell, bit for bit
    assert len(first) == 802 and check_store(str(dst)).problems == []
    assert main(["import", "parquet", str(tmp_path / "a.parquet"), "--store", str(dst)]) == 0
    assert capsys.readouterr().out.count("already imported") == 2
    args = ["import", "parquet", str(tmp_path / "a.parquet"), "--store", str(dst), "--replace"]
    assert main(args) == 0
    assert "replaced 'wsd'" in capsys.readouterr().out
    assert exported(dst, tmp_path / "c.parquet") == first


# The neptune-exporter's layout, as neptune-ai/neptune-exporter defines it: the columns and
# types of `SCHEMA` in src/neptune_exporter/model.py, files named `<run>_part_<N>.parquet` in
# a folder per project (src/neptune_exporter/storage/parquet_reader.py), run metadata as
# `sys/...` attributes (sys/name, sys/custom_run_id, sys/forking/parent, sys/forking/step,
# sys/creation_time). Written here with pyarrow; Neptune itself is gone.
NEPTUNE_SCHEMA = pa.schema(
    [
        ("project_id", pa.string()),
        ("run_id", pa.string()),
        ("attribute_path", pa.string()),
        ("attribute_type", pa.string()),
        ("step", pa.decimal128(18, 6)),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("int_value", pa.int64()),
        ("float_value", pa.float64()),
        ("string_value", pa.string()),
        ("bool_value", pa.bool_()),
        ("datetime_value", pa.timestamp("ms", tz="UTC")),
        ("string_set_value", pa.list_(pa.string())),
        ("file_value", pa.struct([("path", pa.string())])),
        (
            "histogram_value",
            pa.struct(
                [
                    ("type", pa.string()),
                    ("edges", pa.list_(pa.float64())),
                    ("values", pa.list_(pa.float64())),
                ]
            ),
        ),
    ]
)
T0 = datetime(2025, 11, 3, 9, 30, tzinfo=timezone.utc)


def row(run: str, path: str, kind: str, **values) -> dict:
    out = {name: None for name in NEPTUNE_SCHEMA.names}
    out.update(project_id="acme/lm", run_id=run, attribute_path=path, attribute_type=kind)
    out.update(values)
    return out


def series(run: str, path: str, steps, value, text: bool = False) -> list[dict]:
    return [
        row(
            run,
            path,
            "string_series" if text else "float_series",
            step=Decimal(str(s)),
            timestamp=datetime.fromtimestamp(T0.timestamp() + float(s), timezone.utc),
            **({"string_value": value(s)} if text else {"float_value": value(s)}),
        )
        for s in steps
    ]


def write_neptune_export(folder: Path) -> dict[str, list[dict]]:
    """RUN-1 (two part files) and RUN-2, forked from it at step 50 with half steps."""
    parent = [
        row("RUN-1", "sys/name", "string", string_value="lm-baseline"),
        row("RUN-1", "sys/experiment/name", "string", string_value="baseline-sweep"),
        row("RUN-1", "sys/creation_time", "datetime", datetime_value=T0),
        row("RUN-1", "sys/tags", "string_set", string_set_value=["gpt", "small"]),
        row("RUN-1", "parameters/lr", "float", float_value=3e-4),
        row("RUN-1", "parameters/layers", "int", int_value=12),
        row("RUN-1", "parameters/tied", "bool", bool_value=True),
        row("RUN-1", "model/weights", "file", file_value={"path": "RUN-1/model/weights.pt"}),
        *series("RUN-1", "train/loss", range(100), lambda s: 4.0 / (s + 1)),
        *series("RUN-1", "eval/note", [0, 50], lambda s: f"eval at {s}", text=True),
        row(
            "RUN-1",
            "train/grad_hist",
            "histogram_series",
            step=Decimal(0),
            histogram_value={"type": "COUNTING", "edges": [0.0, 1.0], "values": [3.0]},
        ),
    ]
    fork = [
        row("RUN-2", "sys/name", "string", string_value="lm-baseline"),
        row("RUN-2", "sys/forking/parent", "string", string_value="RUN-1"),
        row("RUN-2", "sys/forking/step", "float", float_value=50.0),
        row("RUN-2", "parameters/lr", "float", float_value=1e-4),
        *series("RUN-2", "train/loss", [50 + i / 2 for i in range(40)], lambda s: 0.1 * s),
    ]
    project = folder / "acme_lm"
    project.mkdir(parents=True)
    for name, rows in (
        ("RUN-1_part_0", parent[:60]),
        ("RUN-1_part_1", parent[60:]),
        ("RUN-2_part_0", fork),
    ):
        pq.write_table(
            pa.Table.from_pylist(rows, schema=NEPTUNE_SCHEMA), project / f"{name}.parquet"
        )
    return {"RUN-1": parent, "RUN-2": fork}


def test_the_neptune_exporters_files_come_in_cell_by_cell_forks_as_runs_of_their_own(
    tmp_path, capsys
):
    written = write_neptune_export(tmp_path / "exports" / "data")
    store = tmp_path / "runs.db"
    assert (
        main(["import", "parquet", str(tmp_path / "exports" / "data"), "--store", str(store)]) == 0
    )
    out = capsys.readouterr().out
    assert "imported 'RUN-1': 1 keys, 100 points, 2 non-scalar values not imported" in out
    assert "(file: model/weights; histogram_series: train/grad_hist)" in out
    runs = {r.name: r for r in reslog.open(store).runs().itertuples()}
    info, _, events = read_run(store, runs["RUN-1"].uid)
    assert (info.project, info.group, info.tags) == ("acme/lm", "baseline-sweep", ["gpt", "small"])
    assert info.created_at == T0.timestamp()
    assert info.config["parameters/lr"] == 3e-4 and info.config["parameters/layers"] == 12
    assert info.config["parameters/tied"] is True and info.config["sys/name"] == "lm-baseline"
    expected = [
        (int(r["step"]), r["timestamp"].timestamp(), r["float_value"])
        for r in written["RUN-1"]
        if r["attribute_path"] == "train/loss"
    ]
    with reslog.open(store) as r:
        df = r.points(runs["RUN-1"].uid, "train/loss")
    assert list(zip(df["step"], df["wall"], df["value"], strict=True)) == expected
    texts = [(e.step, e.title, e.body) for e in events if e.kind == "text"]
    assert texts == [(0, "eval/note", "eval at 0"), (50, "eval/note", "eval at 50")]
    fork, fork_points, _ = read_run(store, runs["RUN-2"].uid)
    assert fork.config["sys/forking/parent"] == "RUN-1" and fork.config["sys/forking/step"] == 50.0
    assert fork.config["neptune/step_multiplier"] == 10 and "forked from RUN-1" in fork.notes
    assert fork_points["train/loss"] == [
        (int(Decimal(str(r["step"])) * 10), pytest.approx(r["float_value"], rel=0, abs=0))
        for r in written["RUN-2"]
        if r["attribute_path"] == "train/loss"
    ]
    assert check_store(str(store)).problems == []


def test_a_parquet_file_of_another_layout_is_one_line_naming_it(tmp_path, capsys):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1], "b": [2]}), path)
    assert main(["import", "parquet", str(path), "--store", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: neither a long table" in err
    path.write_bytes(b"PAR1 not really")
    assert main(["import", "parquet", str(path), "--store", str(tmp_path / "s.db")]) == 2
    assert f"{path}: not a readable Parquet file" in capsys.readouterr().err
