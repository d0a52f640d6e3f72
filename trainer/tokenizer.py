"""Byte-level BPE tokenizer (HuggingFace `tokenizers`) with explicitly managed special tokens.

The special tokens ``<|bos|>``, ``<|eos|>``, ``<|pad|>`` take ids 0, 1, 2. `encode` never parses
them out of user text: a document that contains the string ``"<|eos|>"`` is encoded as ordinary
bytes, so training data cannot inject a document boundary. Only code that asks for `bos_id` /
`eos_id` puts them in a sequence.

`vocab_size` is the size the model's embedding should have: the trained vocabulary rounded up to
a multiple of 64 (the padding ids are never produced by `encode` and decode to nothing).

The saved ``tokenizer.json`` is a plain `tokenizers` file, loadable by
``tokenizers.Tokenizer.from_file`` and by
``transformers.PreTrainedTokenizerFast(tokenizer_file=...)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Regex, decoders, models, pre_tokenizers, trainers
from tokenizers import Tokenizer as _HFTokenizer

from schema.store.user_files import replacing_path

BOS = "<|bos|>"
EOS = "<|eos|>"
PAD = "<|pad|>"
SPECIAL_TOKENS = (BOS, EOS, PAD)
VOCAB_MULTIPLE = 64

# The GPT-4 split pattern: words with their leading space, digits in groups of at most three,
# punctuation runs, newlines kept apart from indentation (which matters for code).
SPLIT_PATTERN = (
    r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*"
    r"|\s*[\r\n]|\s+(?!\S)|\s+"
)
_MIN_VOCAB = 256 + len(SPECIAL_TOKENS)


def round_vocab(n: int) -> int:
    """``n`` rounded up to a multiple of 64."""
    return -(-n // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def _new_hf_tokenizer() -> _HFTokenizer:
    tok = _HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


class Tokenizer:
    """Byte-level BPE with ``<|bos|>``, ``<|eos|>``, ``<|pad|>``; see the module docstring."""

    def __init__(self, hf: _HFTokenizer):
        ids = [hf.token_to_id(t) for t in SPECIAL_TOKENS]
        missing = [t for t, i in zip(SPECIAL_TOKENS, ids, strict=True) if i is None]
        if missing:
            raise ValueError(
                f"tokenizer has no special token(s) {missing}; train it with Tokenizer.train"
            )
        # Not stored in tokenizer.json, so it is set on every construction: special-token strings
        # in input text are encoded as plain text.
        hf.encode_special_tokens = True
        self._hf = hf
        self.bos_id, self.eos_id, self.pad_id = ids

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2) -> Tokenizer:
        """Train on ``texts`` (streamed once) for at most ``round_vocab(vocab_size)`` tokens."""
        target = round_vocab(vocab_size)
        if target < _MIN_VOCAB:
            raise ValueError(f"vocab_size must be at least {_MIN_VOCAB} (256 bytes + 3 specials)")
        hf = _new_hf_tokenizer()
        trainer = trainers.BpeTrainer(
            vocab_size=target,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        hf.train_from_iterator(texts, trainer)
        return cls(hf)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer file at {path}")
        return cls(_HFTokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> Path:
        """Write ``tokenizer.json`` (``path`` may be a directory) atomically; returns the file."""
        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing_path(path) as tmp:
            self._hf.save(str(tmp))
        return path

    @property
    def vocab_size(self) -> int:
        """Embedding size for a model: the real vocabulary rounded up to a multiple of 64."""
        return round_vocab(self._hf.get_vocab_size())

    @property
    def n_tokens(self) -> int:
        """Number of real tokens (ids ``0 .. n_tokens-1``); ids above are padding."""
        return self._hf.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token strings inside it are plain text."""
        return self._hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """`encode` for many texts at once (parallel in Rust)."""
        return [e.ids for e in self._hf.encode_batch(list(texts), add_special_tokens=False)]

    def encode_document(self, text: str) -> list[int]:
        """``[bos] + encode(text) + [eos]``: how documents are laid out in training shards."""
        return [self.bos_id, *self.encode(text), self.eos_id]

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``ids``; special tokens appear as their strings unless skipped."""
        return self._hf.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def id_to_token(self, i: int) -> str | None:
        return self._hf.id_to_token(i)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
