"""A chart's spines drawn together: the window draws every chart's four spines over its live
series at each poll (they lie over the series, resplot/ui/layers.py), and matplotlib's
draw of one spine is a Patch's (its transform composed, its graphics context set up from
scratch: 0.17 ms, most of it Python) around an Agg stroke of a few microseconds. Drawn
here with one graphics context for the chart's plain spines, each its own path and
transform as matplotlib draws it: the same pixels (tests/resplot/draw/test_spines.py).
A spine that is not plain (bounds, a dash, a hatch, a clip, path effects, another
renderer) is drawn by matplotlib."""

from __future__ import annotations

from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.spines import Spine

from resplot.draw.plain_draw import patch_style

EDGES = {"left": "y", "right": "y", "top": "x", "bottom": "x"}


def plain(spine) -> bool:
    """Whether a spine draws as a solid stroke of its edge's length and nothing else."""
    return (
        type(spine) is Spine
        and spine.spine_type in EDGES
        and spine.get_bounds() is None
        and spine.get_linestyle() == "solid"
        and not spine.get_hatch()
        and spine.get_sketch_params() is None
        and not spine.get_path_effects()
        and not (spine.get_clip_on() and (spine.get_clip_box() or spine.get_clip_path()))
        and spine.get_facecolor()[3] == 0
    )


def draw_spines(figure, spines: list) -> None:
    """Draw `spines` (visible ones, in order) on the figure's canvas renderer."""
    renderer = figure.canvas.get_renderer()
    if not isinstance(renderer, RendererAgg):
        for spine in spines:
            figure.draw_artist(spine)
        return
    gc = renderer.new_gc()
    try:
        for spine in spines:
            if not plain(spine):
                figure.draw_artist(spine)
                continue
            _fit(spine)
            patch_style(gc, spine, spine.get_linewidth() if spine.get_edgecolor()[3] else 0)
            transform = spine.get_transform()
            path = transform.transform_path_non_affine(spine.get_path())
            renderer.draw_path(gc, path, transform.get_affine(), None)
            spine.stale = False
    finally:
        gc.restore()


def _fit(spine) -> None:
    """The spine along its edge's view interval, as matplotlib's Spine.draw sets it."""
    lim = spine.axes.viewLim
    low, high = lim.intervaly if EDGES[spine.spine_type] == "y" else lim.intervalx
    at = 1 if EDGES[spine.spine_type] == "y" else 0
    vertices = spine.get_path().vertices
    vertices[0, at] = low
    vertices[1, at] = high
