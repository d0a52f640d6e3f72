"""Secrets kept out of the store: config values under secret-looking keys, and credentials in
any text (a config value, a command line, a logged string, an event, a traceback, a stall's
stack with its source lines). By rule, not by example (docs/reslog.md has the table):

- a key or a name that looks secret (`is_secret_key`: token, password, ssh_pass, creds, cookie,
  session_id, bearer, ...), as a config key, an option (`--token X`, also inside a list), or in
  text as an assignment (`token=X`, `token = "X"`, `"api_key": "X"`, `password: str = 'X'`);
- `Bearer`/`Basic` credentials anywhere; secret-looking header arguments
  (`Authorization:X`, `X-Api-Key: X`, `Cookie: X`);
- the password of a URL, and the path of a webhook URL (Slack, Discord, any `/hooks/`);
- tokens whose shape says what they are (GitHub, Hugging Face, OpenAI, Slack, AWS key ids).
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
# Issue 36's campaign: ssh_pass, creds, bearer, cookie, session_id were stored as they were.
SECRET_WORDS |= {
    "creds",
    "cred",
    "bearer",
    "cookie",
    "cookies",
    "authorization",
    "sessionid",
    "jwt",
    "webhook",
}
SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("private", "key"),
        ("secret", "key"),
        ("session", "id"),
        ("auth", "header"),
        ("session", "key"),
    }
)
# "<word>_pass" is a password (ssh_pass, db_pass, smtp_pass) unless it names a pass over data.
NOT_SECRET_BEFORE_PASS = frozenset(
    {
        "forward",
        "backward",
        "fwd",
        "bwd",
        "first",
        "second",
        "third",
        "last",
        "single",
        "multi",
        "two",
        "one",
        "full",
        "eval",
        "train",
        "training",
        "data",
        "num",
        "n",
        "per",
        "by",
        "render",
        "post",
        "pre",
        "extra",
        "final",
    }
)
# "pad_token": "<pad>" and friends are tokenizer settings, not credentials.
# Words that make "<word>_token" a count or a vocabulary entry, not a credential.
NOT_SECRET_BEFORE_TOKEN = frozenset(
    {"pad", "bos", "eos", "unk", "sep", "cls", "mask", "special", "per", "max", "min", "num", "n"}
)
# "<service>_key" is a credential (wandb_key, openai_key, ssh_key) unless the word before says
# it is a lookup key of some kind.
NOT_SECRET_BEFORE_KEY = frozenset(
    {
        "sort",
        "primary",
        "foreign",
        "group",
        "cache",
        "rng",
        "prng",
        "seed",
        "dict",
        "hash",
        "partition",
        "shard",
        "index",
        "lookup",
        "metric",
        "monitor",
        "sample",
        "data",
        "input",
        "label",
        "target",
        "text",
        "query",
        "value",
        "attention",
        "attn",
        "sequence",
        "image",
    }
)
REDACTED = "<redacted>"
# The password in a URL's userinfo: postgresql://user:secret@host/db → user:<redacted>@host.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):(?P<pw>[^/\s@]+)@")
# A webhook URL is its own credential, in its path: hooks.slack.com/services/T…/B…/<secret>,
# discord.com/api/webhooks/<id>/<secret>, and any …/hooks/… or …/webhook(s)/… path.
_WEBHOOK = re.compile(
    r"(?P<head>\bhttps?://(?:hooks\.[^/\s'\"]+|[^/\s'\"]+(?:/[^/\s'\"?#]+)*?/(?i:web)?hooks?))"
    r"/(?P<path>[^\s'\"?#<>]+)"
)
# A header whose value is a credential, wherever it is written: -H 'Authorization: token X',
# --header Authorization:X, {"X-Api-Key": "X"}, Cookie: a=b.
_HEADER_NAME = (
    r"(?i:(?:proxy-)?authorization|(?:set-)?cookie|private-token"
    r"|x-[a-z0-9-]*(?:key|token|secret|auth|signature|session)[a-z0-9-]*)"
)
_SCHEMES = r"(?i:bearer|basic|token|digest|negotiate|ntlm|aws4-hmac-sha256|otp|apikey)"
_SECRETS = re.compile(
    # a header argument: the name, then the credential (after its scheme, if any)
    rf"(?P<header>(?<![A-Za-z0-9_-]){_HEADER_NAME}[\"']?\s*[:=]\s*[\"']?(?:{_SCHEMES}\s+)?)"
    r"(?P<hvalue>[^\s\"',;]+(?:;\s*[^\s\"',;]+)*)"
    # Bearer <token> anywhere; Basic <base64> (a base64 word, so "basic training" stays)
    r"|(?P<scheme>\b(?i:bearer)\s+)(?P<cred>[A-Za-z0-9._~+/=-]{3,})"
    r"|(?P<bscheme>\b(?i:basic)\s+)(?P<bcred>(?=[A-Za-z0-9+/]*(?:[0-9+/=]|[a-z][A-Za-z0-9+/]*[A-Z]))[A-Za-z0-9+/]{8,}=*)"
    # an assignment: name=value in a query or a line, `token = "X"` and `"key": "X"` in source,
    # JSON or YAML, `password: str = 'X'`; the name decides (is_secret_key)
    r"|(?P<name>(?:(?<=[?&;\s,(\[{\"'.-])|^)[A-Za-z_][A-Za-z0-9_.-]*)"
    r"(?P<sep>[\"']?\]?(?:\s*:\s*[A-Za-z_][\w.|\[\] ]*?)?\s*(?:=|:(?!//))\s*)"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^&\s#\"',;)\]}]+)"
    # tokens whose shape says what they are
    r"|(?P<shaped>\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|hf_[A-Za-z0-9]{30,}"
    r"|sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b)"
)
# Text holding none of these (lower-cased) is returned as it is, without a regex: every rule
# needs one (a secret word of a name or header, a scheme, "://", a token's shape).
_HINTS = (
    "://",
    "token",
    "secret",
    "pass",
    "pwd",
    "key",
    "cred",
    "pat",
    "sig",
    "auth",
    "bearer",
    "basic",
    "cookie",
    "session",
    "jwt",
    "hook",
    "gh",
    "hf_",
    "sk-",
    "xox",
    "akia",
)


def redact_text(text: str) -> str:
    """`text` with the credentials in it replaced (see the module's docstring)."""
    lower = text.lower()
    if not any(h in lower for h in _HINTS):  # the usual text: no regex at all
        return text
    if "://" in text:
        text = _URL_PASSWORD.sub(_hide_password, text)
        text = _WEBHOOK.sub(_hide_webhook, text)
    return _SECRETS.sub(_hide_secret, text)


def _hide_webhook(m: re.Match) -> str:
    return m.group(0) if m.group("path") == REDACTED else f"{m.group('head')}/{REDACTED}"


def redact_argv(args: list) -> list:
    """A command line (or a list in a config) with the values of secret-looking options
    replaced: `--token X`, `--token=X`, `-p X`; every other string through redact_text."""
    out: list = []
    hide_next = False
    for arg in args:
        if hide_next and isinstance(arg, str | int | float) and not isinstance(arg, bool):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if not isinstance(arg, str):
            out.append(arg)
            continue
        match = re.match(r"^(-{1,2}[^=\s]+)(=)(.*)$", arg)
        if match and is_secret_flag(match.group(1)):
            out.append(f"{match.group(1)}={REDACTED}")
        elif arg.startswith("-") and "=" not in arg and is_secret_flag(arg):
            out.append(arg)
            hide_next = True
        else:
            out.append(redact_text(arg))
    return out


def _hide_password(m: re.Match) -> str:
    if m.group("pw") in ("***", REDACTED):  # already hidden (SQLAlchemy writes ***)
        return m.group(0)
    return f"{m.group('head')}:{REDACTED}@"


def _hide_secret(m: re.Match) -> str:
    if m.group("hvalue") is not None:
        return m.group(0) if m.group("hvalue") == REDACTED else m.group("header") + REDACTED
    if m.group("cred") is not None:
        return m.group(0) if m.group("cred") == REDACTED else m.group("scheme") + REDACTED
    if m.group("bcred") is not None:
        return m.group("bscheme") + REDACTED
    if m.group("name") is not None:
        name, value = m.group("name"), m.group("value")
        # In a query string a bare key= or sig= is an API key or a signature (?key=AIza…).
        in_query = m.start() > 0 and m.string[m.start() - 1] in "?&"
        secret = is_secret_key(name) or (in_query and _words(name)[-1:] in (["key"], ["sig"]))
        quote = value[0] if value[:1] in ("'", '"') else ""
        if value.strip("'\"") in (REDACTED, ""):
            return m.group(0)
        if not secret:  # the value may hold one: "failed: https://h/b?api_key=X", "A=sk-…"
            return name + m.group("sep") + _SECRETS.sub(_hide_secret, value)
        return f"{name}{m.group('sep')}{quote}{REDACTED}{quote}"
    return REDACTED


def is_secret_flag(flag: str) -> bool:
    """A command-line option whose value is a secret: any secret-looking name, and `-p`,
    `--key`, `--pat` (mysql -p, tools' --key), which alone say nothing as config keys."""
    name = flag.lstrip("-")
    return name in ("p", "key", "pat") or is_secret_key(name)


_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")


def _words(key: str) -> list[str]:
    return [w for w in _NOT_WORD.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]


def is_secret_key(key: str) -> bool:
    words = _words(key)
    if not words:
        return False
    last = words[-1]
    if last == "token" and len(words) > 1 and words[-2] in NOT_SECRET_BEFORE_TOKEN:
        return False
    if last in SECRET_WORDS or "secret" in words or "password" in words:
        return True
    if last == "pass" and len(words) > 1 and words[-2] not in NOT_SECRET_BEFORE_PASS:
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
        # A list may be a command line: ["--token", "X"] hides X as the command line would.
        items = config if inside_secret else redact_argv(list(config))
        return [redact(v, inside_secret=inside_secret) for v in items]
    if inside_secret and config is not None:
        return REDACTED
    return redact_text(config) if isinstance(config, str) else config
