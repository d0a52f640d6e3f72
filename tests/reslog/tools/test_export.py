"""reslog.tools.export and schema.rules.compare: runs from real stores, the comparison table from
series aggregates, and every output format, streamed."""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import sys
from pathlib import Path

import pytest

from reslog.tools import export
from schema.rules import compare
from schema.rules.compare import RunSummary
from schema.store.errors import UnknownRun
from schema.store.reader import StoreReader
from schema.store.records import RunInfo, RunRef
from schema.store.rollup import fold
from tests.fixtures.stores import make_run, make_sample_runs, new_store


def load(engine, runs=None, keys=None):
    return export.load_runs(StoreReader(engine), runs, keys)


GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def assert_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("RESLOG_UPDATE_GOLDEN") == "1":
        path.write_text(actual)
    expected = path.read_text() if path.exists() else "<missing>"
    assert actual == expected, (
        f"{name} differs from {path}. If the change is intended, regenerate it with:\n"
        f"  RESLOG_UPDATE_GOLDEN=1 .venv/bin/pytest {Path(__file__).name} -q\n"
        f"and review the diff.\n--- actual ---\n{actual}"
    )


@pytest.fixture
def sample(store_path):
    engine = new_store(store_path)
    made = make_sample_runs(engine)
    yield engine, made
    engine.dispose()


def info(name="r", config=None, summary=None, world_size=1, ended=3600.0) -> RunInfo:
    return RunInfo(
        ref=RunRef("local", "s", name + "-uid"),
        project="p",
        name=name,
        status="finished",
        created_at=0.0,
        heartbeat_at=ended,
        ended_at=ended,
        world_size=world_size,
        config=config or {},
        summary=summary or {},
    )


# ---- keys and config -------------------------------------------------------------------------


def test_select_keys_orders_by_glob_then_name_and_none_selects_all():
    names = ["train/loss", "valid/ppl", "train/lr", "sys/gpu0/util", "valid/loss"]
    assert compare.select_keys(names, ["valid/*", "train/loss"]) == [
        "valid/loss",
        "valid/ppl",
        "train/loss",
    ]
    assert compare.select_keys(names, None) == sorted(names)
    assert compare.select_keys(names, []) == sorted(names)
    assert compare.select_keys(names, ["nothing/*"]) == []
    assert compare.select_keys(names, ["train/*", "train/lr"]) == ["train/loss", "train/lr"]


def test_differing_config_flattens_and_counts_a_missing_key_as_different():
    a = info("a", {"optim": {"lr": 3e-4, "betas": [0.9, 0.95]}, "seed": 1, "schedule": "wsd"})
    b = info("b", {"optim": {"lr": 1e-3, "betas": [0.9, 0.95]}, "seed": 1})
    c = info("c", {"optim": {"lr": 1e-3, "betas": [0.9, 0.99]}, "seed": 1, "schedule": "wsd"})
    assert compare.differing_config([a, b, c]) == ["optim.lr", "optim.betas", "schedule"]
    assert compare.differing_config([a, b]) == ["optim.lr", "schedule"]
    assert compare.differing_config([a]) == []
    assert compare.differing_config([]) == []


def test_a_jobs_per_rank_settings_are_one_column_not_differing_config():
    # Two jobs of the trainer: each rank has its host's store and its local rank; lr differs
    # between the jobs.
    def rank(job: str, r: int, lr: float) -> RunInfo:
        config = {
            "optim": {"lr": lr},
            "logging": {"store": f"runs/{'ab'[r // 2]}.db"},
            "runtime": {"local_rank": r % 2},
        }
        return dataclasses.replace(info(f"{job}-rank{r}", config, world_size=4), group=job)

    runs = [rank("j1", r, 1e-3) for r in range(4)] + [rank("j2", r, 3e-4) for r in range(4)]
    assert compare.differing_config(runs) == ["optim.lr"]
    assert compare.per_rank_config(runs) == ["logging.store", "runtime.local_rank"]
    assert compare.differing_config(runs[:4]) == []  # one job: nothing differs
    header, rows = compare.comparison_table([RunSummary(r) for r in runs], metrics=[])
    assert header[:3] == ["run", "optim.lr", compare.PER_RANK]
    assert rows[3][2] == "logging.store=runs/b.db; runtime.local_rank=1"
    # Runs of no job keep every differing key (a sweep over stores is a real difference).
    solo = [info("a", {"logging": {"store": "a.db"}}), info("b", {"logging": {"store": "b.db"}})]
    assert compare.differing_config(solo) == ["logging.store"]


def agg(steps, values):
    return fold(list(steps), [0.0] * len(steps), list(values))


def test_gpu_hours_count_only_gpus_seen_in_telemetry():
    keys = {k: agg([0], [1.0]) for k in ["sys/gpu0/util", "sys/gpu3/temp_c", "sys/cpu_pct"]}
    with_gpus = RunSummary(info(world_size=8), keys)
    assert compare.gpu_count(with_gpus.run, keys) == 2
    cpu_only = RunSummary(info(world_size=4), {"train/loss": agg([0], [1.0])})
    assert compare.gpu_count(cpu_only.run, cpu_only.series) == 0
    assert compare.gpu_hours(cpu_only.run, cpu_only.series) is None
    header, rows = compare.comparison_table([with_gpus, cpu_only], metrics=[])
    assert header[-2:] == ["hours", "GPU-hours"]
    assert rows[0][-2:] == [1.0, 2.0]
    assert rows[1][-2:] == [1.0, None]


@pytest.mark.parametrize("family", ["valid", "val", "eval", "validation"])
def test_the_default_table_picks_validation_metrics_whatever_their_family(family):
    series = {k: agg([0, 10], [3.0, 2.0]) for k in ["train/loss", f"{family}/loss"]}
    header, rows = compare.comparison_table([RunSummary(info(), series)])
    assert header[1:7] == [
        "train/loss last",
        "train/loss min",
        "train/loss min step",
        f"{family}/loss last",
        f"{family}/loss min",
        f"{family}/loss min step",
    ]
    assert rows[0][4:7] == [2.0, 2.0, 10]
    # a validation metric asked for by any family's name finds the run's
    header, _ = compare.comparison_table([RunSummary(info(), series)], metrics=["valid/loss"])
    assert header[1] == f"{family}/loss last"


def test_metric_stats_ignore_nan_for_min_but_report_a_nan_last_value():
    assert compare.metric_stats(agg([0, 10, 20, 30], [3.0, 1.5, float("nan"), 2.0])) == (
        2.0,
        1.5,
        10,
    )
    last, best, step = compare.metric_stats(agg([0, 1], [float("nan")] * 2))
    assert math.isnan(last) and math.isnan(best) and step is None
    assert compare.metric_stats(None) == (None, None, None)


def test_comparison_table_reads_aggregates_with_an_infinite_last_value():
    data = RunSummary(info(), {"train/loss": agg([0, 1, 2], [2.0, 1.0, math.inf])})
    header, rows = compare.comparison_table([data], metrics=["train/*"])
    assert header[1:4] == ["train/loss last", "train/loss min", "train/loss min step"]
    assert rows[0][1:4] == [math.inf, 1.0, 1]


# ---- the comparison table from a real store ----------------------------------------------------


def test_comparison_table_of_the_sample_store(sample):
    engine, _ = sample
    data = load(engine)
    header, rows = compare.comparison_table(data, metrics=["valid/ppl"])
    assert header == [
        "run",
        "batch_tokens",
        "optim.lr",
        "optim.schedule",
        "valid/ppl",
        "test/ppl",
        "valid/ppl last",
        "valid/ppl min",
        "valid/ppl min step",
        "hours",
        "GPU-hours",
    ]
    by_name = {r[0]: r for r in rows}
    assert by_name["wsd-0.5"][1:] == [
        524288,
        3e-4,
        "wsd",
        15.61,
        16.02,
        15.64,
        15.64,
        400,
        2.0,
        4.0,
    ]
    assert by_name["cos_lr1e-3"][-2:] == [1.0, None]  # world_size 4 but no GPU telemetry
    assert by_name["wsd_50%#"][4:6] == [None, None]  # no summary
    assert by_name["wsd_50%#"][-2] == 0.5  # crashed: until the last heartbeat


def test_markdown_table_golden(sample):
    engine, _ = sample
    data = load(engine, None, None)
    assert_golden("compare.md", export.table_text(data, "md"))


def test_latex_table_golden(sample):
    engine, _ = sample
    data = load(engine, None, None)
    text = export.table_text(data, "latex", metrics=["valid/ppl", "train/loss"])
    assert "wsd\\_50\\%\\#" in text
    assert_golden("compare.tex", text)


def test_latex_escapes_every_special_character():
    assert export.latex_escape(r"a_b%c&d#e$f{g}h~i^j\k") == (
        r"a\_b\%c\&d\#e\$f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )


def test_markdown_escapes_pipes_and_leaves_missing_cells_empty():
    text = export.render_markdown(["run", "x"], [["a|b", None], ["c", 1.5]])
    assert text.splitlines() == ["| run | x |", "| --- | ---: |", "| a\\|b |  |", "| c | 1.5 |"]


def test_table_csv_writes_raw_values(sample, tmp_path):
    engine, _ = sample
    data = load(engine, ["wsd-0.5"], None)
    out = tmp_path / "t.csv"
    export.write_table(data, out, "csv", metrics=["train/loss"])
    rows = list(csv.reader(out.open()))
    assert rows[0][0] == "run" and rows[1][0] == "wsd-0.5"
    assert rows[1][rows[0].index("train/loss min")] == "3.0"


# ---- loading ----------------------------------------------------------------------------------


def test_load_runs_by_name_uid_prefix_row_id_and_runinfo(sample):
    engine, made = sample
    wsd, cos, _ = made
    by_name = load(engine, ["cos_lr1e-3"], ["valid/*"])
    assert [d.run.name for d in by_name] == ["cos_lr1e-3"]
    assert sorted(by_name[0].series) == ["valid/loss", "valid/ppl"]
    by_prefix = load(engine, ["aaaa"], None)
    assert by_prefix[0].run.ref.uid == wsd.uid
    by_id = load(engine, [cos.id, wsd.id], None)
    assert [d.run.name for d in by_id] == ["cos_lr1e-3", "wsd-0.5"]
    again = load(engine, [by_id[0].run], None)
    assert again[0].run.ref.uid == cos.uid
    with pytest.raises(UnknownRun, match="no run 'nope'"):
        load(engine, ["nope"], None)


@pytest.mark.slow  # 4-28 s of CPU: out of the fast lane
def test_points_stream_at_full_resolution_in_bounded_chunks(store_path, tmp_path):
    engine = new_store(store_path)
    n = 250_000
    make_run(engine, points={"train/loss": [(i, i * 0.5) for i in range(n)]})
    (data,) = load(engine, None, None)
    chunks = [len(c) for c in data.scan("train/loss", None, None)]
    assert sum(chunks) == n and max(chunks) <= 110_000 and len(chunks) >= 3
    export.write_points([data], tmp_path / "all.csv", "csv")
    rows = list(csv.reader((tmp_path / "all.csv").open()))
    assert len(rows) == n + 1 and rows[-1][3:] == [
        str(n - 1),
        repr(1_700_000_000.0 + n - 1),
        repr((n - 1) * 0.5),
    ]


@pytest.mark.slow
def test_wide_csv_joins_keys_window_by_window(store_path, tmp_path, monkeypatch):
    engine = new_store(store_path)
    make_run(
        engine,
        points={
            "a": [(i, float(i)) for i in range(1000)],
            "b": [(i, -float(i)) for i in range(0, 1000, 7)],
        },
    )
    monkeypatch.setattr(export, "WINDOW_POINTS", 50)  # many windows
    export.write_points(load(engine), tmp_path / "w.csv", "csv-wide")
    rows = list(csv.reader((tmp_path / "w.csv").open()))
    assert [int(r[2]) for r in rows[1:]] == list(range(1000))
    assert rows[1 + 14][3:] == ["14.0", "-14.0"] and rows[1 + 15][3:] == ["15.0", ""]


# ---- points -----------------------------------------------------------------------------------


def test_long_csv_round_trips_floats_and_spells_nan_inf(sample, tmp_path):
    engine, _ = sample
    make_run(
        engine,
        name="odd",
        points={"x": [(0, 0.1 + 0.2), (1, float("-inf")), (2, float("nan")), (3, 1e-300)]},
    )
    data = load(engine, ["odd"], None)
    out = tmp_path / "points.csv"
    export.write_points(data, out, "csv")
    rows = list(csv.DictReader(out.open()))
    assert [r["value"] for r in rows] == [repr(0.1 + 0.2), "-inf", "nan", "1e-300"]
    assert float(rows[0]["value"]) == 0.1 + 0.2
    assert list(rows[0]) == ["run", "uid", "key", "step", "wall", "value"]


def test_wide_csv_aligns_keys_by_step_and_leaves_gaps_empty(sample, tmp_path):
    engine, _ = sample
    data = load(engine, ["wsd-0.5"], ["train/loss", "valid/ppl"])
    out = tmp_path / "wide.csv"
    export.write_points(data, out, "csv-wide")
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["run", "uid", "step", "train/loss", "valid/ppl"]
    assert [r[2:] for r in rows[1:]] == [
        ["0", "10.5", ""],
        ["100", "4.25", ""],
        ["200", "3.5", "25.79"],
        ["300", "3.125", ""],
        ["400", "3.0", "15.64"],
    ]


def test_wide_csv_keeps_the_last_of_several_points_at_one_step(store_path, tmp_path):
    engine = new_store(store_path)
    make_run(engine, name="r", points={"sys/cpu_pct": [(5, 10.0, 1.0), (5, 30.0, 2.0)]})
    data = load(engine, None, None)
    export.write_points(data, tmp_path / "w.csv", "csv-wide")
    rows = list(csv.reader((tmp_path / "w.csv").open()))
    assert rows[1][2:] == ["5", "30.0"]


def test_parquet_keeps_nan_and_inf(sample, tmp_path):
    import pyarrow.parquet as pq

    engine, _ = sample
    data = load(engine, ["cos_lr1e-3"], ["train/loss"])
    out = tmp_path / "p.parquet"
    export.write_points(data, out, "parquet")
    table = pq.read_table(out)
    assert table.column_names == ["run", "uid", "key", "step", "wall", "value"]
    values = table.column("value").to_pylist()
    assert values[:2] == [10.5, 4.5] and math.isnan(values[2]) and values[3] == math.inf
    assert table.column("value").null_count == 0
    assert table.column("step").to_pylist() == [0, 100, 200, 300]


def test_parquet_without_pyarrow_is_a_clear_error(sample, tmp_path, monkeypatch):
    engine, _ = sample
    data = load(engine, None, None)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    with pytest.raises(export.ExportError, match="pip install pyarrow"):
        export.write_points(data, tmp_path / "p.parquet", "parquet")
    assert not (tmp_path / "p.parquet").exists()


def test_unknown_formats_are_refused(sample, tmp_path):
    engine, _ = sample
    data = load(engine, None, None)
    with pytest.raises(export.ExportError, match="csv, csv-wide, parquet"):
        export.write_points(data, tmp_path / "x", "xlsx")
    with pytest.raises(export.ExportError, match="csv, md, latex"):
        export.write_table(data, tmp_path / "x", "html")
    assert not (tmp_path / "x").exists()


def test_a_failed_write_leaves_no_partial_file(sample, tmp_path):
    engine, _ = sample
    data = load(engine, None, None)
    scan = data[0].scan

    def failing(key, start, stop):
        yield from scan(key, start, stop)
        raise ValueError("the store went away mid-export")

    data[0].scan = failing
    out = tmp_path / "p.csv"
    with pytest.raises(ValueError):
        export.write_points(data, out, "csv")
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]  # the store only: no p.csv, no tmp


@pytest.mark.postgres
def test_postgres_store_gives_the_same_table_as_sqlite(pg_store, sample):
    sqlite_engine, _ = sample
    pg = new_store(pg_store)
    try:
        make_sample_runs(pg)
        pg_text = export.table_text(load(pg), "md")
        (cos,) = load(pg, ["cos_lr1e-3"], ["train/loss"])
        values = [v for chunk in cos.scan("train/loss", None, None) for _s, _w, v in chunk]
    finally:
        pg.dispose()  # after the scan: a read after dispose() opens a connection nobody closes
    assert pg_text == export.table_text(load(sqlite_engine), "md")
    assert math.isnan(values[2]) and values[3] == math.inf
