"""A run name used twice (the same script run twice): `reslog show NAME` lists the runs of that
name with uid, start and status and picks none; the read API raises an error listing them;
a uid or a unique uid prefix picks one."""

from __future__ import annotations

import pytest

import reslog
from reslog.tools.cli import main
from schema.store.errors import AmbiguousRun, UnknownRun


def test_a_reused_name_is_listed_not_guessed(store_path, capsys):
    uids = []
    for attempt in range(2):  # the same script, run twice
        run = reslog.init(project="p", name="gpt-small", store=store_path, system=False)
        run.log({"train/loss": 1.0 + attempt})
        run.finish("failed" if attempt == 0 else None)
        uids.append(run.uid)
    assert main(["show", str(store_path), "gpt-small"]) == 2
    captured = capsys.readouterr()
    rows = [line.split() for line in captured.out.splitlines()]
    assert rows[0] == ["uid", "started", "status", "project", "name"]
    assert [(r[0], r[3], r[5]) for r in rows[1:]] == [
        (uids[0], "failed", "gpt-small"),
        (uids[1], "finished", "gpt-small"),
    ]
    assert captured.err.startswith("reslog: 'gpt-small' is the name of 2 runs: ")
    assert f"{uids[0][:8]} (started " in captured.err and ", failed)" in captured.err
    with reslog.open(store_path) as store, pytest.raises(AmbiguousRun) as err:
        store.history("gpt-small", "train/loss")
    assert [r.ref.uid for r in err.value.matches] == uids
    assert isinstance(err.value, UnknownRun)  # callers catching UnknownRun still do
    assert uids[1][:8] in str(err.value) and "give a uid or a unique uid prefix" in str(err.value)
    with reslog.open(store_path) as store:
        history = store.history(uids[1][:12], "train/loss")
    assert history["last"].tolist() == [2.0]
    assert main(["show", str(store_path), uids[0]]) == 0
    assert uids[0] in capsys.readouterr().out
