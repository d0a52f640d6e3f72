"""What every page does with its x range: follow all the data until the user zooms or pans
(an `xlim_changed` the page did not make itself while `_updating`), then keep the user's range,
asking for the data it needs (`on_view_changed`), until `reset_view()` (the window's "Follow
data", Ctrl+0). The chart pages (draw/charts.py) and the Ranks page (draw/ranks.py) share it."""

from __future__ import annotations

from collections.abc import Callable


class FollowsData:
    follow: bool = True  # autoscale to all data; False after the user zooms or pans
    _updating: bool = False  # the page itself is setting the limits
    on_view_changed: Callable[[], None] | None = None

    def _on_xlim_changed(self, _ax) -> None:
        if self._updating:
            return
        self.follow = False
        if self.on_view_changed is not None:
            self.on_view_changed()

    def reset_view(self) -> None:
        """Follow all data again after a zoom or pan."""
        self.follow = True
