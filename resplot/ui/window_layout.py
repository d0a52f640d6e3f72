"""The window's geometry and splitters: a first window that fits the screen's free area, splits
that follow the window's size until the user drags one (then theirs are kept, and saved in the
settings), and the sources tree folded away and back (Ctrl+B). Sizes: resplot/data/layout.py."""

from __future__ import annotations

from PyQt5.QtCore import QByteArray, QRect
from PyQt5.QtWidgets import QApplication

from resplot.data import layout

TABLE_ROWS = 6  # the run table shows at least this many runs by default


def available(win) -> QRect:
    screen = win.screen() if hasattr(win, "screen") else None
    screen = screen or QApplication.primaryScreen()
    return screen.availableGeometry()


def place_first(win) -> None:
    """A window with no saved geometry: the preferred size where the screen has room for it,
    centred in the screen's free area."""
    area = available(win)
    w, h = layout.window_size(area.width(), area.height())
    win.resize(w, h)
    win.move(area.x() + (area.width() - w) // 2, area.y() + (area.height() - h) // 2)


def restore(win, saved: dict) -> None:
    """Geometry and splitter states from the settings; a saved window larger than this screen
    (made on a bigger monitor) is fitted into it."""
    win.splits_by_hand = False
    try:
        if "geometry" in saved:
            win.restoreGeometry(QByteArray.fromHex(saved["geometry"].encode()))
            area = available(win)
            if win.width() > area.width() or win.height() > area.height():
                place_first(win)
        else:
            place_first(win)
        for name in ("top_split", "main_split"):
            if name in saved:
                getattr(win, name).restoreState(QByteArray.fromHex(saved[name].encode()))
                win.splits_by_hand = True
    except (AttributeError, TypeError, ValueError):  # a settings file edited by hand
        place_first(win)
    if not win.splits_by_hand:
        follow_size(win)


def follow_size(win) -> None:
    """Default split sizes for the window's size (until a split is dragged by hand)."""
    if win.splits_by_hand:
        return
    top, main = layout.split_sizes(win.width(), win.height(), win.table.height_for(TABLE_ROWS))
    win.top_split.setSizes(top)
    win.main_split.setSizes(main)


def toggle_tree(win) -> None:
    """Fold the sources tree away, or unfold it to its default width."""
    sizes = win.top_split.sizes()
    if sizes[0] > 0:
        win.top_split.setSizes([0, sum(sizes)])
    else:
        tree = min(layout.TREE_PX, sum(sizes) // 3)
        win.top_split.setSizes([tree, sum(sizes) - tree])
    win.splits_by_hand = True


def saved(win) -> dict:
    """What the settings keep: the geometry, and the splits when the user set them."""
    out = {"geometry": bytes(win.saveGeometry().toHex()).decode()}
    if win.splits_by_hand:
        for name in ("top_split", "main_split"):
            out[name] = bytes(getattr(win, name).saveState().toHex()).decode()
    return out
