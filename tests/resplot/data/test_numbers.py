"""A value standing alone as text (resplot/data/numbers.py): four significant digits, SI
suffixes from 10^4 up, as in legends, the hover's readout and its x."""

from __future__ import annotations

import pytest

from resplot.data.hover import value_text
from resplot.data.numbers import short_value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (6_342_000_000, "6.342G"),
        (428_000, "428k"),
        (11_480, "11.48k"),
        (12_345, "12.35k"),
        (999_960, "1M"),
        (3960, "3960"),
        (2.2222222, "2.222"),
        (0.00028, "0.00028"),
        (2e-7, "2e-07"),
        (-45_678, "-45.68k"),
        (0, "0"),
        (float("nan"), "nan"),
        (float("-inf"), "-inf"),
    ],
)
def test_a_value_alone_has_four_significant_digits(value, text):
    assert short_value(value) == text


def test_legends_and_the_readout_say_throughput_as_the_ticks_do():
    """A legend's latest throughput read `1.148e+04` (`.4g`) beside ticks labelled `12k`."""
    assert value_text(11_480.0) == "11.48k"
    assert value_text(428_000.0) == "428k"
    assert value_text(2.957) == "2.957"
    assert value_text(None) == ""
