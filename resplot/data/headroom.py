"""Follow mode's limits with headroom: while a run streams in, the limits a chart follows move
in steps, not with every poll, so that a poll usually redraws the data alone (the axes, ticks
and labels are a saved picture: resplot/ui/layers.py).

A chart keeps its limits while they still hold everything it follows and that fills at least
FILL of them; past an end, the limits move out to a round number GROW of the span beyond the
data (the next step of about a tenth of the span: "the next major tick plus ~10 %")."""

from __future__ import annotations

import math

GROW = 0.1  # how far past the data an end moves when the data reaches it (of the span)
FILL = 0.6  # kept limits must be at least this full (a span shrunk by a reset refits at once)


def nice_step(span: float) -> float:
    """A round step (1, 2 or 5 times a power of ten) of about a tenth of `span`."""
    if not (span > 0 and math.isfinite(span)):
        return 0.0
    raw = span / 10
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * power >= raw:
            return m * power
    return 10 * power


def follow(
    current: tuple[float, float] | None,
    wanted: tuple[float, float],
    log: bool = False,
    margin: float = 0.0,
) -> tuple[float, float]:
    """The limits to show: `current` (the limits this rule set last time, None for a first
    fit) kept when they hold the data well enough, else `wanted` (the data's own fit, its
    `margin` of the data's span added each side, as matplotlib's autoscaling adds it) with
    room past each end the data went beyond. On a log scale the same in decades."""
    lo, hi = sorted(wanted)
    if current is None or not (hi > lo):
        return wanted
    clo, chi = sorted(current)
    if log:
        if min(lo, hi, clo, chi) <= 0:
            return wanted
        lo, hi, clo, chi = (math.log10(v) for v in (lo, hi, clo, chi))
    finite = all(math.isfinite(v) for v in (lo, hi, clo, chi))
    if not finite or not (chi > clo):
        return wanted
    span = hi - lo
    inner = margin * span / (1 + 2 * margin)  # the margin: the data lie inside it
    below, above = lo + inner < clo, hi - inner > chi  # the data past an end
    step = nice_step(span)
    # An end the data did not pass stays (the margin grows with the span: not a reason).
    lo = math.floor((lo - GROW * span) / step) * step if below else clo
    hi = math.ceil((hi + GROW * span) / step) * step if above else chi
    if span < FILL * (hi - lo):
        return wanted  # far too wide (the data shrank, or moved away): fit them again
    if not below and not above:
        return current
    if log:
        lo, hi = 10.0**lo, 10.0**hi
    return (lo, hi) if wanted[0] <= wanted[1] else (hi, lo)
