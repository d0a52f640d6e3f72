"""Secrets kept out of the store: config values under secret-looking keys, and the passwords of
URLs in any text (a store URL in a config, a command line, an error message).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Config keys whose values are never stored: matched on the words of the key (split on _ - . and
# camelCase) so that LM settings like batch_tokens, tokenizer or max_token_len stay visible.
SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "secrets",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "apikey",
        "credential",
    }
)
SECRET_WORDS |= {"credentials", "auth"}
SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")})
# "pad_token": "<pad>" and friends are tokenizer settings, not credentials.
# Words that make "<word>_token" a count or a vocabulary entry, not a credential.
NOT_SECRET_BEFORE_TOKEN = frozenset(
    {"pad", "bos", "eos", "unk", "sep", "cls", "mask", "special", "per", "max", "min", "num", "n"}
)
# "<service>_key" is a credential (wandb_key, openai_key, ssh_key) unless the word before says
# it is a lookup key of some kind.
NOT_SECRET_BEFORE_KEY = frozenset(
    {"sort", "primary", "foreign", "group", "cache", "rng", "prng", "seed", "dict", "hash",
     "partition", "shard", "index", "lookup", "metric", "monitor", "sample", "data", "input",
     "label", "target", "text", "query", "value", "attention", "attn", "sequence", "image"}
)  # fmt: skip
REDACTED = "<redacted>"
# The password in a URL's userinfo: postgresql://user:secret@host/db → user:<redacted>@host.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):(?P<pw>[^/\s@]+)@")


def redact_text(text: str) -> str:
    """`text` with the passwords of any URLs in it replaced."""
    if "://" not in text:
        return text

    def hide(m: re.Match) -> str:
        if m.group("pw") in ("***", REDACTED):  # already hidden (SQLAlchemy writes ***)
            return m.group(0)
        return f"{m.group('head')}:{REDACTED}@"

    return _URL_PASSWORD.sub(hide, text)


def _words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_key(key: str) -> bool:
    words = _words(key)
    if not words:
        return False
    last = words[-1]
    if last == "token" and len(words) > 1 and words[-2] in NOT_SECRET_BEFORE_TOKEN:
        return False
    if last in SECRET_WORDS or "secret" in words or "password" in words:
        return True
    if last == "key" and len(words) > 1 and words[-2] not in NOT_SECRET_BEFORE_KEY:
        return True
    return len(words) > 1 and (words[-2], last) in SECRET_PAIRS


def redact(config: Any, *, inside_secret: bool = False) -> Any:
    """A copy of `config` with the values under secret-looking keys replaced, at any depth."""
    if isinstance(config, Mapping):
        out = {}
        for key, value in config.items():
            secret = inside_secret or is_secret_key(str(key))
            if isinstance(value, (Mapping, list, tuple)):
                out[str(key)] = redact(value, inside_secret=secret)
            elif secret and value is not None:
                out[str(key)] = REDACTED
            else:
                out[str(key)] = redact_text(value) if isinstance(value, str) else value
        return out
    if isinstance(config, (list, tuple)):
        return [redact(v, inside_secret=inside_secret) for v in config]
    if inside_secret and config is not None:
        return REDACTED
    return redact_text(config) if isinstance(config, str) else config
