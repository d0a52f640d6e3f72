"""Settings that survive a restart: sources, ticked runs, page, view options, window layout.

One JSON file, `$RESPLOT_CONFIG` or `~/.config/resplot/settings.json`, private (0600; the
`resplot` folder 0700): it names your hosts, user names, ports and store paths. Written
atomically through schema.store.user_files (a fresh file beside it, renamed over it), so a crash
mid-write leaves the old file and a link planted there is replaced, never written through. A
file that cannot be read (bad JSON, bad values) is moved aside as `settings.json.corrupt-<time>`
and reported; the viewer starts with defaults instead of refusing to open.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from resplot.data.state import StateError, ViewState
from schema.store.user_files import make_private_folders, private_folder, write_file

VERSION = 1


def config_path() -> Path:
    env = os.environ.get("RESPLOT_CONFIG")
    if env:
        return Path(env).expanduser()
    return default_folder() / "settings.json"


def default_folder() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or "~/.config"
    return Path(base).expanduser() / "resplot"


@dataclass
class Settings:
    state: ViewState = field(default_factory=ViewState)
    window: dict[str, Any] = field(default_factory=dict)  # geometry, splitter sizes (Qt-encoded)
    problem: str | None = None  # why the file could not be used, for the status bar

    def to_dict(self) -> dict[str, Any]:
        return {"version": VERSION, "state": self.state.to_dict(), "window": self.window}


def load(path: Path | None = None, *, move_bad: bool = True) -> Settings:
    """The settings file's contents (defaults when there is none). An unreadable one is moved
    aside (`move_bad`: the window, which writes a new one) and said in `problem`."""
    path = config_path() if path is None else Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings()
    except OSError as exc:
        return Settings(problem=f"cannot read settings {path}: {exc.strerror}; using defaults")
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise StateError("the file does not hold a JSON object")
        state = ViewState.from_dict(data.get("state", {}))
        window = data.get("window", {})
        if not isinstance(window, dict):
            window = {}
        return Settings(state, window)
    except (ValueError, StateError) as exc:
        if not move_bad:
            return Settings(problem=f"settings file {path} is unreadable ({exc})")
        backup = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            path.replace(backup)
            where = f"moved to {backup}"
        except OSError as move_exc:
            where = f"could not move it aside ({move_exc.strerror})"
        return Settings(problem=f"settings file {path} is unreadable ({exc}); {where}")


def save(settings: Settings, path: Path | None = None) -> None:
    """Write the settings, 0600 whatever the umask. resplot's own folder is made private (0700,
    this user's, not a link); a folder named by $RESPLOT_CONFIG is left as it is, missing ones
    are created 0700."""
    path = config_path() if path is None else Path(path)
    if path.parent == default_folder():
        private_folder(path.parent)
    else:
        make_private_folders(path.parent)
    write_file(path, json.dumps(settings.to_dict(), indent=2) + "\n", private=True)
