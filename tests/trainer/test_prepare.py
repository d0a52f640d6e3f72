"""prepare: raw files -> tokenizer, token shards, manifest; and the stdlib demo corpus."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trainer.corpus import build_corpus
from trainer.data import ShardLoader
from trainer.parts import Batches
from trainer.prepare import prepare
from trainer.tokenizer import EOS, Tokenizer, file_sha256


def doc(i: int) -> str:
    return (
        f"# document {i}\n"
        f"def function_{i}(x):\n    return x * {i} + {i % 7}  # ünïcode ✓ {EOS} is text\n"
    )


@pytest.fixture
def raw(tmp_path):
    d = tmp_path / "raw"
    (d / "nested").mkdir(parents=True)
    lines = [json.dumps({"id": i, "content": doc(i)}) for i in range(30)]
    lines.insert(5, "{broken json")  # line 6
    (d / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (d / "nested" / "b.json").write_text(
        json.dumps([{"id": i, "content": doc(i)} for i in range(30, 40)])
    )
    pq.write_table(
        pa.table({"content": [doc(i) for i in range(40, 50)]}), d / "c.parquet", row_group_size=3
    )
    return d


def read_split(out, manifest, split):
    dtype = np.dtype(manifest["dtype"])
    return np.concatenate(
        [np.fromfile(out / s["file"], dtype=dtype) for s in manifest["splits"][split]["shards"]]
    )


def documents(tokens: np.ndarray, tok: Tokenizer) -> list[str]:
    """Split a shard stream at BOS ... EOS and decode each document."""
    docs, current = [], None
    for t in tokens.tolist():
        if t == tok.bos_id:
            assert current is None
            current = []
        elif t == tok.eos_id:
            docs.append(tok.decode(current))
            current = None
        else:
            current.append(t)
    assert current is None
    return docs


def test_prepare_writes_shards_that_decode_back_to_the_text(raw, tmp_path):
    out = tmp_path / "prepared"
    manifest = prepare([raw], out, vocab_size=500, valid_fraction=0.1, shard_tokens=300, log=str)

    on_disk = json.loads((out / "manifest.json").read_text())
    assert on_disk == manifest
    assert manifest["dtype"] == "uint16"
    assert manifest["vocab_size"] % 64 == 0
    tok = Tokenizer.load(out / "tokenizer.json")
    assert manifest["vocab_size"] == tok.vocab_size
    assert manifest["tokenizer"]["sha256"] == file_sha256(out / "tokenizer.json")
    assert (manifest["tokenizer"]["bos_id"], manifest["tokenizer"]["eos_id"]) == (
        tok.bos_id,
        tok.eos_id,
    )

    train = manifest["splits"]["train"]
    assert [s["file"] for s in train["shards"]] == [
        f"train_{i:05d}.bin" for i in range(len(train["shards"]))
    ]
    assert len(train["shards"]) > 1
    assert all(s["tokens"] == 300 for s in train["shards"][:-1])
    for s in train["shards"]:
        assert (out / s["file"]).stat().st_size == 2 * s["tokens"]
    assert train["tokens"] == sum(s["tokens"] for s in train["shards"])

    # Documents 0, 10, 20, ... (in file order: a.jsonl, c.parquet, nested/b.json) are validation.
    order = [*range(30), *range(40, 50), *range(30, 40)]
    valid_docs = documents(read_split(out, manifest, "valid"), tok)
    train_docs = documents(read_split(out, manifest, "train"), tok)
    assert valid_docs == [doc(order[i]) for i in range(0, 50, 10)]
    assert train_docs == [doc(order[i]) for i in range(50) if i % 10]
    assert (manifest["splits"]["valid"]["documents"], train["documents"]) == (5, 45)

    stats = manifest["read_stats"]
    assert stats["records"] == 50 and stats["bad"] == 1
    assert stats["problems"][0].startswith(f"{raw / 'a.jsonl'}:6: bad JSON")
    assert [s["path"] for s in manifest["sources"]] == [
        str(raw / "a.jsonl"),
        str(raw / "c.parquet"),
        str(raw / "nested" / "b.json"),
    ]

    # The loader reads exactly what prepare wrote.
    with ShardLoader(out, Batches(2, 16), shuffle=False) as loader:
        x, y = next(loader)
    stream = read_split(out, manifest, "train")
    assert x[0].tolist() == stream[:16].tolist() and y[0].tolist() == stream[1:17].tolist()


def test_prepare_with_an_existing_tokenizer_and_refusing_to_overwrite(raw, tmp_path):
    first = tmp_path / "first"
    prepare([raw], first, vocab_size=400, log=str)
    second = tmp_path / "second"
    m = prepare([raw / "a.jsonl"], second, tokenizer=first / "tokenizer.json", log=str)
    assert m["tokenizer"]["sha256"] == file_sha256(first / "tokenizer.json")
    assert (second / "tokenizer.json").read_bytes() == (first / "tokenizer.json").read_bytes()
    assert m["splits"]["train"]["documents"] + m["splits"]["valid"]["documents"] == 30

    with pytest.raises(FileExistsError, match="--force"):
        prepare([raw], second, tokenizer=first / "tokenizer.json", log=str)
    again = prepare([raw], second, tokenizer=first, force=True, log=str)
    assert again["splits"]["train"]["documents"] == 49  # 1 of 50 is validation (k = 100)


def test_prepare_without_any_text_is_an_error(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "x.jsonl").write_text('{"title": "no content"}\n')
    with pytest.raises(ValueError, match="no training text"):
        prepare([tmp_path / "raw"], tmp_path / "out", vocab_size=300, log=str)


@pytest.mark.slow
def test_prepare_uses_uint32_for_a_large_vocabulary(raw, tmp_path):
    # A real 70k-token vocabulary would need a big corpus; extend a trained one instead.
    small = tmp_path / "small"
    prepare([raw], small, vocab_size=300, log=str)
    data = json.loads((small / "tokenizer.json").read_text())
    vocab = data["model"]["vocab"]
    for i in range(70_000):
        vocab[f"zz{i}"] = len(vocab)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(data))
    m = prepare([raw], tmp_path / "out", tokenizer=big, log=str)
    assert m["dtype"] == "uint32" and m["vocab_size"] > 1 << 16
    tokens = read_split(tmp_path / "out", m, "train")
    assert documents(tokens, Tokenizer.load(big))[0] == doc(1)


@pytest.mark.integration
def test_cli_reports_errors_without_a_traceback(raw, tmp_path):
    cmd = [sys.executable, "-m", "trainer.prepare", "--input", str(raw), "--out", str(tmp_path)]
    ok = subprocess.run([*cmd, "--vocab-size", "320"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "manifest.json").is_file()
    again = subprocess.run(cmd, capture_output=True, text=True)
    assert again.returncode == 2
    assert "prepare: error:" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.mark.slow
def test_stdlib_corpus_is_deterministic_and_capped(tmp_path):
    a = build_corpus(tmp_path / "a.jsonl", max_bytes=300_000)
    b = build_corpus(tmp_path / "b.jsonl", max_bytes=300_000)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert a.documents == b.documents > 3
    assert a.bytes <= 300_000
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").open(encoding="utf-8")]
    assert set(records[0]) == {"id", "data_src", "category", "title", "content"}
    assert all(r["title"].endswith(".py") and r["content"] for r in records)
    assert len({r["id"] for r in records}) == len(records)
    assert not any("/test/" in f"/{r['title']}" for r in records)


def test_output_folder_inside_the_input_folder_is_not_read(raw):
    first = prepare([raw], raw / "prepared", vocab_size=300, log=str)
    again = prepare([raw], raw / "prepared", vocab_size=300, force=True, log=str)
    assert [s["path"] for s in again["sources"]] == [s["path"] for s in first["sources"]]
    assert again["read_stats"]["bad"] == 1  # only the broken jsonl line, not manifest.json


def test_a_corpus_too_small_for_both_splits_says_so(tmp_path):
    # One document: the split rule (document 0 goes to validation) leaves train empty, and the
    # error must say that instead of claiming there is no text.
    (tmp_path / "one.jsonl").write_text(json.dumps({"content": doc(0)}) + "\n")
    with pytest.raises(ValueError, match=r"all 1 documents went to the valid split"):
        prepare([tmp_path / "one.jsonl"], tmp_path / "out", vocab_size=300, log=str)
    again = prepare(
        [tmp_path / "one.jsonl"], tmp_path / "out", vocab_size=300, valid_fraction=0, log=str
    )
    assert again["splits"]["train"]["documents"] == 1
