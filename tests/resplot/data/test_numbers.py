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
        (9_999.6, "10k"),  # rounded to 10,000: `1e+04` before
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


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2.3, "2.300"),
        (2.957, "2.957"),
        (428_000, "428.0k"),
        (999_960, "1.000M"),
        (3960, "3960"),
        (0.00028, "0.0002800"),
        (2e-7, "2.000e-07"),
        (0, "0.000"),
        (float("nan"), "nan"),
    ],
)
def test_a_streaming_value_keeps_its_trailing_zeros(value, text):
    """A legend's latest value: 2.31, 2.3, 2.297 changed its text's width each poll (the
    legend resized and laid out again)."""
    assert short_value(value, steady=True) == text
    assert value_text(value, steady=True) == text


def test_legends_and_the_readout_say_throughput_as_the_ticks_do():
    """A legend's latest throughput read `1.148e+04` (`.4g`) beside ticks labelled `12k`."""
    assert value_text(11_480.0) == "11.48k"
    assert value_text(428_000.0) == "428k"
    assert value_text(2.957) == "2.957"
    assert value_text(None) == ""
