"""wandb's `init()` keywords, checked and resolved: mode, id + resume, dir, reinit, and the
ones that have no meaning without a server (accepted, ignored, said once)."""

from __future__ import annotations

import os
import re
import warnings
from typing import Any

from sqlalchemy import Connection, select

from reslog.training.config import config_dict
from schema.store.errors import UnknownRun
from schema.store.tables import runs

MODES = ("online", "offline", "disabled", "shared")
RESUME_WORDS = ("allow", "must", "never", "auto")
# Meaningful to a wandb server or its sync process only.
IGNORED = frozenset(
    {
        "entity",
        "settings",
        "save_code",
        "anonymous",
        "magic",
        "monitor_gym",
        "allow_val_change",
        "force",
        "fork_from",
        "resume_from",
    }
)
RUN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,32}")


def check_mode(mode: str | None) -> str | None:
    if mode is not None and mode not in MODES:
        raise ValueError(f"reslog: init(mode=...) must be one of {MODES} or None, got {mode!r}")
    if mode == "shared":
        warnings.warn(
            "reslog: init(mode='shared') logs this process's own run: several processes "
            "cannot write one run here (its rollups are kept in one writer's memory), and "
            "resuming a run another process still logs raises RunInUse. Give each process "
            "its own run and tie them with init(group=...)",
            UserWarning,
            stacklevel=3,
        )
    return mode


def notice_ignored(kwargs: dict[str, Any]) -> None:
    unknown = sorted(set(kwargs) - IGNORED)
    if unknown:
        raise TypeError(f"reslog: init() got unexpected keyword arguments: {', '.join(unknown)}")
    given = sorted(k for k, v in kwargs.items() if v is not None)
    if given:
        warnings.warn(
            f"reslog: init() ignores {', '.join(given)} (wandb options without meaning for a "
            "local store)",
            UserWarning,
            stacklevel=3,
        )


def check_id(run_id: Any) -> str | None:
    if run_id is None:
        return None
    text = str(run_id)
    if not RUN_ID.fullmatch(text):
        raise ValueError(
            "reslog: init(id=...) must be 1-32 characters of letters, digits, '_', '.' or '-', "
            f"got {text!r}"
        )
    return text


def store_in(dir: str | os.PathLike[str] | None) -> str | None:
    return None if dir is None else os.path.join(os.fspath(dir), "reslog.db")


def resume_target(
    conn: Connection, resume: Any, run_id: str | None, project: str
) -> tuple[str | None, str | None]:
    """(uid of the run to continue, or None; uid for a new run, or None for a random one).

    resume: None/False/"never" start a new run (with `run_id`, refused if it exists); "allow"
    continues `run_id` if it exists; "must" requires it; True/"auto" is "allow" with an id and
    the latest run of `project` without one; any other string is the uid of a run to continue.
    """
    if resume is None or resume is False:
        resume = "never"
    if resume is True:
        resume = "auto"
    if not isinstance(resume, str):
        raise TypeError(f"reslog: init(resume=...) must be a str or bool, got {resume!r}")
    if resume not in RESUME_WORDS:
        if run_id is not None and run_id != resume:
            raise ValueError(f"reslog: init(id={run_id!r}) and resume={resume!r} disagree")
        return resume, None
    if run_id is None:
        if resume == "must":
            raise ValueError("reslog: init(resume='must') needs the id of the run to continue")
        if resume == "auto":
            query = (
                select(runs.c.uid)
                .where(runs.c.project == project)
                .order_by(runs.c.created_at.desc(), runs.c.id.desc())
                .limit(1)
            )
            return conn.execute(query).scalar(), None
        return None, None
    exists = conn.execute(select(runs.c.id).where(runs.c.uid == run_id)).first() is not None
    if exists and resume == "never":
        raise ValueError(
            f"reslog: a run with id {run_id!r} already exists in this store; pass "
            "resume='allow' (or 'must') to continue it"
        )
    if not exists and resume == "must":
        raise UnknownRun(f"reslog: cannot resume run {run_id!r}: no such run in this store")
    return (run_id, None) if exists else (None, run_id)


def config_data(config: Any, include: Any, exclude: Any) -> dict[str, Any] | None:
    """init's config as a plain dict (None: none given): a dict, dataclass or namespace, or a
    YAML/JSON file's path (wandb's config="config.yaml"), then wandb's config_include_keys /
    config_exclude_keys applied to its top-level keys."""
    if isinstance(config, (str, os.PathLike)):
        config = config_file(config)
    if config is None:
        return None
    data = config_dict(config)
    if include is not None and exclude is not None:
        raise ValueError(
            "reslog: init() takes config_include_keys or config_exclude_keys, not both"
        )
    if include is not None:
        keep = set(map(str, include))
        data = {k: v for k, v in data.items() if k in keep}
    if exclude is not None:
        drop = set(map(str, exclude))
        data = {k: v for k, v in data.items() if k not in drop}
    return data


def config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A config file's contents, as wandb reads config="x.yaml": YAML (or JSON, which YAML
    reads too); the config-defaults form `{key: {desc: ..., value: ...}}` gives `{key: value}`
    and wandb's own `wandb_version` and `_wandb` entries are left out."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValueError(
            f"reslog: init(config={name!r}): cannot read it ({exc.strerror})"
        ) from None
    try:
        import yaml

        loaded = yaml.safe_load(text)
    except ImportError:
        loaded = _json_config(text, name)
    except yaml.YAMLError as exc:
        raise ValueError(f"reslog: init(config={name!r}): not YAML ({exc})") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(
            f"reslog: init(config={name!r}): holds a {type(loaded).__name__}, not a mapping"
        )
    out = {}
    for key, value in loaded.items():
        if key in ("wandb_version", "_wandb"):
            continue
        if isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}:
            value = value["value"]
        out[str(key)] = value
    return out


def _json_config(text: str, name: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(
            f"reslog: init(config={name!r}): reading YAML needs PyYAML (pip install pyyaml); "
            "it is not JSON either"
        ) from None
