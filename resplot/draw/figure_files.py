"""A figure written to a file: PNG, SVG or PDF by the file's extension (the chart pages, the
ranks page, `resplot snapshot`)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from schema.store.user_files import replacing

SAVE_FORMATS = ("png", "svg", "pdf")


def save_figure(figure: Figure, path: str | Path, dpi: int = 120) -> None:
    """PNG, SVG or PDF by the file's extension."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in SAVE_FORMATS:
        raise ValueError(
            f"cannot save a chart as {path.name!r}: use a .png, .svg or .pdf file name"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh file beside the target, renamed over it: never written through a planted link.
    with replacing(path, "wb") as out:
        figure.savefig(out, format=fmt, dpi=dpi)
