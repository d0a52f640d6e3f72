"""The hover readout's layout (resplot/data/readout.py) and how names are cut to fit
(resplot/data/names.py), without Qt: one row per run with train and valid side by side, the
hovered run first, then by value or by name, ended runs greyed last, "+N more" past what fits."""

from __future__ import annotations

import math

import pytest

from resplot.data.hover import Reading
from resplot.data.model import RunRef
from resplot.data.names import distinct_part, elide_middle, fit_name, fit_names
from resplot.data.pages import Item
from resplot.data.readout import layout, render
from tests.fixtures.sweep import sweep_name

REFS = [RunRef("local", "/s.db", f"uid{i}") for i in range(6)]
NAMES = {ref: sweep_name(i) for i, ref in enumerate(REFS)}


def _item(i: int, part: str) -> Item:
    return Item(REFS[i], f"{part}/loss", f"{NAMES[REFS[i]]} {part}", f"#00000{i}", part=part)


def _reading(i: int, part: str, value: float, step: int = 1000, smoothed=None) -> Reading:
    return Reading(_item(i, part), step, float(step), value, smoothed, False)


def _found() -> list[Reading]:
    out = []
    for i in range(6):
        out.append(_reading(i, "train", 3.0 - 0.1 * i))
        out.append(_reading(i, "valid", 3.2 - 0.1 * i, step=1000 - 200 * (i == 2)))
    return out


def _layout(found, **kw):
    end = kw.pop("end", {})
    ends = {r.item: end.get(r.item.ref, 1000.0) for r in found}
    args = {
        "x": 1000.0,
        "where": "step 1,000",
        "names": NAMES,
        "ends": ends,
        "tolerance": 5.0,
        "at_step": 1000,
        "step_slack": 10,
        "columns": ["train", "valid"],
    }
    args.update(kw)
    return layout("Loss", found, **args)


def test_one_row_per_run_with_train_and_valid_side_by_side():
    readout = _layout(_found())
    assert readout.columns == ["train", "valid"]
    assert len(readout.rows) == 6 and readout.more == 0
    for row in readout.rows:
        assert set(row.cells) == {"train", "valid"}
        assert row.cells["train"].item.ref == row.cells["valid"].item.ref == row.ref
    # By value, highest first: the order the lines cross the pointer, top first.
    firsts = [row.cells["train"].raw for row in readout.rows]
    assert firsts == sorted(firsts, reverse=True)


def test_the_hovered_run_comes_first_then_by_value_or_by_name():
    readout = _layout(_found(), hovered=REFS[4])
    assert readout.rows[0].ref == REFS[4] and readout.rows[0].hovered
    assert [r.ref for r in readout.rows[1:]] == [REFS[i] for i in (0, 1, 2, 3, 5)]
    by_name = _layout(_found(), hovered=REFS[4], by="name")
    assert by_name.rows[0].ref == REFS[4]
    names = [r.name for r in by_name.rows[1:]]
    assert names == sorted(names, key=str.lower)
    with pytest.raises(ValueError, match="value, name"):
        _layout(_found(), by="size")


def test_runs_that_ended_before_the_hovered_step_are_greyed_last():
    readout = _layout(_found(), end={REFS[0]: 600.0, REFS[3]: 998.0})
    assert [r.ended for r in readout.rows] == [False] * 5 + [True]
    assert readout.rows[-1].ref == REFS[0]  # REFS[3] ends within the tolerance: still there
    assert "grey: ended before here" in render(readout).notes


def test_no_more_rows_than_fit_and_the_rest_counted():
    readout = _layout(_found(), max_rows=4, hovered=REFS[5])
    assert len(readout.rows) == 3 and readout.more == 3
    assert readout.rows[0].ref == REFS[5]  # the hovered run is never the one left out
    assert "+3 more" in render(readout).notes


def test_a_value_read_far_from_the_hovered_step_says_its_step():
    text = render(_layout(_found())).plain()
    assert "@800" in text  # run 2's validation was logged 200 steps before
    assert text.count("@") == 1
    assert "@" not in render(_layout(_found()), steps=False).plain()  # for a narrow chart
    # Off the step axis, each row says its step in a column of its own.
    text = render(_layout(_found(), at_step=None, where="wall time 12:00"))
    assert text.columns == ["train", "valid", "step"]
    assert all(line.cells[-1][0].text == "1,000" for line in text.lines)


def test_nan_and_smoothed_values():
    found = [_reading(0, "train", math.nan), _reading(1, "train", 2.0, smoothed=1.9)]
    readout = _layout(found, hovered=REFS[1], columns=["train"])
    text = render(readout).plain()
    assert "NaN" in text and "smoothed" in text
    hovered, other = render(readout).lines
    assert [s.text for s in hovered.cells[0]] == ["1.9", "2"]  # smoothed, then raw
    assert [s.text for s in other.cells[0]] == ["NaN"]
    assert [s.text for s in render(readout, raw=False).lines[0].cells[0]] == ["1.9"]
    assert [r.ref for r in readout.rows] == [REFS[1], REFS[0]]


def test_many_series_of_a_run_get_a_row_each():
    found = [
        Reading(
            Item(REFS[0], f"sys/gpu{g}/util", "x", "#000000", part=f"GPU{g}"),
            5,
            5.0,
            float(g),
            None,
            False,
        )
        for g in range(8)
    ]
    readout = _layout(found, columns=[f"GPU{g}" for g in range(8)])
    assert readout.columns == [""] and len(readout.rows) == 8
    assert readout.rows[0].name.endswith("GPU7")
    two = _layout(found[:2], columns=["GPU0", "GPU1"])
    assert two.columns == ["GPU0", "GPU1"] and len(two.rows) == 1
    narrow = render(two, max_columns=1)
    assert narrow.columns == ["GPU0"] and "GPU1: chart too narrow" in narrow.notes


def test_names_keep_the_part_that_tells_a_sweep_apart():
    names = [sweep_name(i) for i in range(12)]
    assert distinct_part(names[3], names) == "…lr0.0006-wd0.0-seed3…"
    fitted = fit_names(names, 30)
    assert len(set(fitted.values())) == 12  # still told apart
    assert all(len(v) <= 30 for v in fitted.values())
    assert fit_name("short", names, 30) == "short"
    assert elide_middle("abcdefghij", 5) == "ab…ij"
    # Nothing shared: cut in the middle; one name alone: whole words are not dropped.
    assert fit_name("alpha-beta-gamma", ["alpha-beta-gamma", "zeta"], 9) == "alph…amma"
    assert distinct_part("a-b", ["a-b"]) == "a-b"


def test_names_cut_to_any_width_stay_apart():
    """A sweep over lr and batch size at 1280: cutting the middle made `…lr6e-…bs256` of both
    lr6e-4 and lr6e-5 (12 rows, 10 labels). Every width the readout tries down to 10
    characters gives 12 labels for 12 runs, each within its width; a readout renders them."""
    from resplot.ui.readout_view import NAME_CHARS_TRIED

    lrs = ("1e-4", "2e-4", "6e-4", "1e-5", "2e-5", "6e-5")
    names = [
        f"llama-125m-wsd-lr{lr}-wd0.1-warmup2000-cosine-bs{bs}-ctx2048"
        for lr in lrs
        for bs in (256, 512)
    ]
    for chars in [c for c in NAME_CHARS_TRIED if c >= 10]:
        fitted = fit_names(names, chars)
        assert len(set(fitted.values())) == len(names), (chars, sorted(fitted.values()))
        assert all(len(v) <= chars for v in fitted.values()), chars
    assert fit_names(names, 12)[names[0]] == "…lr1e-4…256…"
    refs = [RunRef("local", "/s.db", f"u{i}") for i in range(len(names))]
    found = [
        Reading(
            Item(ref, "train/loss", "loss", "#000000", part="train"),
            10,
            10.0,
            3.0 - i / 100,
            None,
            False,
        )
        for i, ref in enumerate(refs)
    ]
    by_ref = dict(zip(refs, names, strict=True))
    readout = layout("Loss", found, x=10.0, where="step 10", names=by_ref, ends={}, tolerance=0.0)
    text = render(readout, 12)
    assert len({line.name for line in text.lines}) == len(names) == len(text.lines)
