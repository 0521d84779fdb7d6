"""The price of a node for the advisor: the user's rate, else the shipped table's (``contracts.prices``).

Every table figure carries its kind (SageMaker ``ml.*`` rate, EC2 list price, derived), source, region and
date, and every result that shows dollars prints them; ``--price-per-node-hour`` replaces the table.
"""

from __future__ import annotations

from hyperpod_dpd.contracts.prices import PRICE_FILE, NodePrice, node_price, price_table

Price = NodePrice

__all__ = ["PRICE_FILE", "Price", "node_price", "price_table"]
