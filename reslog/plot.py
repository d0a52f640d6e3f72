"""`wandb.plot` under `import reslog as wandb`: the chart presets take wandb's arguments and
return a `CustomChart` that `log()` accepts and does not store (one warning per key, as any
rich value: docs/reslog.md, "Values"). reslog charts what is logged as numbers: log the
values themselves (a line's y per step) and resplot draws them."""

from __future__ import annotations

from typing import Any

from reslog.training.media import CustomChart

__all__ = [
    "CustomChart",
    "bar",
    "confusion_matrix",
    "histogram",
    "line",
    "line_series",
    "plot_table",
    "pr_curve",
    "roc_curve",
    "scatter",
]


def _chart(kind: str):
    def make(*args: Any, **kwargs: Any) -> CustomChart:
        return CustomChart(kind, *args, **kwargs)

    make.__name__ = make.__qualname__ = kind
    make.__doc__ = f"wandb.plot.{kind}(...): a CustomChart, accepted by log() and not stored."
    return make


line = _chart("line")
scatter = _chart("scatter")
bar = _chart("bar")
histogram = _chart("histogram")
line_series = _chart("line_series")
confusion_matrix = _chart("confusion_matrix")
pr_curve = _chart("pr_curve")
roc_curve = _chart("roc_curve")
plot_table = _chart("plot_table")
