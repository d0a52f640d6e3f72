"""wandb's summary under `import reslog as wandb`: each logged key's last value, the newest
write winning between log() and a hand-set value, and define_metric(summary=...)'s aggregates,
compared key by key with what the real wandb (offline) says for the same script."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch

import reslog
from reslog.training.summary import MetricSummary
from tests.fixtures.wandb_twin import run_as
from tests.reslog.test_reslog_api import read_run

SCRIPT = """
{import_line}
import json, sys
run = wandb.init(project="p", name="summary", mode="offline", dir=sys.argv[1])
wandb.define_metric("val/acc", summary="max")
wandb.define_metric("val/loss", summary="min,last")
wandb.define_metric("eval/*", summary="mean")
wandb.define_metric("hidden", summary="none")
wandb.define_metric("score", summary="first,min,max,mean")
for i in range(20):
    wandb.log({
        "train/loss": 1.0 / (i + 1), "val/acc": [0.5, 0.9, 0.7][i % 3],
        "val/loss": 2.0 - 0.05 * i + (0.3 if i == 19 else 0.0), "eval/ppl": float(i),
        "eval/bleu": 0.25 * i, "hidden": i, "score": 10 - (i % 7),
    })
read_after_log = run.summary["train/loss"]
run.summary["train/loss"] = 42.0  # by hand, after the logs: it wins ...
read_after_set = wandb.summary["train/loss"]
wandb.log({"train/loss": 0.01, "val/acc": 0.95})  # ... until the key is logged again
run.summary["best_valid_ppl"] = 15.6
run.summary.update({"epochs": 3})
summary = {
    k: (dict(v) if hasattr(v, "keys") else v)
    for k, v in dict(run.summary).items()
    if not k.startswith("_")
}
print("RESULT " + json.dumps({
    "read_after_log": read_after_log, "read_after_set": read_after_set, "summary": summary,
}))
wandb.finish()
"""


def close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    return a == pytest.approx(b, rel=1e-12, abs=1e-12)


@pytest.mark.integration
def test_the_summary_holds_what_wandbs_does_key_by_key(tmp_path):
    theirs, _, _ = run_as(tmp_path, SCRIPT, "wandb")
    ours, _, folder = run_as(tmp_path, SCRIPT, "reslog")
    assert theirs["read_after_log"] == ours["read_after_log"] == pytest.approx(0.05)
    assert theirs["read_after_set"] == ours["read_after_set"] == 42.0
    assert sorted(ours["summary"]) == sorted(theirs["summary"])
    for key in theirs["summary"]:
        assert close(ours["summary"][key], theirs["summary"][key]), key
    assert ours["summary"]["val/acc"] == {"max": 0.95}
    assert ours["summary"]["val/loss"] == {"min": pytest.approx(1.1), "last": pytest.approx(1.35)}
    assert "hidden" not in ours["summary"]
    # What the run row keeps: the hand-set keys and the aggregates (the series rows hold the
    # last values of the rest: `reslog show` lists them as keys).
    stored = read_run(folder / "reslog.db")[0].summary
    assert stored == {
        "best_valid_ppl": 15.6,
        "epochs": 3,
        "val/acc": {"max": 0.95},
        "val/loss": ours["summary"]["val/loss"],
        "eval/ppl": {"mean": 9.5},
        "eval/bleu": {"mean": 2.375},
        "score": ours["summary"]["score"],
    }


def test_values_not_yet_numbers_wait_for_a_read_or_the_flush(store_path):
    """A device tensor is not read on the training thread (no GPU sync): under a key with
    aggregates it waits until the summary is read or the writer flushes. Without a GPU here,
    a CPU tensor handed over as log() hands over a CUDA one (log() itself reads CPU tensors
    at once) takes the same path."""
    metric = MetricSummary(("min", "last"))
    assert metric.add(3.0) == {"min": 3.0, "last": 3.0}
    assert metric.add(torch.tensor(1.0)) == {"min": 3.0, "last": 3.0}  # waits
    assert metric.add(2.0) == {"min": 3.0, "last": 3.0}  # behind it, in order
    assert metric.pending and metric.settle() == {"min": 1.0, "last": 2.0}
    assert not metric.pending


def test_a_resume_starts_from_the_stored_summary_and_the_series_last_values(store_path):
    run = reslog.init(store=store_path, system=True, system_interval=0.05)
    run.define_metric("loss", summary="min,last")
    for v in (3.0, 1.0, 2.0):
        run.log({"loss": torch.tensor(v), "lr": 0.1})
    assert run.summary["loss"] == {"min": 1.0, "last": 2.0}
    assert run.summary["lr"] == 0.1 and run.summary.get("nope", 7) == 7
    run.log({"nan": math.nan})
    run.summary["note"] = "kept"
    deadline = time.monotonic() + 60
    while not any(k.startswith("sys/") for k in read_run(store_path)[1]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    run.finish()
    assert read_run(store_path)[0].summary == {"loss": {"min": 1.0, "last": 2.0}, "note": "kept"}
    again = reslog.init(store=store_path, resume=run.uid, system=False)
    assert again.summary["lr"] == 0.1 and again.summary["note"] == "kept"
    assert math.isnan(again.summary["nan"]) and again.summary["loss"] == {"min": 1.0, "last": 2.0}
    assert not any(k.startswith("sys/") for k in again.summary)  # telemetry is not a summary
    again.finish()


def test_a_bad_summary_word_is_refused_as_wandb_does(store_path):
    run = reslog.init(store=store_path, system=False)
    with pytest.raises(ValueError, match="got 'median'"):
        run.define_metric("loss", summary="min,median")
    run.finish()
    assert json.loads(json.dumps(read_run(store_path)[0].summary)) == {}
