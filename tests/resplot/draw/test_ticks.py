"""Tick labels and the pointer's x (resplot/draw/ticks.py): every label carries its own scale,
the fewest digits that tell a tick from its neighbours; one value alone (where the pointer is)
gets four significant digits (tests/resplot/data/test_numbers.py)."""

from __future__ import annotations

from resplot.draw.ticks import CompactFormatter, compact_labels


def test_tick_labels_carry_their_scale_with_the_digits_the_ticks_need():
    assert compact_labels([0, 2500, 5000, 7500, 10000]) == ["0", "2.5k", "5k", "7.5k", "10k"]
    assert compact_labels([15000, 17500, 20000]) == ["15k", "17.5k", "20k"]
    assert compact_labels([1.5e6, 3e6]) == ["1.5M", "3M"]
    assert compact_labels([1e-4, 2e-4, 3e-4]) == ["1e-4", "2e-4", "3e-4"]
    assert compact_labels([0.25, 0.5, 0.75]) == ["0.25", "0.50", "0.75"]


def test_small_ticks_keep_the_digits_that_say_their_value():
    """Ticks at 2.5e-5, 5e-5, 7.5e-5 (a learning rate's axis) were labelled `2e-5`, `5e-5`,
    `7e-5`: one mantissa digit told them apart, 20 % off. Each label now reads within a tenth
    of the ticks' spacing, as plain decimals already did."""
    assert compact_labels([2.5e-5, 5e-5, 7.5e-5]) == ["2.5e-5", "5e-5", "7.5e-5"]
    assert compact_labels([0, 2.5e-4, 5e-4, 7.5e-4]) == ["0", "2.5e-4", "5e-4", "7.5e-4"]
    assert compact_labels([-7.5e-4, -7.25e-4, -7e-4]) == ["-7.5e-4", "-7.25e-4", "-7e-4"]


def test_the_pointer_x_is_not_a_tick_label():
    """The hover said `tokens 6G` anywhere from 5.5 to 6.5 billion tokens: format_data_short
    fell back to the tick style, whose one value got no decimals."""
    fmt = CompactFormatter()
    assert fmt(6_342_000_000) == "6G"  # a tick alone: as the ticks are labelled
    assert fmt.format_data_short(6_342_000_000) == "6.342G"
