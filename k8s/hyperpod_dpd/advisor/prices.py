"""The price of a node for the advisor: the user's rate, else the shipped table's (``contracts.prices``).

Every table figure carries its kind (SageMaker ``ml.*`` rate, EC2 list price, derived), source, region and
date, and every result that shows dollars prints them; ``--price-per-node-hour`` replaces the table.
"""

from __future__ import annotations

from hyperpod_dpd.contracts.prices import PRICE_FILE, NodePrice, price_table, table_price, user_price
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.instances import InstanceType

Price = NodePrice

__all__ = ["PRICE_FILE", "Price", "node_price", "price_table"]


def node_price(instance_type: InstanceType, *, override: float | None = None) -> Price | None:
    """The user's rate when given, else the table's; ``None`` when the table has no figure for the type."""
    if override is None:
        return table_price(instance_type.facts.name)
    try:
        return user_price(override)
    except ValueError:
        raise SpecError([Problem(field="price_per_node_hour", value=override, message="must be a positive number "
                                 "of US dollars", fix="give e.g. --price-per-node-hour 63.30")],
                        source="the traffic") from None
