"""Run names cut to fit without losing what tells them apart. No Qt here.

The runs of a sweep share a long prefix and suffix and differ in the middle
(`llama-125m-wsd-lr3e-4-wd0.1-seed3-bs512-ctx2048`): an elision at the end or in the middle cuts
exactly the part that matters. Here the parts every name shares go first (whole words between
separators, replaced by "…"), and only then, if still too long, the middle of what is left.
The run table's name column, the run strip and the hover readout cut names this way; the full
name is in their tooltips.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ELLIPSIS = "…"
# Words are cut at these (not at "." or "=": `lr0.0003` and `lr=3e-4` stay whole).
_WORD = re.compile(r"[^-_/:, ]+|[-_/:, ]+")


def _words(name: str) -> list[str]:
    """Words and the separators between them, in order: `a-b_c` -> [a, -, b, _, c]."""
    return _WORD.findall(name)


def shared_ends(names: Sequence[str]) -> tuple[int, int]:
    """How many leading and trailing words (separators included) every name shares; never the
    whole of any name. (0, 0) for fewer than two distinct names."""
    distinct = list(dict.fromkeys(names))
    if len(distinct) < 2:
        return 0, 0
    words = [_words(n) for n in distinct]
    shortest = min(len(w) for w in words)
    head = 0
    while head < shortest - 1 and all(w[head] == words[0][head] for w in words):
        head += 1
    tail = 0
    while tail < shortest - 1 - head and all(w[-1 - tail] == words[0][-1 - tail] for w in words):
        tail += 1
    return head, tail


def elide_middle(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, its middle replaced by "…"."""
    if len(text) <= chars:
        return text
    if chars <= 1:
        return ELLIPSIS[:chars]
    keep = chars - 1
    front = (keep + 1) // 2
    return text[:front] + ELLIPSIS + text[len(text) - (keep - front) :]


def distinct_part(name: str, names: Sequence[str]) -> str:
    """`name` without the leading and trailing words every one of `names` shares ("…" marks
    what went): what tells it apart from the others."""
    return _without_ends(name, shared_ends(names))


def distinct_parts(names: Sequence[str]) -> dict[str, str]:
    """distinct_part for every name of a set, the shared words worked out once."""
    ends = shared_ends(names)
    return {n: _without_ends(n, ends) for n in names}


def _without_ends(name: str, ends: tuple[int, int]) -> str:
    head, tail = ends
    if head == 0 and tail == 0:
        return name
    words = _words(name)
    # Keep the separator next to the cut (`…lr3e-4-wd0.1-seed3…` reads as a fragment).
    middle = "".join(words[head : len(words) - tail])
    return (ELLIPSIS if head else "") + middle + (ELLIPSIS if tail else "")


def fit_name(name: str, names: Sequence[str], chars: int) -> str:
    """`name` in at most `chars` characters: whole when it fits, else without the words all
    `names` share, else that part elided in the middle."""
    if len(name) <= chars:
        return name
    return _fit(name, shared_ends(names), chars)


def fit_names(names: Sequence[str], chars: int) -> dict[str, str]:
    """fit_name for every name of a set (the run table's names, the runs in a readout), the
    shared words worked out once (a readout fits its names on every pointer move)."""
    if all(len(n) <= chars for n in names):
        return {n: n for n in names}
    ends = shared_ends(names)
    out = {n: n if len(n) <= chars else _fit(n, ends, chars) for n in names}
    return out if _unique(out) else _fit_apart(names, ends, chars, out)


def _unique(fitted: dict[str, str]) -> bool:
    return len(set(fitted.values())) == len(fitted)


def _fit_apart(
    names: Sequence[str], ends: tuple[int, int], chars: int, fitted: dict[str, str]
) -> dict[str, str]:
    """Labels that stay apart where cutting the middle made some equal (`…lr6e-…bs256` for
    lr6e-4 and lr6e-5: 12 runs, 10 labels): the words every name has alike in the same place
    go too (`…lr6e-4…bs256…`), and the cut moves to where the labels differ. `fitted` when
    nothing tells them apart in `chars`."""
    short = {n: _without_ends(n, ends) for n in names}
    tries = [short, {n: _varying(n, names) for n in names}]
    for form in tries:
        out = {n: n if len(n) <= chars else form[n] for n in names}
        if all(len(v) <= chars for v in out.values()) and _unique(out):
            return out
    keep = chars - 1
    middle = (keep + 1) // 2
    for form in tries:
        for front in sorted(range(keep + 1), key=lambda f: (abs(f - middle), -f)):
            out = {n: n if len(n) <= chars else _cut(form[n], chars, front) for n in names}
            if _unique(out):
                return out
    return fitted


def _cut(text: str, chars: int, front: int) -> str:
    """`text` in `chars` characters: its first `front` and its last ones, "…" between."""
    if len(text) <= chars:
        return text
    back = chars - 1 - front
    return text[:front] + ELLIPSIS + (text[len(text) - back :] if back else "")


def _varying(name: str, names: Sequence[str]) -> str:
    """`name` without the words that every one of `names` has alike in the same place (names
    of as many words: a sweep's), each stretch of them one "…" (separators between two kept
    words stay)."""
    words = _words(name)
    every = [_words(n) for n in dict.fromkeys(names)]
    if any(len(w) != len(words) for w in every):
        return _without_ends(name, shared_ends(names))
    alike = [all(w[i] == words[i] for w in every) for i in range(len(words))]
    out, i = [], 0
    while i < len(words):
        if not alike[i]:
            out.append(words[i])
            i += 1
            continue
        j = i
        while j < len(words) and alike[j]:
            j += 1
        inner = i > 0 and j < len(words)
        if inner and all(_WORD.fullmatch(w) and not w.strip("-_/:, ") for w in words[i:j]):
            out.extend(words[i:j])  # only separators between two kept words
        elif not out or out[-1] != ELLIPSIS:
            out.append(ELLIPSIS)
        i = j
    return "".join(out)


def _fit(name: str, ends: tuple[int, int], chars: int) -> str:
    short = _without_ends(name, ends)
    return short if len(short) <= chars else elide_middle(short, chars)
