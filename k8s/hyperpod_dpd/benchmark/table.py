"""Aligned plain-text columns: the first left-aligned, the rest right-aligned (they are numbers)."""

from __future__ import annotations

from collections.abc import Sequence


def render_columns(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        first, *rest = cells
        return "  ".join([f"{first:<{widths[0]}}", *(f"{cell:>{w}}" for cell, w in zip(rest, widths[1:],
                                                                                       strict=True))]).rstrip()

    return "\n".join([line(headers), *(line(row) for row in rows)])


def milliseconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"
