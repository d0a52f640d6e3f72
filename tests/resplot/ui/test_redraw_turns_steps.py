"""RedrawTurns (resplot/ui/redraw_turns.py) on its own: a redraw's steps run until a turn's
time is spent, a change of view drops the steps left (even asked from inside a step), and a
redraw of another page starts it anew."""

from __future__ import annotations

from resplot.ui.redraw_turns import RedrawTurns


def _counting(done: list, n: int, inside=None):
    def steps():
        for k in range(n):
            done.append(k)
            if inside is not None and k == 1:
                inside()
            yield

    return steps


def test_steps_run_a_turn_at_a_time_then_end():
    turns, done = RedrawTurns(turn_s=0.0), []
    page = object()
    assert turns.step(page, _counting(done, 3))  # one step a turn (turn_s 0)
    assert turns.pending(page) and turns.busy and done == [0]
    assert turns.step(page, _counting(done, 3)) and done == [0, 1]  # the same steps go on
    assert turns.step(page, _counting(done, 3)) and done == [0, 1, 2]
    assert not turns.step(page, _counting(done, 3))  # the end
    assert not turns.busy and not turns.pending(page) and turns.turns == 3
    whole = RedrawTurns(turn_s=60.0)
    assert not whole.step(page, _counting(done, 3)) and done[-3:] == [0, 1, 2]


def test_a_change_of_view_drops_the_steps_left_even_from_inside_a_step():
    turns, done = RedrawTurns(turn_s=0.0), []
    page = object()
    turns.step(page, _counting(done, 5))
    turns.forget()
    assert not turns.busy
    turns.step(page, _counting(done, 5, inside=turns.forget))
    assert turns.step(page, _counting(done, 5, inside=turns.forget))  # the step asking
    assert done == [0, 0, 1] and not turns.busy  # dropped after it, no error
    turns.step(page, _counting(done, 2))
    assert done[-1] == 0  # from the start


def test_another_page_starts_anew():
    turns, done = RedrawTurns(turn_s=0.0), []
    a, b = object(), object()
    turns.step(a, _counting(done, 3))
    turns.step(b, _counting(done, 3))
    assert done == [0, 0] and turns.pending(b) and not turns.pending(a)
