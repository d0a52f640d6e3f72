"""Turn raw text files into token shards and a manifest for `trainer.data.ShardLoader`.

    python -m trainer.prepare --input RAW_DIR_OR_FILES... --out DIR
        [--tokenizer tokenizer.json | --vocab-size N] [--text-field content]
        [--valid-fraction 0.01] [--shard-tokens N] [--force]

Output in DIR: ``tokenizer.json``, ``train_00000.bin``..., ``valid_00000.bin``... (raw
little-endian uint16 when the vocabulary fits, else uint32; each document is
``<|bos|> tokens <|eos|>``; a document may continue into the next shard) and ``manifest.json``,
written last, so a directory with a manifest is complete.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from schema.store.user_files import copy_file, replacing, write_file
from trainer.readers import ReadStats, TextReader, find_sources
from trainer.tokenizer import Tokenizer, file_sha256

FORMAT_VERSION = 1
MANIFEST = "manifest.json"  # also trainer.data.MANIFEST (not imported: it pulls in torch)
DEFAULT_VOCAB = 8192
DEFAULT_SHARD_TOKENS = 1 << 24
_ENCODE_BATCH = 512


class ShardWriter:
    """Appends token arrays to ``{split}_{n:05d}.bin`` files of exactly ``shard_tokens`` tokens."""

    def __init__(self, out: Path, split: str, dtype: np.dtype, shard_tokens: int):
        self.out, self.split, self.dtype, self.shard_tokens = out, split, dtype, shard_tokens
        self.shards: list[dict] = []
        self.documents = 0
        self._buf = np.empty(shard_tokens, dtype=dtype)
        self._fill = 0

    def add(self, ids: Sequence[int]) -> None:
        arr = np.asarray(ids, dtype=self.dtype)
        self.documents += 1
        while len(arr):
            n = min(len(arr), self.shard_tokens - self._fill)
            self._buf[self._fill : self._fill + n] = arr[:n]
            self._fill += n
            arr = arr[n:]
            if self._fill == self.shard_tokens:
                self._flush()

    def _flush(self) -> None:
        name = f"{self.split}_{len(self.shards):05d}.bin"
        with replacing(self.out / name, "wb") as f:
            self._buf[: self._fill].astype(self.dtype.newbyteorder("<"), copy=False).tofile(f)
        self.shards.append({"file": name, "tokens": int(self._fill)})
        self._fill = 0

    def close(self) -> dict:
        if self._fill:
            self._flush()
        return {
            "shards": self.shards,
            "tokens": sum(s["tokens"] for s in self.shards),
            "documents": self.documents,
        }


def _texts(sources: list[Path], text_field: str, stats: ReadStats, max_chars: int | None):
    texts: Iterator[str] = TextReader(text_field).read_texts(sources, stats)
    if max_chars is None:
        return texts
    budget = [max_chars]

    def capped() -> Iterator[str]:
        for t in texts:
            if budget[0] <= 0:
                return
            budget[0] -= len(t)
            yield t

    return capped()


def _batched(items: Iterable[str], n: int) -> Iterator[list[str]]:
    it = iter(items)
    while batch := list(itertools.islice(it, n)):
        yield batch


def prepare(
    inputs: Sequence[str | Path],
    out: str | Path,
    *,
    tokenizer: str | Path | None = None,
    vocab_size: int = DEFAULT_VOCAB,
    text_field: str = "content",
    valid_fraction: float = 0.01,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    tokenizer_max_chars: int | None = None,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> dict:
    """Tokenize ``inputs`` into ``out``; returns the manifest (also written to out/manifest.json).

    Document ``i`` (in file order) goes to the validation split when ``i % k == 0`` with
    ``k = round(1 / valid_fraction)``: deterministic, evenly spread, and never empty when there
    are documents at all.
    """
    if not 0 <= valid_fraction <= 0.5:
        raise ValueError(f"--valid-fraction must be in [0, 0.5], got {valid_fraction}")
    if shard_tokens < 1:
        raise ValueError(f"--shard-tokens must be >= 1, got {shard_tokens}")
    out = Path(out)
    # The output folder may sit inside an input folder: never read our own manifest/tokenizer.
    ours = {(out / MANIFEST).resolve(), (out / "tokenizer.json").resolve()}
    sources = [f for f in find_sources(inputs) if f.resolve() not in ours]
    if not sources:
        raise ValueError(f"no input files in {[str(i) for i in inputs]} besides prepare's own")
    if (out.exists() and any(out.glob("*.bin"))) or (out / MANIFEST).exists():
        if not force:
            raise FileExistsError(
                f"{out} already holds prepared shards; pass --force to replace them"
            )
        for f in [*out.glob("*.bin"), *out.glob("*.bin.tmp"), out / MANIFEST]:
            f.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    if tokenizer is not None:
        tok = Tokenizer.load(tokenizer)
        src_tokenizer = Path(tokenizer)
        if src_tokenizer.is_dir():
            src_tokenizer = src_tokenizer / "tokenizer.json"
        if src_tokenizer.resolve() != (out / "tokenizer.json").resolve():
            copy_file(src_tokenizer, out / "tokenizer.json")
        log(f"loaded tokenizer {src_tokenizer} ({tok.n_tokens} tokens)")
        origin = str(src_tokenizer)
    else:
        log(f"training a byte-level BPE tokenizer (vocab {vocab_size}) on {len(sources)} files")
        train_stats = ReadStats()
        tok = Tokenizer.train(
            _texts(sources, text_field, train_stats, tokenizer_max_chars), vocab_size
        )
        tok.save(out / "tokenizer.json")
        took = time.perf_counter() - t0
        log(f"  {tok.n_tokens} tokens (model vocab {tok.vocab_size}) in {took:.1f} s")
        origin = "trained"

    dtype = np.dtype(np.uint16 if tok.vocab_size <= 1 << 16 else np.uint32)
    writers = {s: ShardWriter(out, s, dtype, shard_tokens) for s in ("train", "valid")}
    k = max(2, round(1 / valid_fraction)) if valid_fraction > 0 else 0
    stats = ReadStats()
    doc = 0
    t1 = time.perf_counter()
    for batch in _batched(TextReader(text_field).read_texts(sources, stats), _ENCODE_BATCH):
        for ids in tok.encode_batch(batch):
            split = "valid" if k and doc % k == 0 else "train"
            writers[split].add([tok.bos_id, *ids, tok.eos_id])
            doc += 1
        if doc % (_ENCODE_BATCH * 50) == 0:
            log(f"  {doc} documents tokenized")
    splits = {s: w.close() for s, w in writers.items()}
    log(
        f"tokenized {doc} documents in {time.perf_counter() - t1:.1f} s: "
        + ", ".join(
            f"{s} {v['tokens']:,} tokens in {len(v['shards'])} shards" for s, v in splits.items()
        )
    )
    if stats.bad:
        log("malformed input (skipped): " + stats.summary())
    if splits["train"]["tokens"] == 0:
        # Shards of this failed call would make the next call ask for --force: remove them.
        for v in splits.values():
            for shard in v["shards"]:
                (out / shard["file"]).unlink(missing_ok=True)
        if splits["valid"]["documents"]:
            raise ValueError(
                f"all {doc} documents went to the valid split (document i is validation when "
                f"i % {k} == 0): add documents or pass --valid-fraction 0"
            )
        raise ValueError(
            f"no training text found in {[str(s) for s in sources]}: {stats.summary()}"
        )

    manifest = {
        "format": "trainer-shards",
        "version": FORMAT_VERSION,
        "dtype": dtype.name,
        "vocab_size": tok.vocab_size,
        "tokenizer": {
            "path": "tokenizer.json",
            "sha256": file_sha256(out / "tokenizer.json"),
            "origin": origin,
            "n_tokens": tok.n_tokens,
            "bos_id": tok.bos_id,
            "eos_id": tok.eos_id,
            "pad_id": tok.pad_id,
        },
        "text_field": text_field,
        "valid_fraction": valid_fraction,
        "shard_tokens": shard_tokens,
        "splits": splits,
        "sources": [
            {"path": str(s), "bytes": s.stat().st_size, "sha256_head": _head_hash(s)}
            for s in sources
        ],
        "read_stats": stats.to_dict(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_file(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def _head_hash(path: Path, n: int = 1 << 20) -> str:
    """sha256 of the first MiB: cheap enough for big sources, enough to notice a swapped file."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read(n)).hexdigest()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m trainer.prepare", description=__doc__.split("\n")[0]
    )
    p.add_argument(
        "--input", nargs="+", required=True, help="raw .jsonl/.json/.parquet files or folders"
    )
    p.add_argument("--out", required=True, help="output folder for shards and manifest.json")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--tokenizer", help="use this tokenizer.json instead of training one")
    g.add_argument(
        "--vocab-size",
        type=int,
        default=DEFAULT_VOCAB,
        help="train a tokenizer of this size (rounded up to a multiple of 64)",
    )
    p.add_argument("--text-field", default="content", help="record field holding the text")
    p.add_argument("--valid-fraction", type=float, default=0.01)
    p.add_argument("--shard-tokens", type=int, default=DEFAULT_SHARD_TOKENS)
    p.add_argument(
        "--tokenizer-max-chars",
        type=int,
        help="train the tokenizer on at most this many characters",
    )
    p.add_argument("--force", action="store_true", help="replace shards already in --out")
    args = p.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    try:
        prepare(
            args.input,
            args.out,
            tokenizer=args.tokenizer,
            vocab_size=args.vocab_size,
            text_field=args.text_field,
            valid_fraction=args.valid_fraction,
            shard_tokens=args.shard_tokens,
            tokenizer_max_chars=args.tokenizer_max_chars,
            force=args.force,
        )
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"prepare: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {Path(args.out) / MANIFEST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
