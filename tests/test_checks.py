"""The input checks' type predicates: bools, NumPy scalars and non-finite values."""

import numpy as np
import pytest

from agentrl.checks import is_int, is_number


@pytest.mark.parametrize(
    ("value", "minimum", "expected"),
    [
        (3, None, True),
        (-3, None, True),
        (0, 0, True),
        (-1, 0, False),
        (5, 5, True),
        (4, 5, False),
        (True, None, False),
        (False, 0, False),
        (3.0, None, False),
        ("3", None, False),
        (None, None, False),
        (np.int64(3), None, False),
    ],
)
def test_is_int(value, minimum, expected):
    assert is_int(value, minimum) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, True),
        (-2.5, True),
        (1e300, True),
        (True, False),
        (float("nan"), False),
        (float("inf"), False),
        (-float("inf"), False),
        ("1", False),
        (None, False),
    ],
)
def test_is_number(value, expected):
    assert is_number(value) is expected
