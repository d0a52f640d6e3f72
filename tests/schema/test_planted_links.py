"""Issue 36, findings 1 and 7: another local user can neither have your files overwritten through
links planted where you write, nor read what is yours.

A real second user (useradd) plants thousands of symlinks in a shared sticky, world-writable
folder, at every name a writer of this project used or could be guessed to use (the target
itself, `.tmp`, `.tmp<pid>` for the pid of the very process that will write, `.part-<pid>`,
`-journal`), each pointing at a file of the victim's or at a name in the victim's own folder.
The victim (this test's account) then runs every command that writes, each in a process of its
own: `reslog export` (csv, parquet, table), `resplot export`, `resplot snapshot` (PNG, SVG),
`resplot sync` (the mirror), `reslog upgrade` (its backup), resplot's settings and local copies'
index, and the trainer's corpus and checkpoint files. Not one of the victim's files may change,
and no file may appear in the victim's folder.

Then the privacy half, under umask 000: settings, the local copies' index and mirrors, a store
and an export's temporary file are 0600 in 0700 folders, and the second user reads none of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import reslog
from schema.store import user_files
from tests.fixtures.logging_child import ROOT
from tests.fixtures.users import OtherUser, other_user  # noqa: F401 - a fixture

ASSETS = ROOT / "tests" / "assets"
AROUND = 250  # `.tmp<pid>` links planted for this many pids either side of the writer's


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder anyone may write (as /tmp is), outside pytest's private tmp folders so the other
    user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="shared-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def victim() -> Iterator[Path]:
    """The victim's own folder of precious files, which links will point at."""
    folder = Path(tempfile.mkdtemp(prefix="victim-", dir="/tmp"))
    for i in range(40):
        (folder / f"precious{i:02d}").write_text(f"precious file {i:04d}\n")  # 21 bytes each
    reslog.init(store=folder / "victim.db", name="mine", system=False).finish()  # their store
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def fingerprint(folder: Path) -> dict[str, tuple]:
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mode, p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
    }


PLANT = r"""
import os, sys, json
shared, victim, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
n = 0
for name in plan:
    name, _, to = name.partition("=>")
    path = os.path.join(shared, name)
    if os.path.lexists(path):
        continue
    # half point at a precious file (overwrite it), half at a new name there (create one);
    # "name=>x" points at x in the victim's folder ("name=>": the folder itself)
    target = (f"precious{n % 40:02d}" if n % 2 == 0 else f"created-{n}")
    os.symlink(os.path.join(victim, to if _ else target), path)
    n += 1
print(n)
"""


def planted_names(targets: list[str], pid: int) -> list[str]:
    names = [t for t in targets if "=>" in t]
    for t in (t.split("=>")[0] for t in targets):
        names += [t, f"{t}.tmp", f"{t}-journal", f".{t}.part-{pid}", f"{t}.tmp{pid}"]
        names += [f"{t}.tmp{p}" for p in range(max(2, pid - AROUND), pid + AROUND)]
    return names


def plant(attacker: OtherUser, shared: Path, victim: Path, names: list[str]) -> int:
    done = attacker.run(
        ["/usr/bin/python3", "-I", "-c", PLANT, str(shared), str(victim), json.dumps(names)]
    )
    return int(done.stdout)


def victim_runs(
    attacker: OtherUser, shared: Path, victim: Path, code: str, targets: list[str]
) -> subprocess.CompletedProcess:
    """`code` in a process of the victim's, started first so the attacker can plant links for
    its very pid, then let go."""
    boot = "import os, sys; print(os.getpid(), flush=True); sys.stdin.readline()\n" + code
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen(
        [sys.executable, "-c", boot],
        cwd=ROOT,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        pid = int(proc.stdout.readline())
        assert plant(attacker, shared, victim, planted_names(targets, pid)) > 2 * AROUND
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def cli(module: str, *argv: str) -> str:
    return f"from {module} import main\nsys.exit(main({list(argv)!r}))\n"


@pytest.fixture(scope="module")
def source_store() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="victim-store-", dir="/tmp"))
    store = folder / "reslog.db"
    run = reslog.init(store=store, name="planted", system=False, config={"lr": 3e-4})
    for step in range(200):
        run.log({"train/loss": 2.0 / (step + 1), "train/lr": 3e-4}, step=step)
    run.finish()
    yield store
    shutil.rmtree(folder, ignore_errors=True)


# (what, code run as the victim, the names the attacker plants at, True: it must succeed,
# else it must be refused in one line: False, or words the line holds)
def writers(shared: Path, store: Path) -> list[tuple[str, str, list[str], bool | str]]:
    s = str(shared)
    old = shared / "old.db"
    return [
        (
            "reslog export csv",
            cli(
                "reslog.tools.cli", "export", str(store), "--format", "csv", "-o", f"{s}/points.csv"
            ),
            ["points.csv"],
            True,
        ),
        (
            "reslog export parquet",
            cli(
                "reslog.tools.cli",
                "export",
                str(store),
                "--format",
                "parquet",
                "-o",
                f"{s}/points.parquet",
            ),
            ["points.parquet"],
            True,
        ),
        (
            "reslog export md",
            cli("reslog.tools.cli", "export", str(store), "--format", "md", "-o", f"{s}/table.md"),
            ["table.md"],
            True,
        ),
        (
            "resplot export",
            cli("resplot.cli", "export", str(store), "--format", "csv-wide", "-o", f"{s}/wide.csv"),
            ["wide.csv"],
            True,
        ),
        (
            "resplot snapshot png",
            cli("resplot.cli", "snapshot", str(store), "-o", f"{s}/snap.png"),
            ["snap.png"],
            True,
        ),
        (
            "resplot snapshot svg",
            cli("resplot.cli", "snapshot", str(store), "-o", f"{s}/snap.svg"),
            ["snap.svg"],
            True,
        ),
        # a link at the mirror's own name is refused; links at its side files are not followed
        (
            "resplot sync (link at the mirror)",
            cli("resplot.cli", "sync", str(store), f"{s}/mirror.db"),
            ["mirror.db=>victim.db"],
            "is a link made by",
        ),
        # SQLite opens its -wal/-shm/-journal with O_NOFOLLOW: links there make it refuse
        (
            "resplot sync (links at its side files)",
            cli("resplot.cli", "sync", str(store), f"{s}/mirror2.db"),
            ["mirror2.db-wal", "mirror2.db-shm"],
            False,
        ),
        (
            "resplot sync",
            cli("resplot.cli", "sync", str(store), f"{s}/mirror3.db"),
            ["mirror3.db.tmp"],
            True,
        ),
        (
            "reslog upgrade",
            f"import shutil; shutil.copy({str(ASSETS / 'store_0004.db')!r}, "
            f"{str(old)!r})\n" + cli("reslog.tools.cli", "upgrade", str(old)),
            ["old.db.bak-0004", "old.db.bak-0004.1"],
            True,
        ),
        # a new store's name holding a link to nothing: SQLite would create what it names
        (
            "reslog.init (a link to nothing at the store)",
            f"import reslog\ntry:\n  reslog.init(store={s + '/new.db'!r}, system=False)\n"
            "except Exception as e:\n  sys.exit(str(e))\n",
            ["new.db=>nothing-here"],
            "is a link made by",
        ),
        # a link to a store of the victim's: the run would be written into it
        (
            "reslog.init (a link to the victim's store)",
            f"import reslog\ntry:\n  reslog.init(store={s + '/runs.db'!r}, system=False)\n"
            "except Exception as e:\n  sys.exit(str(e))\n",
            ["runs.db=>victim.db"],
            "is a link made by",
        ),
        (
            "resplot settings",
            "from pathlib import Path\nfrom resplot.ui.settings import Settings, "
            f"save\nsave(Settings(), Path({s!r}) / 'settings.json')\n",
            ["settings.json"],
            True,
        ),
        (
            "local copies' index",
            "from resplot.ui.local_copies import LocalCopies\ntry:\n"
            f"  LocalCopies({s + '/copies'!r}).keep('gpu-box:runs/x.db')\n"
            "except OSError as e:\n  sys.exit(f'{e.filename}: {e.strerror}')\n",
            ["copies=>"],
            "is a link made by",
        ),
        (
            "trainer corpus",
            cli(
                "trainer.corpus",
                "--out",
                f"{s}/corpus.jsonl",
                "--max-mb",
                "0.01",
                "--root",
                str(ROOT / "schema"),
            ),
            ["corpus.jsonl"],
            True,
        ),
        (
            "trainer checkpoint",
            "from pathlib import Path\nfrom trainer.checkpoint import "
            f"_atomic_save\n_atomic_save({{'w': 1}}, Path({s!r}) / 'c.pt')\n",
            ["c.pt"],
            True,
        ),
    ]


def test_no_planted_link_changes_a_file_of_the_victim(
    shared,
    victim,
    source_store,
    other_user,  # noqa: F811
):
    before = fingerprint(victim)
    results = {}
    for what, code, targets, must_work in writers(shared, source_store):
        done = victim_runs(other_user, shared, victim, code, targets)
        results[what] = done.returncode
        if must_work is True:
            assert done.returncode == 0, f"{what}: {done.stderr[-1500:]}"
        else:  # refused, in one line (saying why, where the test knows the words)
            assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, (
                f"{what}: {done.returncode} {done.stderr[-1500:]}"
            )
            assert must_work is False or must_work in done.stderr, done.stderr
        changed = {k for k, v in fingerprint(victim).items() if before.get(k) != v}
        assert changed == set(), f"{what} changed or created {sorted(changed)} in the victim's"
    # What the commands wrote is where it was asked for, as regular files of the victim's.
    for name in (
        "points.csv",
        "points.parquet",
        "table.md",
        "wide.csv",
        "snap.png",
        "snap.svg",
        "mirror3.db",
        "settings.json",
        "corpus.jsonl",
        "c.pt",
    ):
        info = os.lstat(shared / name)
        assert stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid(), name
    assert (shared / "points.csv").read_text().startswith("run,uid,key,step,wall,value\n")
    assert list(shared.glob("old.db.bak-0004*"))  # the upgrade's backup, beside the links
    # No temporary file is left behind by any of them.
    leftovers = [p.name for p in shared.iterdir() if not p.is_symlink() and "tmp" in p.name]
    assert leftovers == []


def test_a_link_or_a_folder_of_another_user_is_never_written_through(shared, other_user):  # noqa: F811
    mine = shared / "mine"
    other_user.run(["mkdir", "-m", "0777", str(mine)])
    with pytest.raises(PermissionError, match="belongs to"):
        user_files.make_private_folders(mine)
    other_user.run(["ln", "-s", "/root", str(shared / "link")])
    with pytest.raises(PermissionError, match="is a link made by"):
        user_files.make_private_folders(shared / "link")
    with pytest.raises(PermissionError, match="is a link"):
        user_files.private_folder(shared / "link")


# ---- privacy ---------------------------------------------------------------------------------


@pytest.fixture
def home(monkeypatch) -> Iterator[Path]:
    """A home folder others can enter (0755, as many are), under umask 000: the worst case."""
    folder = Path(tempfile.mkdtemp(prefix="home-", dir="/tmp"))
    folder.chmod(0o755)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(folder / ".local" / "share"))
    monkeypatch.delenv("RESPLOT_CONFIG", raising=False)
    old = os.umask(0)
    try:
        yield folder
    finally:
        os.umask(old)
        shutil.rmtree(folder, ignore_errors=True)


def test_other_users_read_nothing_of_yours(home, source_store, other_user):  # noqa: F811
    from reslog.tools.export import _text_out
    from resplot.ui import settings
    from resplot.ui.local_copies import LocalCopies

    # An older resplot left its folder 0755 and its settings 0644.
    old_folder = home / ".config" / "resplot"
    old_folder.mkdir(parents=True, mode=0o755)
    (old_folder / "settings.json").write_text("{}")
    (old_folder / "settings.json").chmod(0o644)
    settings.save(settings.Settings())
    copies = LocalCopies()
    copies.keep(str(source_store))
    copies.sync_one(str(source_store))
    mirror = copies.mirror_path(str(source_store))
    store = home / "runs" / "reslog.db"
    reslog.init(store=store, system=False, config={"host": "gpu-box"}).finish()

    def private(f: Path) -> None:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
        assert stat.S_IMODE(f.parent.stat().st_mode) == 0o700 or f.parent == home, f
        peek = other_user.run(["cat", str(f)], check=False)
        assert peek.returncode != 0 and b"Permission denied" in peek.stderr, f

    for f in (settings.config_path(), copies.index_path, mirror, store):
        private(f)
    folders = [old_folder, copies.directory, copies.directory.parent, store.parent]
    for folder in folders:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
        peek = other_user.run(["ls", str(folder)], check=False)
        assert peek.returncode != 0 and b"Permission denied" in peek.stderr, folder
    export = home / "points.csv"
    with _text_out(export) as out:  # an export's temporary file, caught mid-write
        out.write("run,uid\n")
        out.flush()
        [temp] = [p for p in home.iterdir() if p.name.startswith(".points.csv.")]
        private(temp)
    assert json.loads(copies.index_path.read_text())["kept"]  # what was written is there
    assert settings.load().problem is None and export.read_text() == "run,uid\n"
