"""One self-contained HTML file of runs: `resplot report` and the window's File > Export >
HTML report. `build.py` gathers the series through the viewer's cache and tiles and packs them
(`pack.py`) at the resolution the size budget allows (`levels.py`); `assets/` holds the page
(HTML, CSS and the plain-canvas chart script, no library) that draws them, offline.
"""

from resplot.report.build import DEFAULT_MAX_MB, REPORT_PAGES, Report, ReportError, build_report

__all__ = ["DEFAULT_MAX_MB", "REPORT_PAGES", "Report", "ReportError", "build_report"]
