"""Result records (agentrl.evaluate.reproduce_record): mutants the tests
before let through.

Pass 11 of the hand-made mutation passes. A target holds when the value
reaches it: a value equal to its goal meets it, whichever way is better.
"""

from __future__ import annotations

import pytest

from agentrl.evaluate.reproduce_record import target


@pytest.mark.parametrize(
    "value, goal, higher, met",
    [
        (0.75, 0.75, True, True),  # reached exactly
        (0.76, 0.75, True, True),
        (0.74, 0.75, True, False),
        (1.2, 1.2, False, True),  # a ratio at its bound
        (1.1, 1.2, False, True),
        (1.3, 1.2, False, False),
    ],
)
def test_a_target_is_met_from_its_goal_on(value, goal, higher, met):
    row = target("t", value, goal, higher_is_better=higher)
    assert row == {
        "name": "t",
        "value": value,
        "target": goal,
        "higher_is_better": higher,
        "met": met,
    }
