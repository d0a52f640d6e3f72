"""`reslog notify KIND URL`: post the notice of a `reslog watch --exec` hook to a chat webhook.

The body is built with `json.dumps` from the hook's environment (RESLOG_RUN, RESLOG_STATUS,
RESLOG_MESSAGE, ...), so a quote or brace in a run name or an alert title stays text: the
shell one-liners it replaces (`-d "{\"text\": \"$RESLOG_MESSAGE\"}"`) let an alert title
add JSON fields of its own.

    reslog watch --exec 'reslog notify slack "$SLACK_WEBHOOK_URL"'
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping

TIMEOUT_S = 15.0


def text_of(env: Mapping[str, str]) -> str:
    """The one line a person reads: `run STATUS: message`."""
    run, status = env.get("RESLOG_RUN", "?"), env.get("RESLOG_STATUS", "?")
    return f"{run} {status.upper()}: {env.get('RESLOG_MESSAGE', '')}"


def body(kind: str, env: Mapping[str, str]) -> dict:
    """The JSON body of `kind`: slack, feishu (Lark), dingtalk, or json (every RESLOG_* field)."""
    line = text_of(env)
    if kind == "slack":
        return {"text": line}
    if kind == "feishu":
        return {"msg_type": "text", "content": {"text": line}}
    if kind == "dingtalk":
        return {"msgtype": "text", "text": {"content": line}}
    if kind == "json":
        fields = ("RUN", "RUN_ID", "PROJECT", "STATUS", "MESSAGE", "STORE")
        return {"text": line, **{f.lower(): env.get(f"RESLOG_{f}", "") for f in fields}}
    raise ValueError(f"unknown webhook kind {kind!r}")


def notify(kind: str, url: str, env: Mapping[str, str] | None = None) -> None:
    """POST the body; OSError with the server's answer when it does not take it."""
    data = json.dumps(body(kind, os.environ if env is None else env)).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as reply:
            reply.read(65536)
    except urllib.error.HTTPError as exc:  # the URL's query (a token) is never printed
        detail = exc.read(300).decode("utf-8", "replace").strip()
        raise OSError(f"{url.split('?')[0]} answered {exc.code}: {detail}") from None
    except (urllib.error.URLError, TimeoutError) as exc:
        why = getattr(exc, "reason", exc)
        raise OSError(f"cannot post to {url.split('?')[0]}: {why}") from None
