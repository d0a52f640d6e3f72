"""Stores in the sources tree are named by the shortest end of their path that tells them apart."""

from __future__ import annotations

from resplot.ui.sources_tree import short_paths


def test_two_stores_with_one_file_name_show_the_folders_that_differ():
    names = short_paths({"/exp/a/runs/reslog.db", "/exp/b/runs/reslog.db", "/exp/c/other.db"})
    assert names == {
        "/exp/a/runs/reslog.db": "a/runs/reslog.db",
        "/exp/b/runs/reslog.db": "b/runs/reslog.db",
        "/exp/c/other.db": "other.db",
    }


def test_a_lone_store_shows_its_file_name():
    assert short_paths({"/data/x/runs/reslog.db"}) == {"/data/x/runs/reslog.db": "reslog.db"}
