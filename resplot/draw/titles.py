"""A chart's title cut to its chart's width: a run's name in it (the timing page's
`Step time: <run>`) loses the words every such name shares first, anything else its middle.
Whole, a sweep's names ran into the next chart's title."""

from __future__ import annotations

from matplotlib.figure import Figure

from resplot.data import layout
from resplot.data.names import elide_middle, fit_name
from resplot.data.pages import PanelSpec

TITLE_EM = 0.62  # a title character's mean width, in font sizes (DejaVu Sans)


def fit_titles(axes: list, specs: list[PanelSpec], figure: Figure, cols: int) -> None:
    """Set each axes' title from its spec, cut to the width of a chart of `cols` columns."""
    if not axes:
        return
    pars = figure.subplotpars
    width = figure.bbox.width * (pars.right - pars.left)
    axes_w = width / (cols + (cols - 1) * pars.wspace)
    pt = layout.TITLE_PT * figure.dpi / 72.0
    chars = max(8, int(axes_w / (pt * TITLE_EM)))
    subjects = [s.subject for s in specs if s.subject]
    for ax, spec in zip(axes, specs, strict=False):
        if spec.kind == "section":
            continue  # its card names it
        title = spec.title
        if len(title) > chars and spec.subject:
            room = chars - (len(title) - len(spec.subject))
            title = title.replace(spec.subject, fit_name(spec.subject, subjects, room))
        if len(title) > chars:
            title = elide_middle(title, chars)
        if ax.get_title(loc="left") != title:
            ax.set_title(title, fontsize=layout.TITLE_PT, loc="left", y=1.0)
