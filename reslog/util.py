"""`wandb.util` under `import reslog as wandb`: the helpers training scripts call.

`generate_id()` is what scripts use to make a run id before `init(id=..., resume="allow")`.
"""

from __future__ import annotations

import secrets
import string

_ALPHABET = string.ascii_lowercase + string.digits


def generate_id(length: int = 8) -> str:
    """A random run id of lowercase letters and digits (a valid init(id=...))."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(int(length)))
