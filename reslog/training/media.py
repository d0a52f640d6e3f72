"""wandb's rich-value and settings classes, so that code written for wandb runs unchanged.

reslog stores numbers and text. These objects are accepted where wandb takes them; `log()`
does not store them: it warns once per key naming the type and counts them in an event (see
docs/reslog.md, "Values"). They keep what they were given, for code that reads it back.
"""

from __future__ import annotations

import enum
from typing import Any


class _Kept:
    """Keeps its arguments (`.args`, `.kwargs`); stored by nothing."""

    # Why log() does not store one (its warning says it).
    not_stored = "values of type {type} are not stored (reslog stores numbers and text)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"reslog.{type(self).__name__}(not stored)"


class Table(_Kept):
    """wandb.Table(columns=..., data=...): accepted, not stored."""

    def add_data(self, *row: Any) -> None:
        self.kwargs.setdefault("data", []).append(list(row))


class Image(_Kept):
    """wandb.Image(...): accepted, not stored."""


class Histogram(_Kept):
    """wandb.Histogram(...): accepted, not stored."""


class Html(_Kept):
    """wandb.Html(...): accepted, not stored."""


class Video(_Kept):
    """wandb.Video(...): accepted, not stored."""


class Audio(_Kept):
    """wandb.Audio(...): accepted, not stored."""


class Settings(_Kept):
    """wandb.Settings(...): accepted by init(settings=...) and ignored (init says so once)."""


class AlertLevel(str, enum.Enum):
    """wandb.AlertLevel: run.alert(level=AlertLevel.WARN) maps to the event level "warning"."""

    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class CustomChart(_Kept):
    """What wandb.plot.line(...) and the other reslog.plot functions return: accepted by log(),
    not stored (a chart is drawn from stored numbers: log the values themselves)."""

    not_stored = (
        "wandb.plot charts are not stored (reslog charts what is logged as numbers: log the "
        "values the chart draws)"
    )

    def __init__(self, kind: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    def __repr__(self) -> str:
        return f"reslog.plot.{self.kind}(not stored)"
