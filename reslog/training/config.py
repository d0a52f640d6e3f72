"""`run.config` / `reslog.config`: the run's configuration, readable and updatable at any time.

Attribute and item access (`config.lr`, `config["lr"]`), `update()`, `setdefaults()`, as
wandb's config. The stored form (runs.config, secrets redacted) is rendered here, on the caller's
thread, when the config changes (rarely: at start, when a framework adds its hyper-parameters);
the writer only compares `_version` and copies `_stored` with its next flush. Attribute names
starting with "_" are this object's own; every other name is a config key (`config.version`).
`config_dict` turns what init(config=...) accepts into the plain dict a Config holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from reslog.redact import redact
from reslog.training.values import as_json


def config_json(data: Mapping[str, Any]) -> str:
    return json.dumps(redact(dict(data)), default=as_json)


def config_dict(config: Any) -> dict[str, Any]:
    """A config as a plain dict: dataclasses, argparse namespaces and mappings are accepted."""
    if config is None:
        return {}
    if isinstance(config, Mapping):
        return dict(config)
    import dataclasses

    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "__dict__"):
        return {k: v for k, v in vars(config).items() if not k.startswith("_")}
    raise TypeError(f"reslog: config must be a dict, dataclass or namespace, got {type(config)}")


class Config:
    """A run's config. Changes after `init` are stored and recorded as a "config" event."""

    def __init__(
        self, data: Mapping[str, Any] | None = None, on_change: Callable[[dict], None] | None = None
    ) -> None:
        object.__setattr__(self, "_data", dict(data or {}))
        object.__setattr__(self, "_on_change", on_change)
        object.__setattr__(self, "_version", 0)
        object.__setattr__(self, "_stored", config_json(self._data))

    # -- changes ---------------------------------------------------------------------------------

    def update(self, d: Any = None, allow_val_change: bool | None = None, **kw: Any) -> None:
        """Add or change keys (a dict, dataclass or namespace, and/or keywords). Values may change
        at any time (wandb's `allow_val_change` is accepted and has no effect)."""
        changed = config_dict(d) if d is not None else {}
        changed.update(kw)
        self._apply(changed)

    def setdefaults(self, d: Any) -> None:
        """Add the keys that are not set yet."""
        self._apply({k: v for k, v in config_dict(d).items() if k not in self._data})

    def __setitem__(self, key: str, value: Any) -> None:
        self._apply({str(key): value})

    def __setattr__(self, key: str, value: Any) -> None:
        if key.startswith("_"):
            raise AttributeError(f"reslog: config.{key} is reserved; use config[{key!r}] = ...")
        self._apply({key: value})

    def __delitem__(self, key: str) -> None:
        del self._data[key]
        self._changed({key: None})

    def _apply(self, changed: dict[str, Any]) -> None:
        if not changed:
            return
        changed = {str(k): v for k, v in changed.items()}
        self._data.update(changed)
        self._changed(changed)

    def _changed(self, changed: dict[str, Any]) -> None:
        object.__setattr__(self, "_stored", config_json(self._data))
        object.__setattr__(self, "_version", self._version + 1)
        if self._on_change is not None:
            self._on_change(changed)

    # -- reading ---------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(f"reslog: config has no key {key!r}") from None

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self):
        return self._data.keys()

    def items(self):
        return self._data.items()

    def values(self):
        return self._data.values()

    def as_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def __repr__(self) -> str:
        return f"reslog.Config({self._data!r})"
