"""The argparse ``type=`` parsers the subcommands share: numbers, counts, durations and KEY=VALUE lists.

Each raises :class:`argparse.ArgumentTypeError`, so argparse prints ``argument --flag: <message>`` and
exits 2, the status of every usage error.
"""

from __future__ import annotations

import argparse
import math

from hyperpod_dpd.contracts.aws_names import REGION_NAME
from hyperpod_dpd.contracts.linux import path_error


def _of(unit: str) -> str:
    return f" of {unit}s" if unit else ""


def whole(text: str, *, unit: str = "") -> int:
    """``text`` as an int. :param unit: what it counts, named in the message. :default: - none"""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number{_of(unit)}") from None


def number(text: str, *, unit: str = "") -> float:
    """``text`` as a float. :param unit: what it measures, named in the message. :default: - none"""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number{_of(unit)}") from None


def wholes(text: str) -> tuple[int, ...]:
    """``N[,N...]``: one whole number or several, comma-separated."""
    return tuple(whole(part.strip()) for part in text.split(","))


def positive(text: str) -> int:
    """A count of at least 1."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def instances(text: str) -> int:
    """A count of instances, at least 1 (worded as preflight always printed it)."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def tokens(text: str) -> int:
    """A count of tokens, at least 1."""
    value = whole(text, unit="token")
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 token")
    return value


def seconds(text: str) -> float:
    """A duration in seconds, more than 0 and finite (a wait of ``inf`` would never end)."""
    value = number(text, unit="second")
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds, more than 0 (got {text})")
    return value


def pairs(text: str) -> dict[str, str]:
    """``K=V[,K=V]`` as a mapping (an empty value is kept; an item without ``=`` or a key is refused)."""
    found: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{item!r} is not KEY=VALUE")
        found[key] = value
    return found


def path(text: str) -> str:
    """A file or folder name any Linux call can take (``-`` too: standard input or output)."""
    problem = path_error(text)
    if problem:
        shown = repr(text) if len(text) <= 60 else repr(text[:57]) + "..."
        raise argparse.ArgumentTypeError(f"{shown} {problem}; give a shorter path without NUL bytes")
    return text


def region(text: str) -> str:
    """An AWS region code such as ``us-west-2``, refused here rather than by boto3 halfway through a command."""
    if not REGION_NAME.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an AWS region name; give e.g. us-west-2")
    return text
