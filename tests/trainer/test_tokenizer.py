"""Byte-level BPE: round trips, special-token safety, vocabulary rounding, save/load."""

from __future__ import annotations

import inspect
import json

import pytest
import tokenizers

import trainer.readers
from trainer.tokenizer import BOS, EOS, PAD, Tokenizer, round_vocab

SAMPLES = [
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "Ünïcödé: naïve café, 中文字符, русский текст, العربية, emoji 🎉👩‍👩‍👧",
    "zero\u200bwidth and combining e\u0301 and BOM \ufeff",
    "whitespace:\t\ttabs,  two spaces,   three,\r\nCRLF, trailing   \n\n\n  leading",
    "def f(x: int) -> int:\n    if x > 0:\n        return x ** 2  # square\n    return -x\n",
    "numbers 0 1 12 123 1234 12345 3.14159 -2e10 0xFF",
    "",
    " ",
    "\x00\x01 control chars \x7f",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    # Real text: this repository's own reader module plus the samples, a few times over.
    code = inspect.getsource(trainer.readers)
    return Tokenizer.train([code, *SAMPLES] * 3, vocab_size=600)


def test_vocab_size_is_rounded_up_to_a_multiple_of_64(tok):
    assert tok.vocab_size % 64 == 0
    assert tok.n_tokens <= tok.vocab_size < tok.n_tokens + 64
    assert tok.vocab_size <= round_vocab(600) == 640
    assert round_vocab(64) == 64 and round_vocab(65) == 128


def test_round_trip(tok):
    for text in SAMPLES:
        assert tok.decode(tok.encode(text)) == text
    code = inspect.getsource(trainer.readers)
    ids = tok.encode(code)
    assert tok.decode(ids) == code
    assert len(ids) < len(code.encode("utf-8")) / 2  # BPE learned real merges on code


def test_unseen_bytes_still_round_trip(tok):
    text = "𝔘𝔫𝔰𝔢𝔢𝔫 glyphs ⟨⟩ ∮ and \U0010ffff"
    assert tok.decode(tok.encode(text)) == text


@pytest.mark.parametrize("special", [BOS, EOS, PAD])
def test_special_token_strings_in_text_are_plain_text(tok, special):
    special_ids = {tok.bos_id, tok.eos_id, tok.pad_id}
    text = f"before {special} after{special}{special}"
    ids = tok.encode(text)
    assert not special_ids & set(ids)
    assert tok.decode(ids) == text
    assert not special_ids & {i for row in tok.encode_batch([text, special]) for i in row}


def test_special_ids_are_distinct_and_documents_are_framed(tok):
    assert len({tok.bos_id, tok.eos_id, tok.pad_id}) == 3
    ids = tok.encode_document("x = 1")
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids) == f"{BOS}x = 1{EOS}"
    assert tok.decode(ids, skip_special_tokens=True) == "x = 1"


def test_small_corpus_vocab_is_padded_and_padding_ids_decode_to_nothing():
    # Too little text for 1024 tokens: training stops early; vocab_size pads to a multiple of 64.
    small = Tokenizer.train(["abc abd abe"] * 5, vocab_size=1000)
    assert small.n_tokens < 320 and small.n_tokens % 64 != 0
    assert small.vocab_size == round_vocab(small.n_tokens)
    pad_id = small.vocab_size - 1
    assert small.id_to_token(pad_id) is None
    assert small.decode([*small.encode("abc"), pad_id]) == "abc"


def test_save_load_is_a_plain_tokenizers_file(tok, tmp_path):
    path = tok.save(tmp_path / "tokenizer.json")
    assert path.name == "tokenizer.json"
    loaded = Tokenizer.load(path)
    assert Tokenizer.load(tmp_path).n_tokens == tok.n_tokens  # a folder works too
    for text in [*SAMPLES, f"safe {EOS}"]:
        assert loaded.encode(text) == tok.encode(text)
    assert (loaded.bos_id, loaded.eos_id, loaded.pad_id) == (tok.bos_id, tok.eos_id, tok.pad_id)
    assert loaded.vocab_size == tok.vocab_size

    # What other tools (transformers.PreTrainedTokenizerFast) read: the raw tokenizers file.
    raw = tokenizers.Tokenizer.from_file(str(path))
    assert raw.get_vocab_size() == tok.n_tokens
    assert raw.decode(raw.encode(SAMPLES[3]).ids) == SAMPLES[3]
    added = {t["content"]: t for t in json.loads(path.read_text())["added_tokens"]}
    assert all(added[s]["special"] for s in (BOS, EOS, PAD))


def test_loading_a_tokenizer_without_our_special_tokens_is_refused(tmp_path):
    raw = tokenizers.Tokenizer(tokenizers.models.BPE())
    raw.save(str(tmp_path / "plain.json"))
    with pytest.raises(ValueError, match="no special token"):
        Tokenizer.load(tmp_path / "plain.json")
    with pytest.raises(FileNotFoundError):
        Tokenizer.load(tmp_path / "missing.json")


def test_too_small_vocab_is_an_error():
    with pytest.raises(ValueError, match="at least"):
        Tokenizer.train(["abc"], vocab_size=100)


def test_training_is_deterministic():
    texts = [inspect.getsource(trainer.readers)] * 2
    a, b = Tokenizer.train(texts, vocab_size=400), Tokenizer.train(texts, vocab_size=400)
    assert a.encode(texts[0]) == b.encode(texts[0])
