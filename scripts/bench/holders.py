"""What keeps objects alive: for objects of given types made after a mark, the chains of
referrers that hold them, counted (bench_soak.py --holders Path,QStaticText).

A chain reads from the object outwards, each link the holder's type and, where it is found,
the attribute, key or index that holds the previous one: `Path <- Line2D._path <- list
<- Axes.lines`. Dicts that are an object's `__dict__` are folded into that object, and the
walk stops at a module, a class or after `depth` links.
"""

from __future__ import annotations

import gc
import sys
import types
from collections import Counter


class Mark:
    """The ids of the live objects of some types now; `new()` later gives those made since."""

    def __init__(self, names: list[str]) -> None:
        self.names = set(names)
        self.ids = {id(o) for o in self._live()}

    def _live(self) -> list:
        return [o for o in gc.get_objects() if type(o).__qualname__ in self.names]

    def new(self) -> list:
        return [o for o in self._live() if id(o) not in self.ids]


def _owner_of_dict(d: dict, skip: set[int]):
    for r in gc.get_referrers(d):
        if id(r) not in skip and getattr(r, "__dict__", None) is d:
            return r
    return None


def _key_of(d: dict, held) -> str:
    # A loop, not a generator expression: a closure's cell would hold `held` and be found.
    for k, v in d.items():
        if v is held:
            return f"{k:.30}" if isinstance(k, str) else f"{k!r:.30}"
    return "key"


def _link(holder, held) -> str:
    name = type(holder).__qualname__
    if isinstance(holder, dict):
        return f"{name}[{_key_of(holder, held)}]"
    return name  # a list's or tuple's index would split the counts


def chain(obj, ignore: set[int], depth: int = 5) -> str:
    """One chain of holders of `obj`: the first referrer at each link that is not a frame or
    one of `ignore` (the ids of the caller's own lists of these objects)."""
    skip = {id(sys._getframe()), *ignore}
    links = [type(obj).__qualname__]
    held = obj
    for _ in range(depth):
        found = None
        for r in gc.get_referrers(held):
            if id(r) in skip or isinstance(r, (types.FrameType, types.GeneratorType)):
                continue
            if isinstance(r, dict):
                owner = _owner_of_dict(r, skip)
                if owner is not None:
                    links.append(f"{type(owner).__qualname__}.{_key_of(r, held)}")
                    found = owner
                    break
            found = r
            links.append(_link(r, held))
            break
        if found is None or isinstance(found, (types.ModuleType, type)):
            break
        skip.add(id(found))
        held = found
    return " <- ".join(links)


def report(objs: list, sample: int = 300, top: int = 8) -> list[str]:
    """The most common holder chains of up to `sample` of `objs`, as printable lines."""
    picked = objs[:: max(1, len(objs) // sample)]
    ignore = {id(objs), id(picked)}
    counts = Counter(chain(o, ignore) for o in picked)
    seen = sum(counts.values())
    return [f"  {n}/{seen}: {c}" for c, n in counts.most_common(top)]
