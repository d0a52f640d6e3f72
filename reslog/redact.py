"""Secrets kept out of the store: config values under secret-looking keys, and credentials in
any text (a config value, a command line, a logged string, an event, a traceback): URL
passwords, `Authorization: Bearer/Basic …`, `token=`/`key=`-like parameters, and tokens of
well-known shapes (GitHub, Hugging Face, OpenAI, Slack, AWS access key ids).
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
        "pat",  # a personal access token: github_pat, hf_pat
        "signature",  # X-Amz-Signature, a presigned URL's
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
_SECRETS = re.compile(
    # Authorization: Bearer <token> / Basic <base64>
    r"(?P<scheme>\b(?i:bearer|basic)\s+)(?P<cred>[A-Za-z0-9._~+/=-]{8,})"
    # name=value in a query string or a line of text; the name decides (is_secret_key)
    r"|(?P<name>(?:(?<=[?&;\s,(\[{\"'])|^)[A-Za-z][A-Za-z0-9_.-]*)=(?P<value>[^&\s#\"',;)\]}]+)"
    # tokens whose shape says what they are
    r"|(?P<shaped>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|hf_[A-Za-z0-9]{30,}"
    r"|sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b)"
)
_HINTS = ("://", "=", "earer", "asic", "gh", "hf_", "sk-", "xox", "AKIA")


def redact_text(text: str) -> str:
    """`text` with the credentials in it replaced (see the module's docstring)."""
    if not any(h in text for h in _HINTS):  # the usual text: no regex at all
        return text
    if "://" in text:
        text = _URL_PASSWORD.sub(_hide_password, text)
    return _SECRETS.sub(_hide_secret, text)


def _hide_password(m: re.Match) -> str:
    if m.group("pw") in ("***", REDACTED):  # already hidden (SQLAlchemy writes ***)
        return m.group(0)
    return f"{m.group('head')}:{REDACTED}@"


def _hide_secret(m: re.Match) -> str:
    if m.group("cred") is not None:
        return m.group("scheme") + REDACTED
    if m.group("name") is not None:
        name = m.group("name")
        # In a query string a bare key= or sig= is an API key or a signature (?key=AIza…).
        in_query = m.start() > 0 and m.string[m.start() - 1] in "?&"
        secret = is_secret_key(name) or (in_query and _words(name)[-1:] in (["key"], ["sig"]))
        if not secret or m.group("value") == REDACTED:
            return m.group(0)
        return f"{name}={REDACTED}"
    return REDACTED


def is_secret_flag(flag: str) -> bool:
    """A command-line option whose value is a secret: any secret-looking name, and `-p`,
    `--key`, `--pat` (mysql -p, tools' --key), which alone say nothing as config keys."""
    name = flag.lstrip("-")
    return name in ("p", "key", "pat") or is_secret_key(name)


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
