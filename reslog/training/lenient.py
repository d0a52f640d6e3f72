"""The slow path of `Run.log()`: whatever the dict holds, nothing raises into training.

The rule (docs/reslog.md, "Values"): numbers are stored (bools as 0/1, device tensors converted
at flush time); `None` is skipped; strings are kept as text; nested dicts flatten to `a/b`;
anything else (a `Table`, `Image`, list, a bad key, ...) is not stored: `skip(key, why)` is
called for it, and the run warns once per key and counts it. Only a call that is wrong every
time (a non-dict argument) raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reslog.training.values import check_key, convert

Skip = Callable[[str, str], None]


def type_name(value: Any) -> str:
    tp = type(value)
    module = tp.__module__
    return tp.__qualname__ if module == "builtins" else f"{module}.{tp.__qualname__}"


def lenient_record(
    metrics: Any, known: set[str], skip: Skip
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(numbers by key, [(key, text), ...]) of one log() call; new good keys join `known`."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"reslog: log() takes a dict of metrics, got {type(metrics).__name__}")
    out: dict[str, Any] = {}
    texts: list[tuple[str, str]] = []
    new: list[str] = []
    _walk(metrics, "", out, texts, known, new, skip)
    known.update(new)
    return out, texts


def _walk(
    metrics: Mapping[Any, Any],
    prefix: str,
    out: dict[str, Any],
    texts: list[tuple[str, str]],
    known: set[str],
    new: list[str],
    skip: Skip,
) -> None:
    for key, value in metrics.items():
        if not isinstance(key, str):
            skip(repr(key), f"keys must be str, got {type(key).__name__}")
            continue
        name = prefix + key
        if isinstance(value, Mapping):
            _walk(value, name + "/", out, texts, known, new, skip)
            continue
        if value is None:
            continue
        if name not in known:
            try:
                check_key(name)
            except (TypeError, ValueError) as exc:
                skip(name[:80], str(exc).removeprefix("reslog: "))
                continue
        if isinstance(value, str):
            texts.append((name, value))
            continue
        try:
            out[name] = convert(name, value)
        except TypeError:
            why = getattr(type(value), "not_stored", "values of type {type} are not stored")
            skip(name, why.format(type=type_name(value)))
            continue
        if name not in known:
            new.append(name)
