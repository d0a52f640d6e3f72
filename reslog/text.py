"""Terminal formatting for the CLI: aligned text tables, ages, durations, times, and text from a
store made safe to print.

Run names, keys, config values and event text are whatever a training script (or anyone who
could write the store) put there. Printed raw, an escape sequence in them retitles the window,
clears the screen, writes the clipboard (OSC 52) or fakes table rows, and a bidi override
shows a name reversed. `safe()` shows every C0 and C1 control, DEL and bidi control as a
visible escape (`\x1b`, `\u202e`), and `cell()` also cuts a table cell at CELL_LIMIT
characters (a 1 MiB name made `reslog ls` print 10 MB); `--full` and the exports give whole
values.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

CELL_LIMIT = 48  # characters of a table cell; `--full` shows all
VALUE_LIMIT = 400  # characters of one value in `reslog show`
# Bidi embeddings, overrides, isolates and marks: they reorder what follows them on screen.
BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029)
_NAMED = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
_ESCAPES = {
    c: _NAMED.get(c) or (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in (*_CONTROLS, *BIDI)
}
_ESCAPES_KEEP_LINES = {c: e for c, e in _ESCAPES.items() if c not in (0x09, 0x0A)}


def safe(value: object, *, lines: bool = False) -> str:
    """`value` as text a terminal prints as it reads: controls and bidi marks as escapes.
    `lines`: newlines and tabs stay (a traceback in an event body)."""
    s = value if type(value) is str else str(value)
    if s.isprintable():  # the usual name: nothing to do (bidi marks are not printable)
        return s
    return s.translate(_ESCAPES_KEEP_LINES if lines else _ESCAPES)


def cell(value: object, limit: int | None = CELL_LIMIT) -> str:
    """safe(value) on one line, cut to `limit` characters with an ellipsis (None: whole)."""
    s = safe(value)
    if limit is not None and len(s) > limit:
        return s[: limit - 1] + "…"
    return s


def duration(seconds: float | None) -> str:
    """Compact: 42s, 7m05s, 3h12m, 2d04h."""
    if seconds is None or math.isnan(seconds):
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def age(wall: float | None, now: float | None = None) -> str:
    """How long ago: "12s ago"; "-" when there is nothing."""
    if wall is None:
        return "-"
    now = time.time() if now is None else now
    return duration(now - wall) + " ago"


def clock(wall: float | None) -> str:
    if wall is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall))


def number(value: float | None, digits: int = 6) -> str:
    """A metric value: `digits` significant digits, nan/inf spelled out."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    right: set[int] = frozenset(),
    *,
    limit: int | None = CELL_LIMIT,
) -> str:
    """Columns padded to their widest cell; indices in `right` are right-aligned. Every cell
    goes through cell(): escaped, and cut at `limit` characters (None: whole)."""
    cells = [[cell(c, limit) for c in header]] + [[cell(c, limit) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
