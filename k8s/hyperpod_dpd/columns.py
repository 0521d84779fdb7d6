"""Aligned plain-text columns for the terminal, and how reports format milliseconds and relative changes."""

from __future__ import annotations

from collections.abc import Sequence


def render_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], *, indent: str = "",
                   rule: bool = False) -> list[str]:
    """The header line, a dashed rule under it when ``rule``, then one line per row, each after ``indent``."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        return (indent + "  ".join([f"{first:<{widths[0]}}", *(f"{cell:>{w}}" for cell, w in zip(
            rest, widths[1:], strict=True))])).rstrip()

    dashes = [indent + "-" * (sum(widths) + 2 * (len(widths) - 1))] if rule else []
    return [line(headers), *dashes, *(line(row) for row in rows)]


def ms(seconds: float | None, *, digits: int = 1, missing: str = "-") -> str:
    """Seconds as milliseconds, thousands separated, to ``digits`` decimals; ``missing`` for no value."""
    return missing if seconds is None else f"{seconds * 1e3:,.{digits}f}"


DECIMALS = {"s": 2, "USD/Mtok": 3}  # by unit; a value in ms is seconds printed by ms(), any other unit to 1 decimal


def by_unit(value: float | None, unit: str, *, named: bool = False) -> str:
    """``value`` to its unit's decimals (``ms``: from seconds), ``-`` for no value; ``named`` writes the unit after."""
    if value is None:
        return "-"
    text = ms(value) if unit == "ms" else f"{value:,.{DECIMALS.get(unit, 1)}f}"
    return f"{text} {unit}" if named and unit else text


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"
