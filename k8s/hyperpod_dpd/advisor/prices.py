"""The on-demand price of a node, from the shipped price table (``data/node-prices.json``) or the user.

The table names its source, region and date; every result that shows dollars prints them, and
``--price-per-node-hour`` replaces the table for the user's own rate (region, discount, savings plan).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.instances import InstanceType

PRICE_FILE = "node-prices.json"


@dataclass(frozen=True, kw_only=True)
class Price:
    """USD per node-hour of one instance type, and where the figure comes from."""

    usd_per_node_hour: float
    source: str

    def describe(self) -> str:
        return f"${self.usd_per_node_hour:,.2f} per node-hour ({self.source})"


@cache
def price_table() -> dict[str, Any]:
    text = resources.files("hyperpod_dpd.data").joinpath(PRICE_FILE).read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def node_price(instance_type: InstanceType, *, override: float | None = None) -> Price | None:
    """The user's rate when given, else the table's; ``None`` when the table has no figure for the type."""
    if override is not None:
        if isinstance(override, bool) or not math.isfinite(override) or override <= 0:
            raise SpecError([Problem(field="price_per_node_hour", value=override, message="must be a positive "
                                     "number of US dollars", fix="give e.g. --price-per-node-hour 55.04")],
                            source="the traffic")
        return Price(usd_per_node_hour=float(override), source="--price-per-node-hour")
    table = price_table()
    figure = table["usd_per_node_hour"].get(instance_type.facts.name)
    if figure is None:
        return None
    return Price(usd_per_node_hour=float(figure),
                 source=f"{table['source']}, compiled {table['retrieved']}")
