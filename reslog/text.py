"""Terminal formatting for the CLI: aligned text tables, ages, durations, times."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence


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
    header: Sequence[str], rows: Sequence[Sequence[object]], right: set[int] = frozenset()
) -> str:
    """Columns padded to their widest cell; indices in `right` are right-aligned."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for r in cells:
        parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
