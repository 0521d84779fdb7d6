"""How the benchmark reports format milliseconds and relative changes."""

from __future__ import annotations


def milliseconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"
