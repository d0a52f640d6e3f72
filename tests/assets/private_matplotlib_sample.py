"""What tests/resplot/draw/test_matplotlib_public.py must find: private matplotlib names reached by
an import, an attribute and a hasattr string (never imported by resplot)."""

import matplotlib._path  # noqa: F401
from matplotlib import _api  # noqa: F401
from matplotlib.ft2font import FT2Font


def add(ax, legend) -> bool:
    legend._remove_method = lambda _legend: setattr(ax, "legend_", None)
    return hasattr(FT2Font, "_render_glyph")
