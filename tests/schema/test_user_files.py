"""schema/store/user_files.py on its own: whole files or none, the mode asked for whatever the
umask, no temporary left behind, a link at the target replaced and never written through.
(tests/schema/test_planted_links.py runs every writer against links another user planted.)"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from schema.store import user_files


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0)
    yield
    os.umask(old)


def test_a_failed_write_leaves_the_target_and_no_temporary(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError), user_files.replacing(target) as fh:
        fh.write("half")
        raise RuntimeError("export failed")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.csv"]
    with pytest.raises(RuntimeError), user_files.replacing_path(target) as path:
        path.write_text("half")
        raise RuntimeError("SQLite failed")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["out.csv"]


def test_modes_whatever_the_umask(tmp_path, umask):
    user_files.write_file(tmp_path / "private.json", "{}", private=True)
    user_files.write_file(tmp_path / "export.csv", "a\n")
    assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "export.csv").stat().st_mode) == 0o666  # as open() gives
    os.umask(0o027)
    assert user_files.umask() == 0o027
    user_files.write_file(tmp_path / "export2.csv", b"a\n")
    assert stat.S_IMODE((tmp_path / "export2.csv").stat().st_mode) == 0o640
    with user_files.replacing_path(tmp_path / "copy.db", file_mode=0o600) as path:
        path.write_bytes(b"x")
    assert stat.S_IMODE((tmp_path / "copy.db").stat().st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["copy.db", "export.csv", "export2.csv", "private.json"]


def test_private_folders_are_0700_and_an_old_wide_one_is_tightened(tmp_path, umask):
    made = user_files.make_private_folders(tmp_path / "a" / "b")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE(made.parent.stat().st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    user_files.make_private_folders(wide)  # a folder named by the user: left as it is
    assert stat.S_IMODE(wide.stat().st_mode) == 0o755
    user_files.private_folder(wide)  # an app's own folder: tightened
    assert stat.S_IMODE(wide.stat().st_mode) == 0o700
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        user_files.private_folder(tmp_path / "file")


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("mine\n")
    target = tmp_path / "out.svg"
    target.symlink_to(precious)
    user_files.write_file(target, "<svg/>")
    assert precious.read_text() == "mine\n"
    assert not target.is_symlink() and target.read_text() == "<svg/>"
    nowhere = tmp_path / "copy.bin"
    nowhere.symlink_to(tmp_path / "created-through-the-link")
    user_files.copy_file(precious, nowhere)
    assert not (tmp_path / "created-through-the-link").exists()
    assert not nowhere.is_symlink() and nowhere.read_text() == "mine\n"
    assert os.stat(nowhere).st_mtime_ns == os.stat(precious).st_mtime_ns


def test_a_new_store_name_holding_a_link_to_nothing_is_refused(tmp_path):
    from schema.store.sqlite_file import create_file

    link = tmp_path / "new.db"
    link.symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(FileExistsError, match="a link to nothing is there"):
        create_file(link)
    assert not Path(tmp_path / "elsewhere.db").exists()
    assert create_file(tmp_path / "fresh.db") and not create_file(tmp_path / "fresh.db")
