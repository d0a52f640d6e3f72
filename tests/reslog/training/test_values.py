"""What log() accepts and rejects, with real numpy and torch (CPU) values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import reslog
from reslog.training.values import checked, convert, to_floats
from tests.reslog.test_reslog_api import read_run


@pytest.fixture
def run(store_path):
    run = reslog.init(project="p", store=store_path, system=False)
    yield run
    run.finish()


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (1.5, 1.5),
        (7, 7.0),
        (True, 1.0),
        (np.float32(0.25), 0.25),
        (np.float64(-2.5), -2.5),
        (np.int64(2**40), float(2**40)),
        (2**70, float(2**70)),  # beyond SQLite's 64-bit INTEGER: must not block the writer
        (-(2**64), -float(2**64)),
        (10**400, math.inf),  # beyond the float range
        (np.bool_(False), 0.0),
        (np.array(3.0), 3.0),
        (np.array([4.0]), 4.0),
        (torch.tensor(0.5), 0.5),
        (torch.tensor([6], dtype=torch.int32), 6.0),
        (torch.tensor(1.0, dtype=torch.bfloat16), 1.0),
        (torch.tensor(2.0, requires_grad=True) * 2, 4.0),
        (torch.nn.Parameter(torch.tensor(9.0)), 9.0),
    ],
)
def test_accepted_values_are_stored_as_floats(store_path, value, stored):
    run = reslog.init(project="p", store=store_path, system=False)
    run.log({"v": value})
    run.finish()
    _, series, _ = read_run(store_path)
    assert series["v"] == [(0, stored)]


@pytest.mark.parametrize(
    "value",
    [
        [1.0],
        1 + 2j,
        np.array([1.0, 2.0]),
        np.complex64(1),
        torch.zeros(2),
        torch.tensor(1 + 1j),
        object(),
        reslog.Table(columns=["a"], data=[[1]]),
        reslog.Image(np.zeros((2, 2))),
        reslog.Histogram([1, 2, 3]),
    ],
    ids=lambda v: "object()" if type(v) is object else repr(v),  # the same ids in every process
)
def test_a_value_that_cannot_be_stored_warns_once_per_key_and_training_goes_on(
    run, store_path, value
):
    run.log({"good": 1.0})
    with pytest.warns(RuntimeWarning, match="not logged: key 'bad/key': values of type") as got:
        run.log({"fine": 2.0, "bad/key": value})
        run.log({"fine": 3.0, "bad/key": value})  # counted, not warned about again
    assert len(got) == 1
    run.log({"good": 3.0})
    run.finish()
    _, series, events = read_run(store_path)
    assert series == {"good": [(0, 1.0), (3, 3.0)], "fine": [(1, 2.0), (2, 3.0)]}
    skipped = [e for e in events if e.kind == "skipped"]
    assert skipped[0].title.startswith("not logged: key 'bad/key'")
    assert skipped[-1].title == "2 logged values were not stored (1 keys)"
    assert skipped[-1].body == "bad/key: 2"


def test_none_is_skipped_strings_are_text_and_nested_dicts_flatten(run, store_path):
    run.log({"loss": 1.0, "lr": None, "phase": "warmup", "opt": {"lr": 0.1, "m": {"b": True}}})
    run.log({"phase": np.str_("decay")}, step=5)
    run.finish()
    _, series, events = read_run(store_path)
    assert series == {"loss": [(0, 1.0)], "opt/lr": [(0, 0.1)], "opt/m/b": [(0, 1.0)]}
    texts = [(e.step, e.title, e.body) for e in events if e.kind == "text"]
    assert texts == [(0, "phase", "warmup"), (5, "phase", "decay")]


def test_bad_keys_warn_and_are_skipped_while_non_dicts_and_bad_steps_raise(run, store_path):
    bad = {1: 1.0, "x" * 501: 1.0, "a\x00b": 1.0, "\ud800": 1.0}
    with pytest.warns(RuntimeWarning) as got:
        run.log({**bad, "ok": 2.0})
    reasons = " ".join(str(w.message) for w in got)
    for why in ("keys must be str", "longer than 500", "NUL", "unicode"):
        assert why in reasons
    with pytest.raises(TypeError, match="dict of metrics"):
        run.log([("a", 1.0)])
    with pytest.raises(TypeError, match="step must be an int"):
        run.log({"a": 1.0}, step=1.5)
    assert run._writer.logged == 1 and run.step == 1
    run.finish()
    assert read_run(store_path)[1] == {"ok": [(0, 2.0)]}


def test_commit_false_accumulates_into_the_next_committed_step(run, store_path):
    run.log({"a": 1.0}, commit=False)
    run.log({"b": 2.0}, commit=False)
    assert run.step == 0
    run.log({"c": 3.0})
    run.log({"a": 4.0}, step=7, commit=False)
    run.log({"b": 5.0})  # takes the held step
    run.finish()
    series = read_run(store_path)[1]
    assert series == {"a": [(0, 1.0), (7, 4.0)], "b": [(0, 2.0), (7, 5.0)], "c": [(0, 3.0)]}


def test_numpy_and_tensor_steps_are_accepted(run):
    run.log({"a": 1.0}, step=np.int64(5))
    run.log({"a": 1.0}, step=torch.tensor(9))
    assert run.step == 10


def test_cpu_tensor_is_read_when_logged_so_later_inplace_changes_do_not_matter(run, store_path):
    acc = torch.tensor(1.0)
    run.log({"acc": acc})
    acc.zero_()
    run.finish()
    _, series, _ = read_run(store_path)
    assert series["acc"] == [(0, 1.0)]


def test_bulk_conversion_groups_tensors_by_dtype_and_maps_nan_to_none():
    values = [
        1.0,
        2,
        torch.tensor(0.5, dtype=torch.float16),
        torch.tensor(3, dtype=torch.int64),
        torch.tensor(True),
        math.nan,
        torch.tensor(float("nan")),
        torch.tensor(float("-inf"), dtype=torch.bfloat16),
        10**400,
    ]
    assert to_floats(values) == [1.0, 2.0, 0.5, 3.0, 1.0, None, None, -math.inf, math.inf]


def test_checked_converts_without_touching_the_known_keys_on_failure():
    known: set[str] = set()
    with pytest.raises(TypeError):
        checked({"a": 1.0, "b": "x"}, known)
    assert known == set()
    assert checked({"a": np.float32(2.0), "b": True}, known) == {"a": 2.0, "b": 1.0}
    assert known == {"a", "b"}
    assert type(convert("k", np.float64(1.0))) is float


def test_device_records_are_converted_at_flush_time(store_path):
    # No GPU here: CPU tensors stand in for CUDA ones on the writer's flush-time path (the one a
    # CUDA tensor takes: buffered as a DeviceRecord, stacked and copied per device and dtype).
    from reslog.training.writer import DeviceRecord

    run = reslog.init(project="p", store=store_path, system=False)
    record = {"a": torch.tensor(2.5), "b": torch.tensor(float("nan")), "c": 4, "d": math.inf}
    run._known.update(record)
    run._writer.buffer.append(DeviceRecord((3, 1.0, record)))
    run._writer.logged += len(record)
    run.log({"a": 1.0}, step=4)
    run.finish()
    _, series, _ = read_run(store_path)
    assert series["a"] == [(3, 2.5), (4, 1.0)]
    assert math.isnan(series["b"][0][1])
    assert series["c"] == [(3, 4.0)] and series["d"] == [(3, math.inf)]


def test_a_rejected_call_keeps_pending_timer_values_for_the_next_one(run, store_path):
    with run.timer("data"):
        pass
    with pytest.raises(ValueError, match="64 bits"):
        run.log({"a": 1.0}, step=2**64)
    run.log({"a": 1.0})
    run.finish()
    _, series, _ = read_run(store_path)
    assert [s for s, _ in series["time/data"]] == [0]
