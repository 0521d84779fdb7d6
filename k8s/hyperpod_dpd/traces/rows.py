"""What a format's row parser returns or raises: a request, a row to skip (and why), or a row that is wrong."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.errors import Problem

MAX_TOKENS = 10_000_000  # longer than any model's context (aiperf refuses a 1e300-token prompt: no such int)
HASH_RANGE = (-(2**63), 2**63)  # int64: orjson, aiperf's parser, reads no wider int (and i64 is what we store)


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """The lengths and prefix hashes of one request, before its arrival is made relative to the first."""

    input_tokens: int
    output_tokens: int
    prefix_blocks: tuple[int, ...] = ()


class BadRow(Exception):
    """A row the reader refuses: which field, its value, why, and the fix (the line number is added by the reader)."""

    def __init__(self, *, field: str, value: Any, message: str, fix: str) -> None:
        super().__init__(message)
        self.field, self.value, self.message, self.fix = field, value, message, fix

    def problem(self, line: int) -> Problem:
        return Problem(field=f"line {line}: {self.field}", value=self.value, message=self.message, fix=self.fix)


class Skip(Exception):
    """A well-formed row that is no request to size for (a failed request, a prompt given as text)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def abbreviated(number: int) -> str:
    """A big whole number as 3 digits and a power of ten (one past a float's range too), not 300 digits."""
    digits = str(abs(number))
    if len(digits) <= 3:
        return str(number)
    return f"{'-' if number < 0 else ''}{digits[0]}.{digits[1:3]}e+{len(digits) - 1:02d}"


def count(value: Any, *, field: str, fix: str) -> int:
    """A token count: a whole number (an integral JSON float too, as pydantic's lax int does), not a bool, >= 0."""
    if value is None:
        raise BadRow(field=field, value=value, message="is missing", fix=fix)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(field=field, value=value, message="is not a whole number", fix=fix)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise BadRow(field=field, value=value, message="is not a whole number", fix=fix)
        value = int(value)
    whole = int(value)
    if whole < 0:
        raise BadRow(field=field, value=whole, message="is negative", fix=fix)
    if whole > MAX_TOKENS:
        raise BadRow(field=field, value=abbreviated(whole), message=f"is over {MAX_TOKENS:,} tokens, longer than any "
                     "model's context", fix=fix)
    return whole


def instant(value: Any, *, field: str, fix: str) -> int | float:
    """A finite number (an arrival time in the format's unit); NaN, infinities, bools and text are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRow(field=field, value=value, message="is not a finite number", fix=fix)
    number: int | float = value
    try:
        finite = math.isfinite(number)
    except OverflowError:  # an int past a float's range: no time a float can hold
        finite = False
    if not finite:
        raise BadRow(field=field, value=abbreviated(number) if isinstance(number, int) else number,
                     message="is not a finite number", fix=fix)
    return number


# A format's row parser: one line of text -> its arrival (in the format's unit) and request.
Parser = Callable[[str], "tuple[int | float, Row]"]
