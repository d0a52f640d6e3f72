"""`reslog import` against hostile input, as a real subprocess (a hang is a failure, not a
stuck suite): FIFOs named like inputs, flipped bits, names that are not UTF-8, values of the
wrong type, truncated and random files, for every importer. Each ends in one line and exit
status 2, or in a counted skip said once; never a traceback, a hang or a wrong value."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from torch.utils.tensorboard import SummaryWriter

from reslog.tools.importers.protobuf import fields
from reslog.tools.importers.wandb_offline import R_HISTORY
from reslog.tools.importers.wandb_offline import records as records_of
from tests.reslog.tools.importers.test_import_wandb import write_offline_run
from tests.reslog.tools.importers.test_importers import point_count, stored_points

pytestmark = pytest.mark.integration

KINDS = ("tensorboard", "wandb", "csv", "parquet")


def reslog(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "reslog.tools.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4])},
    )


def one_line_error(done: subprocess.CompletedProcess, kind: str, *parts: str) -> str:
    """The single stderr line of a refused import (exit status 2), holding each of `parts`."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1, done.stderr
    line = done.stderr.strip()
    assert line.startswith(f"reslog: import {kind}: "), line
    for part in parts:
        assert part in line, (part, line)
    return line


def scalars_file(folder: Path, n: int = 200) -> Path:
    """One event file: scalar `v` = step, steps 0..n-1 (what a bit flip can be seen in)."""
    w = SummaryWriter(str(folder))
    for step in range(n):
        w.add_scalar("v", float(step), step)
    w.close()
    (path,) = folder.iterdir()
    return path


def records(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of every TFRecord of an event file."""
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, length))
        pos += 12 + length + 4
    return out


def sample_input(kind: str, root: Path) -> tuple[Path, Path]:
    """(what to pass to `reslog import kind`, the file in it) for a small valid input."""
    if kind == "tensorboard":
        return root / "tb", scalars_file(root / "tb" / "run", 50)
    if kind == "wandb":
        wandb_dir = write_offline_run(root)
        return wandb_dir, next(wandb_dir.glob("offline-run-*/run-*.wandb"))
    if kind == "csv":
        path = root / "t.csv"
        path.write_text("step,loss,lr\n" + "".join(f"{s},{1 / (s + 1)},0.1\n" for s in range(50)))
        return path, path
    path = root / "t.parquet"
    n = 500
    table = pa.table({"key": ["loss"] * n, "step": list(range(n)), "value": [0.5] * n})
    pq.write_table(table, path)
    return path, path


def fifo_input(kind: str, root: Path) -> tuple[Path, Path]:
    """(what to pass, a FIFO inside it named as the importer looks for)."""
    names = {
        "tensorboard": ("tb", "tb/run/events.out.tfevents.1700000000.host.1.0"),
        "wandb": ("wandb", "wandb/offline-run-20250101_000000-abc/run-abc.wandb"),
        "csv": ("x.csv", "x.csv"),
        "parquet": ("pq", "pq/x.parquet"),
    }
    given, fifo = (root / p for p in names[kind])
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    return given, fifo


# ---- finding 3: a FIFO ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_fifo_named_like_an_input_is_refused_in_one_line(tmp_path, kind):
    """Opened without O_NONBLOCK, a FIFO waits for a writer that never comes: the import hung
    forever (the timeout here turns that into a failure)."""
    given, fifo = fifo_input(kind, tmp_path)
    store = tmp_path / "s.db"
    done = reslog("import", kind, str(given), "--store", str(store), timeout=60)
    one_line_error(done, kind, str(fifo), "a FIFO, not a regular file")


def test_a_fifo_given_as_the_path_itself_is_refused_by_name(tmp_path):
    fifo = tmp_path / "events.out.tfevents.1.host"
    os.mkfifo(fifo)
    done = reslog("import", "tensorboard", str(fifo), "--store", str(tmp_path / "s.db"))
    one_line_error(done, "tensorboard", str(fifo), "a FIFO")


# ---- finding 4: checksums ------------------------------------------------------------------


def test_a_flipped_bit_in_a_records_data_skips_that_record_and_imports_the_rest(tmp_path):
    """The data CRC was not checked: step 100's value came in as another number."""
    folder = tmp_path / "tb" / "run"
    path = scalars_file(folder)
    data = bytearray(path.read_bytes())
    value = struct.pack("<f", 100.0)
    at = next(p for p, n in records(bytes(data)) if value in data[p + 12 : p + 12 + n])
    data[data.index(value, at) + 2] ^= 0x01  # 100.0 -> 100.5
    path.write_bytes(bytes(data))
    store = tmp_path / "s.db"
    done = reslog("import", "tensorboard", str(tmp_path / "tb"), "--store", str(store))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"  {path}: 1 corrupt record skipped (at byte {at}, " in done.stdout
    assert done.stdout.count("corrupt record") == 2  # the run's line and the total, once each
    assert "1 corrupt records skipped" in done.stdout.splitlines()[-1]
    with sqlite3.connect(store) as conn:
        (uid,) = conn.execute("SELECT uid FROM runs").fetchone()
        kinds = [r[0] for r in conn.execute("SELECT title FROM events WHERE kind = 'skipped'")]
    points = stored_points(store, uid)["v"]
    assert [(s, v) for s, _w, v in points] == [(s, float(s)) for s in range(200) if s != 100]
    assert kinds == ["1 corrupt records not imported (checksum mismatch)"]


def test_a_flipped_bit_in_a_records_length_loses_that_record_only(tmp_path):
    folder = tmp_path / "tb" / "run"
    path = scalars_file(folder)
    data = bytearray(path.read_bytes())
    offsets = records(bytes(data))
    at, _n = offsets[50]
    data[at] ^= 0x40  # the length is now 64 bytes off: its own CRC fails
    path.write_bytes(bytes(data))
    store = tmp_path / "s.db"
    done = reslog("import", "tensorboard", str(tmp_path / "tb"), "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert f"{path}: 1 corrupt record skipped (at byte {at}, " in done.stdout
    with sqlite3.connect(store) as conn:
        (uid,) = conn.execute("SELECT uid FROM runs").fetchone()
    steps = [s for s, _w, _v in stored_points(store, uid)["v"]]
    assert len(steps) == 199 and all(v == s for s, _w, v in stored_points(store, uid)["v"])


def test_the_crc32c_is_tensorflows(tmp_path):
    """The masked CRC32C of the fast path and of the stdlib fallback agree with the frames
    TensorBoard's own writer put in a real file."""
    from reslog.tools.importers import crc
    from reslog.tools.importers.crc import masked_crc32c

    data = scalars_file(tmp_path / "run", 5).read_bytes()
    for pos, n in records(data):
        assert masked_crc32c(data[pos : pos + 8]) == struct.unpack_from("<I", data, pos + 8)[0]
        body = data[pos + 12 : pos + 12 + n]
        stored = struct.unpack_from("<I", data, pos + 12 + n)[0]
        assert masked_crc32c(body) == stored
        crc32 = crc.crc32c_python(body)
        assert (((crc32 >> 15) | (crc32 << 17)) + crc.MASK_DELTA) & 0xFFFFFFFF == stored


def test_a_flipped_bit_in_a_wandb_record_skips_it_and_imports_the_rest(tmp_path):
    """wandb's chunks carry a CRC (zlib's crc32 of type and data) that was not checked: a
    flipped bit in a history row's JSON came in as another value."""
    wandb_dir = write_offline_run(tmp_path)
    path = next(wandb_dir.glob("offline-run-*/run-*.wandb"))
    data = bytearray(path.read_bytes())
    # train/loss at step 3 as its HistoryItem holds it: value_json (field 16, tag 0x82 0x01),
    # 4 bytes long. A bare b"0.25" also matched another row's `_runtime` (0.25...) now and then.
    value = b"\x82\x01\x040.25"
    history = next(  # the history row of step 3 (other records repeat its values)
        r for r in records_of(path) if value in r and any(f == R_HISTORY for f, _w, _v in fields(r))
    )
    at = data.index(history) + history.index(value) + 3
    data[at + 2] ^= 0x01  # "0.25" -> "0.35"
    path.write_bytes(bytes(data))
    store = tmp_path / "s.db"
    done = reslog("import", "wandb", str(wandb_dir), "--store", str(store))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"  {path}: 1 corrupt record skipped (at byte " in done.stdout
    with sqlite3.connect(store) as conn:
        (uid,) = conn.execute("SELECT uid FROM runs").fetchone()
    loss = stored_points(store, uid)["train/loss"]
    assert [(s, v) for s, _w, v in loss] == [(s, 1.0 / (s + 1)) for s in range(6) if s != 3]


# ---- finding 5: names that are not UTF-8 ----------------------------------------------------


def test_a_tensorboard_folder_named_in_latin1_is_imported_under_an_escaped_name(tmp_path):
    logdir = tmp_path / "tb"
    scalars_file(logdir / "plain", 10)  # TensorBoard's writer cannot make such a folder
    (logdir / "plain").rename(logdir / os.fsdecode(b"caf\xe9"))
    store = tmp_path / "s.db"
    done = reslog("import", "tensorboard", str(logdir), "--store", str(store))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "imported 'caf\\\\xe9': 1 keys, 10 points" in done.stdout
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT name FROM runs").fetchall() == [("caf\\xe9",)]
    again = reslog("import", "tensorboard", str(logdir), "--store", str(store))
    assert again.returncode == 0 and "already imported 'caf\\\\xe9'" in again.stdout


def test_a_wandb_folder_named_in_latin1_is_imported(tmp_path):
    (tmp_path / "w").mkdir()
    wandb_dir = write_offline_run(tmp_path / "w")
    odd = tmp_path / os.fsdecode(b"r\xfcns")
    shutil.copytree(wandb_dir, odd)
    store = tmp_path / "s.db"
    done = reslog("import", "wandb", str(odd), "--store", str(store))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "imported 'tiny-gpt'" in done.stdout
    with sqlite3.connect(store) as conn:
        (notes,) = conn.execute("SELECT notes FROM runs").fetchone()
    assert "r\\xfcns" in notes


@pytest.mark.parametrize("kind", ("csv", "parquet"))
def test_a_missing_file_named_in_latin1_is_one_line(tmp_path, kind):
    missing = tmp_path / os.fsdecode(b"x\xff." + kind.encode())
    done = reslog("import", kind, str(missing), "--store", str(tmp_path / "s.db"))
    one_line_error(done, kind, "x\\xff")


# ---- every importer: truncated and random files --------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("damage", ("truncated", "random"))
def test_a_damaged_file_is_one_line_naming_it(tmp_path, kind, damage):
    given, path = sample_input(kind, tmp_path)
    data = path.read_bytes()
    if damage == "random":
        path.write_bytes(os.urandom(len(data)))
    else:
        cut = len(data) // 2
        while data[cut - 1 : cut] == b"\n":  # a CSV cut at a line's end is a shorter CSV
            cut += 1
        path.write_bytes(data[:cut])
    done = reslog("import", kind, str(given), "--store", str(tmp_path / "s.db"))
    if kind == "tensorboard" and damage == "truncated":
        # The newest event file of a folder ending mid-record is a live run's: what is whole
        # comes in and the line says the rest waits for the next import.
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert f"  {path}: its last " in done.stdout and "the next import reads them" in done.stdout
        return
    one_line_error(done, kind, str(path))


# ---- finding 5 and 6: Parquet ----------------------------------------------------------------


@pytest.mark.parametrize(
    "column, values",
    [
        ("value", ["1.5", "x", "2"]),
        ("value", [[1.0], [2.0], [3.0]]),
        ("step", ["a", "b", "c"]),
        ("key", [[1], [2], [3]]),
        ("wall", ["now", "then", "later"]),
    ],
)
def test_parquet_values_of_the_wrong_type_are_one_line_naming_the_column(tmp_path, column, values):
    """A string or list `value` column was a ValueError/TypeError traceback."""
    cols = {"key": ["a", "b", "c"], "step": [1, 2, 3], "value": [0.1, 0.2, 0.3]}
    cols[column] = values
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(cols), path)
    store = tmp_path / "s.db"
    done = reslog("import", "parquet", str(path), "--store", str(store))
    one_line_error(done, "parquet", str(path), f"column {column!r} holds ")
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_parquet_keys_too_long_or_with_nul_are_a_counted_skip(tmp_path):
    """A 5 MB key name and a NUL in one were stored as they came."""
    huge = "k" * 5_000_000
    keys = ["ok"] * 3 + [huge] * 2 + ["a\x00b"]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"key": keys, "step": range(6), "value": [1.0] * 6}), path)
    store = tmp_path / "s.db"
    done = reslog("import", "parquet", str(path), "--store", str(store))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("imported")]
    assert "1 keys, 3 points, not imported: " in line
    assert "2 values under 1 key over 500 characters (such as 'kkkk" in line
    assert "1 value under 1 key holding a NUL character (such as 'a\\\\x00b')" in line
    assert len(done.stdout) < 2000
    with sqlite3.connect(store) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM keys")] == ["ok"]
        (title,) = conn.execute("SELECT title FROM events WHERE kind = 'skipped'").fetchone()
    assert "over 500 characters" in title and "NUL" in title


def long_table(n: int, start: int = 0) -> pa.Table:
    steps = list(range(start, start + n))
    return pa.table(
        {
            "run": ["r"] * n,
            "key": ["loss"] * n,
            "step": steps,
            "wall": [1.7e9 + s for s in steps],
            "value": [1.0 / (s + 1) for s in steps],
        }
    )


def test_a_parquet_file_that_grew_gets_its_new_rows_and_a_rewritten_one_is_refused(tmp_path):
    """A file written again, longer, was 'already imported' by its name: its new rows were
    skipped without a word."""
    path = tmp_path / "t.parquet"
    store = tmp_path / "s.db"
    pq.write_table(long_table(3000), path)
    first = reslog("import", "parquet", str(path), "--store", str(store))
    assert first.returncode == 0 and "imported 'r': 1 keys, 3,000 points" in first.stdout
    same = reslog("import", "parquet", str(path), "--store", str(store))
    assert same.returncode == 0 and "already imported 'r'" in same.stdout
    assert "nothing new" in same.stdout
    pq.write_table(pa.concat_tables([long_table(3000), long_table(1000, 3000)]), path)
    grown = reslog("import", "parquet", str(path), "--store", str(store))
    assert grown.returncode == 0, grown.stderr
    assert "updated 'r': 1,000 new points in 1 keys" in grown.stdout
    with sqlite3.connect(store) as conn:
        (uid,) = conn.execute("SELECT uid FROM runs").fetchone()
    got = stored_points(store, uid)["loss"]
    assert [(s, v) for s, _w, v in got] == [(s, 1.0 / (s + 1)) for s in range(4000)]
    table = long_table(4000)
    values = table.column("value").to_pylist()
    values[10] = 42.0
    pq.write_table(table.set_column(4, "value", pa.array(values)), path)
    rewritten = reslog("import", "parquet", str(path), "--store", str(store))
    one_line_error(rewritten, "parquet", str(path), "rewritten", "--replace")
    assert len(stored_points(store, uid)["loss"]) == 4000  # nothing of it written
    replaced = reslog("import", "parquet", str(path), "--store", str(store), "--replace")
    assert replaced.returncode == 0 and "replaced 'r': 1 keys, 4,000 points" in replaced.stdout
    assert stored_points(store, uid)["loss"][10][2] == 42.0


def test_a_bad_row_late_in_a_streamed_parquet_file_leaves_nothing_of_it(tmp_path):
    """Batches are written as they are read, in one transaction: a row without a step past the
    first batch still leaves the store as it was."""
    n = 200_000
    steps = list(range(n))
    steps[-1] = None
    path = tmp_path / "t.parquet"
    table = pa.table({"key": ["k"] * n, "step": pa.array(steps, pa.int64()), "value": [1.0] * n})
    pq.write_table(table, path, row_group_size=50_000)
    store = tmp_path / "s.db"
    done = reslog("import", "parquet", str(path), "--store", str(store))
    one_line_error(done, "parquet", str(path), f"row {n - 1}: no key or step")
    assert point_count(store) == 0
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_a_parquet_round_trip_records_how_many_rows_it_read(tmp_path):
    path = tmp_path / "t.parquet"
    table = long_table(10)
    values = table.column("value").to_pylist()
    values[3] = None  # a row without a value: counted among the rows, no point
    pq.write_table(table.set_column(4, "value", pa.array(values)), path)
    store = tmp_path / "s.db"
    assert reslog("import", "parquet", str(path), "--store", str(store)).returncode == 0
    with sqlite3.connect(store) as conn:
        (body,) = conn.execute("SELECT body FROM events WHERE kind = 'import'").fetchone()
        assert point_count(store) == 9
    assert json.loads(body)["parquet"]["rows"] == 10


def test_a_parquet_file_with_corrupt_pages_is_one_line_and_writes_nothing(tmp_path):
    """The footer reads, the data does not (bytes flipped in its compressed pages)."""
    n = 200_000
    path = tmp_path / "t.parquet"
    table = pa.table({"key": ["k"] * n, "step": range(n), "value": [0.5] * n})
    pq.write_table(table, path, row_group_size=50_000, compression="snappy")
    data = bytearray(path.read_bytes())
    for i in range(2000, len(data) - 5000, 3000):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    store = tmp_path / "s.db"
    done = reslog("import", "parquet", str(path), "--store", str(store))
    one_line_error(done, "parquet", str(path), "cannot read it past row", "nothing of it imported")
    assert point_count(store) == 0
