"""schema.rules.alerts: one list of alert kinds for `reslog watch`, the viewer and its
notifications, and the one parse of per-GPU keys."""

from __future__ import annotations

import pytest

from schema.rules import alerts
from schema.rules.alerts import KINDS, gpu_key
from schema.rules.compare import gpu_ids
from schema.store.status import RUN_STATUSES


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("sys/gpu0/util", (0, "util")),
        ("sys/gpu12/temp_c", (12, "temp_c")),
        ("sys/gpu3/throttle", (3, "throttle")),
        ("sys/gpu1/mem/used", (1, "mem/used")),
        ("sys/gpu/util", None),
        ("sys/gpux/util", None),
        ("sys/gpu0", None),
        ("train/sys/gpu0/util", None),
        ("sys/cpu_pct", None),
    ],
)
def test_a_gpu_key_gives_its_ordinal_and_what_it_measures(name, parsed):
    assert gpu_key(name) == parsed


def test_the_comparison_counts_gpus_through_the_same_parse():
    assert gpu_ids(["sys/gpu1/util", "sys/gpu0/temp_c", "sys/gpu1/throttle", "train/loss"]) == [
        0,
        1,
    ]


def test_every_kind_named_in_the_module_has_its_meaning():
    named = {v for k, v in vars(alerts).items() if k.isupper() and isinstance(v, str)}
    assert named | set(alerts.WATCHED_EVENTS) == set(KINDS)
    assert set(RUN_STATUSES) | {alerts.STALLED} <= set(KINDS)  # every status a run can show
    assert all(meaning and meaning[-1] != "." for meaning in KINDS.values())
