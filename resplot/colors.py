"""A stable colour per run: the same run has the same colour in every chart, table and launch."""

from __future__ import annotations

import hashlib

from resplot.model import RunRef

# Tableau 10 followed by the darker half of Tableau 20's pairs: distinct hues first.
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
)  # fmt: skip


def run_color(ref: RunRef) -> str:
    """Hex colour from a hash of the run's identity (not its position in any list)."""
    digest = hashlib.sha1(f"{ref.source}\0{ref.store}\0{ref.uid}".encode()).digest()
    return PALETTE[int.from_bytes(digest[:4], "big") % len(PALETTE)]


def shade(color: str, index: int, count: int) -> str:
    """The run's colour, lighter for higher `index` of `count` (e.g. GPU i of a run)."""
    if count <= 1 or index <= 0:
        return color
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    t = 0.6 * index / (count - 1)
    r, g, b = (round(c + (255 - c) * t) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"
