"""A colour per run, by assignment: runs on screen never share a look, and a run keeps its look
across launches and source order (the assignment is stored in the settings, keyed by run uid).

A look is a slot: slot i is colour PALETTE[i % 20] drawn with line style STYLES[i // 20], so
the 21st run on screen gets the first colour again, dashed. A hash of the run's identity (what
this replaced) collides: 8 runs in 16 colours share one with ~88 % probability. A colour the
user picks (right-click a run) is stored as "#rrggbb" instead of a slot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from schema.store.status import CRASHED, FAILED, FINISHED, KILLED, RUNNING, STALLED

# Tableau 10, then ten more picked to stay apart from them and from each other (dark, light
# and saturated hues the first ten lack), so that 20 runs on one chart are told apart.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#e6ab02",
    "#843c39",
    "#7b4173",
    "#66c2a5",
    "#fb9a99",
    "#000000",
    "#a6cee3",
    "#b15928",
)
STYLES = ("-", "--", "-.", ":")
NEUTRAL = "#9a9a9a"  # a run with no look yet (not plotted)
_HEX = re.compile(r"^#[0-9a-fA-F]{6}$")

Assignment = int | str  # a slot, or a colour the user picked


class Look(NamedTuple):
    color: str
    style: str


def look_of(value: Assignment | None) -> Look:
    if value is None:
        return Look(NEUTRAL, "-")
    if isinstance(value, str):
        return Look(value.lower(), "-")
    return Look(PALETTE[value % len(PALETTE)], STYLES[(value // len(PALETTE)) % len(STYLES)])


def valid_assignment(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, str) and bool(_HEX.match(value))


def assign(book: dict[str, Assignment], on_screen: Iterable[str]) -> bool:
    """Give every uid in `on_screen` a slot no other on-screen run holds; True if `book` changed.

    A run that has a slot keeps it; when two on-screen runs hold the same slot (given while
    they were never on screen together), the one assigned first keeps it. New runs take the
    lowest free slot, in the order given. Picked colours are left alone."""
    uids = list(dict.fromkeys(on_screen))
    order = {uid: n for n, uid in enumerate(book)}  # the book's insertion order: first assigned
    used: set[int] = set()
    changed = False
    keep = sorted((u for u in uids if u in book), key=order.__getitem__)
    loose = [u for u in uids if u not in book]
    for uid in keep:
        value = book[uid]
        if isinstance(value, str):
            continue
        if value in used:
            del book[uid]  # re-added at the end: it is now the later assignment
            loose.append(uid)
            changed = True
        else:
            used.add(value)
    slot = 0
    for uid in loose:
        while slot in used:
            slot += 1
        book[uid] = slot
        used.add(slot)
        changed = True
    return changed


def shade(color: str, index: int, count: int) -> str:
    """The run's colour, lighter for higher `index` of `count` (e.g. GPU i of a run)."""
    if count <= 1 or index <= 0:
        return color
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    t = 0.6 * index / (count - 1)
    r, g, b = (round(c + (255 - c) * t) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


# The colour of a run's status text, in the run table and the sources tree.
STATUS_COLORS = {
    RUNNING: "#2ca02c",
    STALLED: "#e6a700",
    FINISHED: "#1f77b4",
    FAILED: "#d62728",
    KILLED: "#ff7f0e",
    CRASHED: "#d62728",
}
STATUS_NEUTRAL = "#444444"  # any other status string (a new one shows, in a neutral colour)


def status_color(status: str) -> str:
    return STATUS_COLORS.get(status, STATUS_NEUTRAL)
