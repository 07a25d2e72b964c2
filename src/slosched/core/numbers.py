"""Plain Python numbers in the specs: ``numpy.int64(512)`` becomes ``512``, ``numpy.float32(0.5)`` ``0.5``.

Specs are often built from numpy arrays. Python arithmetic does not mind, but the compiled simulator
modules (``slosched.native``) check declared types strictly, JSON cannot write numpy scalars, and a
non-integral token count is a mistake worth naming. The common case (already an ``int`` or ``float``)
costs one type check.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from slosched.core.errors import ConfigError


def as_int(value: Any, where: str) -> int:
    """``value`` as an ``int``: integers of any kind and integral floats; anything else is an error."""
    if type(value) is int:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
        return int(float(value))
    raise ConfigError(where, f"must be a whole number, got {value!r}")


def as_float(value: Any, where: str) -> float:
    """``value`` as a ``float`` (any real number, infinities included; NaN is left to the field's checks)."""
    if type(value) is float:
        return value
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise ConfigError(where, f"must be a number, got {value!r}")


def plain_numbers(spec: Any, ints: tuple[str, ...], floats: tuple[str, ...]) -> None:
    """Replace the named fields of frozen dataclass ``spec`` with plain ints / floats (None stays None)."""
    name = type(spec).__name__
    for field in ints:
        value = getattr(spec, field)
        if value is not None and type(value) is not int:
            object.__setattr__(spec, field, as_int(value, f"{name}.{field}"))
    for field in floats:
        value = getattr(spec, field)
        if value is not None and type(value) is not float:
            object.__setattr__(spec, field, as_float(value, f"{name}.{field}"))
