"""Type predicates of the input checks, one definition for every floor.

To Python a bool is an int (``isinstance(True, int)``) and NaN a float, but
a count, a seed or a rate set to ``true`` or ``nan`` is no setting: the
checks of configs, datasets, task families and command lines refuse them
with these predicates, so every field means the same by "an integer" and by
"a number". Plain Python values only: NumPy scalars are not ints here (a
config holds Python values; where a NumPy value may arrive, the caller
converts it first).
"""

from __future__ import annotations

import math
from typing import Any


def is_int(value: Any, minimum: int | None = None) -> bool:
    """Whether ``value`` is a Python int, not a bool, and ``>= minimum`` if given."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return minimum is None or value >= minimum


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite Python int or float, not a bool."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )
