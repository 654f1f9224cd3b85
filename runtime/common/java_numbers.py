"""Java's text of a double and a float (``Double.toString``, ``Float.toString``): what Java's
``toString``, Jackson's JSON and CSV writers and so Flink's formats write for DOUBLE and FLOAT
values. JDK 17's ``Double.toString`` sometimes gives more digits than the shortest
(``9.999999999999999E22`` for 1e23); these give the shortest digits (what JDK 19+ prints)."""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np


def double_to_string(value: float) -> str:
    """``Double.toString``: ``1.0E20``, ``0.5``, ``1.0E-5``, ``NaN``."""
    value = float(value)
    return _floating(value, repr(value))


def float_to_string(value: float) -> str:
    """``Float.toString``: the shortest digits of the value rounded to 32 bits (0.1 is ``0.1``)."""
    single = np.float32(value)
    return _floating(float(single), str(single))


def _floating(value: float, shortest: str) -> str:
    """Plain from 10^-3 up to 10^7, else ``d.dddEn``; at least one digit after the point."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(shortest).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + exponent            # where the decimal point goes in ``text``
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{minus}0.{'0' * -point}{text}"
        return f"{minus}{text[:point].ljust(point, '0')}.{text[point:] or '0'}"
    return f"{minus}{text[0]}.{text[1:] or '0'}E{point - 1}"
