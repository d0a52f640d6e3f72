"""Follow mode's headroom (resplot/data/headroom.py): limits kept while the data stay inside,
moved in round steps past the data when they leave, refitted when far too wide."""

from __future__ import annotations

import pytest

from resplot.data.headroom import follow, nice_step


def test_a_first_fit_is_the_datas_own():
    assert follow(None, (-5.0, 105.0)) == (-5.0, 105.0)


def test_limits_stay_while_the_data_stay_inside_them():
    # the data 0..100 with 5 % margins, then 0..101: inside the kept 0..125
    assert follow((-5.0, 125.0), (-5.05, 106.05), margin=0.05) == (-5.0, 125.0)


def test_past_the_end_the_limit_moves_to_a_round_step_beyond_the_data():
    lo, hi = follow((-5.0, 105.0), (-6.0, 126.0), margin=0.05)
    assert lo == -5.0  # the start did not move: its margin grew with the span, no more
    assert hi >= 126.0 + 0.1 * 132 and hi % nice_step(132.0) == 0
    assert follow((lo, hi), (-6.1, 127.1), margin=0.05) == (lo, hi)  # the next poll keeps it


def test_far_too_wide_limits_fit_the_data_again():
    assert follow((0.0, 1000.0), (0.0, 100.0)) == (0.0, 100.0)


def test_a_log_scale_grows_in_decades():
    lo, hi = follow((1.0, 10.0), (0.5, 10.0), log=True)
    assert hi == 10.0 and lo < 0.5


@pytest.mark.parametrize("span, step", [(132.0, 20.0), (1.0, 0.1), (0.0031, 0.0005), (7e6, 1e6)])
def test_nice_steps(span, step):
    assert nice_step(span) == pytest.approx(step)


def test_data_that_moved_away_are_fitted_not_stretched_to():
    # a chart fitted to nothing yet (0..1), then throughput around 420k: not 0..460k
    assert follow((0.0, 1.0), (409_000.0, 433_000.0), margin=0.05) == (409_000.0, 433_000.0)
