"""Streaming readers on real small files of each format, including malformed input."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainer.parts import RankPart
from trainer.readers import (
    ReadStats,
    TextReader,
    find_sources,
    iter_json_array,
)

_DEFAULT = object()


def record(i: int, content: object = _DEFAULT) -> dict:
    return {
        "id": f"doc-{i}",
        "data_src": "test",
        "category": "misc",
        "title": f"title {i}",
        "content": f"text number {i} — ünïcode ✓" if content is _DEFAULT else content,
    }


def test_jsonl_reads_good_lines_and_reports_bad_ones_with_line_numbers(tmp_path):
    path = tmp_path / "a.jsonl"
    lines = [
        json.dumps(record(0)),
        '{"id": "broken", "content": "no closing brace"',  # line 2: bad JSON
        json.dumps({"id": "x", "title": "no content"}),  # line 3: missing field
        json.dumps(record(3, content=42)),  # line 4: non-string text
        "",  # blank lines are skipped silently
        json.dumps(record(5)),  # line 6
        "[1, 2]",  # line 7: not an object
        json.dumps(record(7, content="")),  # line 8: empty text, skipped
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.open("ab").write(b'{"content": "\xff\xfe bad utf-8"}\n')  # line 9

    stats = ReadStats()
    texts = list(TextReader().read_file(path, stats))

    assert texts == [record(0)["content"], record(5)["content"]]
    assert (stats.records, stats.bad, stats.empty, stats.files) == (2, 5, 1, 1)
    where = [(p.path, p.line) for p in stats.problems]
    assert where == [(str(path), n) for n in (2, 3, 4, 7, 9)]
    assert "bad JSON" in stats.problems[0].message
    assert "missing text field 'content'" in stats.problems[1].message
    assert "is int, expected string" in stats.problems[2].message
    assert "invalid UTF-8" in stats.problems[4].message
    assert str(stats.problems[0]).startswith(f"{path}:2: ")


def test_problem_list_is_capped_but_every_problem_is_counted(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("not json\n" * 50, encoding="utf-8")
    stats = ReadStats(max_problems=5)
    assert list(TextReader().read_file(path, stats)) == []
    assert stats.bad == 50 and len(stats.problems) == 5
    assert "and 45 more" in stats.summary()


def test_configurable_text_field(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"text": "hello", "content": "other"}) + "\n", encoding="utf-8")
    assert list(TextReader("text").read_file(path)) == ["hello"]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_json_array_streamed_in_small_chunks_equals_json_load(tmp_path, chunk):
    records = [record(i) for i in range(40)]
    records[7]["content"] = 'quotes " and \\ backslash \\u0041 and "<|eos|>"'
    records[9]["content"] = "emoji 🎉 and 中文 and a number 1234567890.5e-3"
    records[11]["nested"] = {"a": [1, 2, {"b": None}], "c": -1e-7}
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=1, ensure_ascii=False), encoding="utf-8")

    stats = ReadStats()
    elements = [obj for _, obj in iter_json_array(path, stats, chunk_chars=chunk)]

    with open(path, encoding="utf-8") as f:
        assert elements == json.load(f)
    assert stats.bad == 0
    texts = list(TextReader(chunk_chars=chunk).read_file(path))
    assert texts == [r["content"] for r in records]


def test_json_array_reports_element_lines(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("[\n" + ",\n".join(json.dumps(record(i)) for i in range(3)) + "\n]")
    assert [line for line, _ in iter_json_array(path, chunk_chars=5)] == [2, 3, 4]


def test_truncated_json_array_keeps_complete_records(tmp_path):
    records = [record(i) for i in range(10)]
    full = json.dumps(records, indent=2)
    cut = full.index('"doc-7"') + 3  # in the middle of the 8th record
    path = tmp_path / "cut.json"
    path.write_text(full[:cut], encoding="utf-8")

    for chunk in (3, 50, 1 << 16):
        stats = ReadStats()
        texts = list(TextReader(chunk_chars=chunk).read_file(path, stats))
        assert texts == [r["content"] for r in records[:7]]
        assert stats.bad == 1
        assert "truncated JSON array" in stats.problems[0].message
        assert stats.problems[0].line == full[:cut].count("\n") + 1


def test_json_array_missing_closing_bracket(tmp_path):
    path = tmp_path / "open.json"
    path.write_text(json.dumps([record(0), record(1)])[:-1] + "\n")
    stats = ReadStats()
    assert len(list(TextReader().read_file(path, stats))) == 2
    assert stats.bad == 1 and "missing ']'" in stats.problems[0].message


def test_json_array_skips_a_malformed_element_and_reads_the_rest(tmp_path):
    good = [json.dumps(record(i)) for i in range(4)]
    bad = '{"id": "bad", "content": oops}'
    path = tmp_path / "mid.json"
    path.write_text("[\n" + ",\n".join([good[0], good[1], bad, good[2], good[3]]) + "\n]\n")
    for chunk in (4, 1 << 16):
        stats = ReadStats()
        texts = list(TextReader(chunk_chars=chunk).read_file(path, stats))
        assert texts == [record(i)["content"] for i in range(4)]
        assert stats.bad == 1
        assert stats.problems[0].line == 4
        assert "bad JSON element" in stats.problems[0].message


def test_json_records_with_bad_fields_are_counted(tmp_path):
    path = tmp_path / "fields.json"
    path.write_text(json.dumps([record(0), {"id": 1}, record(2, content=None), "str", record(4)]))
    stats = ReadStats()
    assert list(TextReader().read_file(path, stats)) == [record(0)["content"], record(4)["content"]]
    assert stats.bad == 3


def test_json_file_that_is_not_an_array(tmp_path):
    path = tmp_path / "obj.json"
    path.write_text(json.dumps(record(0)))
    stats = ReadStats()
    assert list(TextReader().read_file(path, stats)) == []
    assert stats.bad == 1 and "not a JSON array" in stats.problems[0].message


def write_parquet(path, n_groups: int, rows_per_group: int, bad_row: int | None = None):
    texts = []
    with pq.ParquetWriter(path, pa.schema([("id", pa.string()), ("content", pa.string())])) as w:
        for g in range(n_groups):
            ids = [f"{g}-{i}" for i in range(rows_per_group)]
            content = [f"group {g} row {i}" for i in range(rows_per_group)]
            if bad_row is not None and g * rows_per_group <= bad_row < (g + 1) * rows_per_group:
                content[bad_row - g * rows_per_group] = None
            texts.append(content)
            w.write_table(pa.table({"id": ids, "content": content}))
    return texts


def test_parquet_strided_by_rank_gives_disjoint_row_groups_covering_all_rows(tmp_path):
    path = tmp_path / "a.parquet"
    groups = write_parquet(path, n_groups=7, rows_per_group=5)
    assert pq.ParquetFile(path).metadata.num_row_groups == 7
    world = 3
    per_rank = [list(TextReader(part=RankPart(r, world)).read_file(path)) for r in range(world)]
    for r in range(world):
        assert per_rank[r] == [t for g in range(r, 7, world) for t in groups[g]]
    everything = [t for texts in per_rank for t in texts]
    assert len(everything) == len(set(everything)) == 35
    assert set(everything) == {t for g in groups for t in g}


def test_parquet_null_text_and_missing_column_are_reported(tmp_path):
    path = tmp_path / "nulls.parquet"
    write_parquet(path, n_groups=2, rows_per_group=4, bad_row=5)
    stats = ReadStats()
    assert len(list(TextReader().read_file(path, stats))) == 7
    assert stats.bad == 1 and stats.problems[0].line == 6 and "null" in stats.problems[0].message

    stats = ReadStats()
    assert list(TextReader("body").read_file(path, stats)) == []
    assert "missing text column 'body'" in stats.problems[0].message

    other = tmp_path / "ints.parquet"
    pq.write_table(pa.table({"content": [1, 2]}), other)
    stats = ReadStats()
    assert list(TextReader().read_file(other, stats)) == []
    assert "expected string" in stats.problems[0].message


def test_garbage_parquet_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "junk.parquet"
    path.write_bytes(b"this is not parquet at all")
    stats = ReadStats()
    assert list(TextReader().read_file(path, stats)) == []
    assert stats.bad == 1 and "not a readable parquet file" in stats.problems[0].message


def test_find_sources_and_read_texts_over_a_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.jsonl").write_text(json.dumps(record(1)) + "\n")
    (tmp_path / "sub" / "a.json").write_text(json.dumps([record(2)]))
    write_parquet(tmp_path / "c.parquet", 1, 2)
    (tmp_path / "notes.txt").write_text("ignored")

    sources = find_sources([tmp_path])
    assert [p.name for p in sources] == ["b.jsonl", "c.parquet", "a.json"]
    stats = ReadStats()
    texts = list(TextReader().read_texts(sources, stats))
    assert texts == [record(1)["content"], "group 0 row 0", "group 0 row 1", record(2)["content"]]
    assert stats.files == 3 and stats.records == 4

    with pytest.raises(ValueError, match="unsupported file type"):
        find_sources([tmp_path / "notes.txt"])
    with pytest.raises(FileNotFoundError):
        find_sources([tmp_path / "nope.jsonl"])


def test_jsonl_strided_by_rank(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(record(i)) + "\n" for i in range(10)))
    parts = [list(TextReader(part=RankPart(r, 3)).read_file(path)) for r in range(3)]
    assert parts[1] == [record(i)["content"] for i in (1, 4, 7)]
    assert sorted(t for p in parts for t in p) == sorted(record(i)["content"] for i in range(10))
