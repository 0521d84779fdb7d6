"""Value objects for sizes and Kubernetes quantities, so no bare integer is ever a unit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

# The Kubernetes resource.Quantity grammar (apimachinery), as the CRD schemas spell it.
QUANTITY_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_UNIT = r"([KMGTPE]i?B?|B)"
SIZE_PATTERN = re.compile(rf"^\s*{_NUMBER}\s*{_UNIT}?\s*$")
# The same with the unit required, as the spec file needs it (a JSON Schema ``pattern``).
SIZE_WITH_UNIT = rf"^\s*{_NUMBER}\s*{_UNIT}\s*$"


@dataclass(frozen=True, order=True)
class ByteSize:
    """A number of bytes, written as ``8Gi``/``8GiB``/``8GB`` in a spec and compared exactly."""

    bytes: int

    @classmethod
    def gibibytes(cls, amount: float) -> ByteSize:
        return cls(int(amount * 2**30))

    @classmethod
    def mebibytes(cls, amount: float) -> ByteSize:
        return cls(int(amount * 2**20))

    @classmethod
    def parse(cls, text: str) -> ByteSize:
        """Parse ``8Gi``, ``8GiB``, ``512Mi``, ``16GB`` or ``1024B``; a bare number is refused."""
        match = SIZE_PATTERN.match(text)
        if not match or match.group(2) is None:
            raise ValueError(f"{text!r} is not a size; write it with a unit, e.g. '8Gi' or '512Mi'")
        number, unit = Decimal(match.group(1)), match.group(2).removesuffix("B")
        if unit in _BINARY:
            factor = Decimal(_BINARY[unit])
        elif unit in ("", ):
            factor = Decimal(1)
        else:
            factor = _DECIMAL[unit]
        value = number * factor
        if value != value.to_integral_value():
            raise ValueError(f"{text!r} is not a whole number of bytes")
        return cls(int(value))

    def __str__(self) -> str:
        for unit in ("Ti", "Gi", "Mi", "Ki"):
            factor = _BINARY[unit]
            if self.bytes and self.bytes % factor == 0:
                return f"{self.bytes // factor}{unit}"
        return f"{self.bytes}B"

    @property
    def gib(self) -> float:
        return self.bytes / 2**30


def format_bytes(value: float) -> str:
    """A byte count for people, in binary units: ``137438953472`` -> ``128.0 GiB``, ``512`` -> ``512 B``."""
    for unit, factor in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= factor:
            return f"{value / factor:.1f} {unit}"
    return f"{int(value)} B"


def parse_quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity (``96``, ``1500m``, ``1024Gi``); ``ValueError`` if malformed."""
    if not QUANTITY_PATTERN.match(text):
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    match = re.match(r"^([+-]?[0-9.]+)(.*)$", text)
    if match is None:  # pragma: no cover - the pattern above guarantees a number
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as err:
        raise ValueError(f"{text!r} is not a Kubernetes quantity") from err
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return Decimal(text)  # exponent form such as 1e3
