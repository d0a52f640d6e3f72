"""Chinese, Japanese and Korean text in charts: a matplotlib font fallback chain.

matplotlib draws with DejaVu Sans, which has no CJK glyphs: a Chinese run name or key came out
as boxes in every chart and snapshot, even with a CJK font installed (Qt widgets fall back by
themselves; matplotlib only falls back along the families named in font.family, since 3.6).
use_cjk() names the font the family resolves to (DejaVu Sans), then the first installed CJK
family of FAMILIES, so Latin text keeps its look and CJK glyphs come from the fallback;
enable_for() does that the first time CJK text is to be drawn.

matplotlib caches the fonts it found on first use; a font installed later is not in that cache,
so the system font folders are scanned for known CJK font files too and added directly.
With none installed, missing_note() says once how to install one (README: "CJK text").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from matplotlib import font_manager, rcParams

FAMILIES = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans CJK TC",
    "Noto Sans CJK KR",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "Source Han Sans",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Microsoft YaHei",
    "PingFang SC",
    "Hiragino Sans GB",
    "SimHei",
    "Heiti SC",
    "Droid Sans Fallback",
    "Noto Serif CJK SC",
)
# File names of those fonts, for fonts installed after matplotlib built its cache.
_FILES = re.compile(
    r"(NotoSansCJK|NotoSerifCJK|NotoSansSC|SourceHanSans|wqy-zenhei|wqy-microhei|msyh|PingFang|"
    r"simhei|DroidSansFallback)",
    re.IGNORECASE,
)
# CJK ideographs, kana, hangul and CJK punctuation / full-width forms.
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
INSTALL_HINT = (
    "Chinese/Japanese/Korean text is drawn as boxes in charts: no CJK font is installed. "
    "Install one (Debian/Ubuntu: apt install fonts-noto-cjk; macOS and Windows have one) "
    "and restart resplot."
)

_found: str | None = None
_active = False
_checked = False
_said = False


def _installed() -> set[str]:
    return {f.name for f in font_manager.fontManager.ttflist}


def _scan_system() -> None:
    """Add CJK font files matplotlib's cache does not know (installed after it was built)."""
    known = {Path(f.fname).name for f in font_manager.fontManager.ttflist}
    for path in font_manager.findSystemFonts():
        name = Path(path).name
        if _FILES.search(name) and name not in known:
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):  # an unreadable font file: skip it
                continue


def find_cjk() -> str | None:
    """The first installed CJK family of FAMILIES (looked up once), None when none is."""
    global _found, _checked
    if not _checked:
        _checked = True
        names = _installed()
        if not any(f in names for f in FAMILIES):
            _scan_system()
            names = _installed()
        _found = next((f for f in FAMILIES if f in names), None)
    return _found


def use_cjk() -> str | None:
    """Put the first installed CJK family into matplotlib's fallback chain (once); its name,
    or None when none is installed."""
    global _active
    if _active or find_cjk() is None:
        return _found
    _active = True
    if _found is not None:
        # Fallback runs along font.family's entries, and a generic entry ("sans-serif")
        # resolves to one font: name the font it resolves to, then the CJK one.
        first = []
        for family in rcParams["font.family"]:
            if family in ("sans-serif", "serif", "monospace", "cursive", "fantasy"):
                prop = font_manager.FontProperties(family=[family])
                family = font_manager.fontManager.findfont(prop, fallback_to_default=True)
                family = font_manager.get_font(family).family_name
            if family != _found and family not in first:
                first.append(family)
        rcParams["font.family"] = [*first, _found]
    return _found


def enable_for(texts: Iterable[str]) -> bool:
    """Turn the fallback on the first time CJK text is to be drawn; True when it just came
    on (texts made before it lack it: the caller makes them again). Pages without CJK text
    keep the plain font: the fallback chain costs ~4 % of a page's draw time."""
    if _active or not has_cjk(texts):
        return False
    return use_cjk() is not None


def has_cjk(texts: Iterable[str]) -> bool:
    return any(_CJK.search(t) for t in texts)


def missing_note(texts: Iterable[str]) -> str | None:
    """INSTALL_HINT the first time CJK text meets an installation without a CJK font."""
    global _said
    if _said or find_cjk() is not None or not has_cjk(texts):
        return None
    _said = True
    return INSTALL_HINT
