"""``java.time.format.DateTimeFormatter`` patterns (``yyyy-MM-dd--HH``) applied to Python datetimes:
Flink names its date-time buckets with them.

The numeric fields only: y (year), M (month), d (day), H (hour 0-23), m (minute), s (second) and
S (fraction of a second), each padded to the number of letters; text in single quotes ('' is a
quote) and any character that is not a letter stand for themselves.
"""
from __future__ import annotations

import datetime
import re
from functools import lru_cache

_FIELDS = {"y": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}
_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.S)


@lru_cache(maxsize=64)
def check_pattern(pattern: str) -> tuple:
    """The pattern's parts: (letter, width) for a field, (None, text) for literal text."""
    if not isinstance(pattern, str):
        raise TypeError(f"a date-time pattern is a string such as 'yyyy-MM-dd--HH', got {pattern!r}")
    parts = []
    for match in _TOKEN.finditer(pattern):
        token = match.group(0)
        if token.startswith("'"):
            if len(token) < 2 or not token.endswith("'"):
                raise ValueError(f"date-time pattern {pattern!r}: an unclosed quote")
            parts.append((None, token[1:-1].replace("''", "'") if token != "''" else "'"))
        elif token[0].isalpha():
            if token[0] not in _FIELDS and token[0] != "S":
                raise ValueError(f"date-time pattern {pattern!r}: the letter {token[0]!r} is not supported; "
                                 f"use y M d H m s S, and quote text ('T')")
            parts.append((token[0], len(token)))
        else:
            parts.append((None, token))
    return tuple(parts)


def format_datetime(pattern: str, moment: datetime.datetime) -> str:
    out = []
    for letter, width in check_pattern(pattern):
        if letter is None:
            out.append(width)
        elif letter == "S":
            out.append(f"{moment.microsecond:06d}"[:width].ljust(width, "0"))
        elif letter == "y" and width == 2:
            out.append(f"{moment.year % 100:02d}")
        else:
            out.append(str(getattr(moment, _FIELDS[letter])).zfill(width))
    return "".join(out)
