"""What a node costs per hour: the shipped price table (``data/node-prices.json``), each figure with its kind.

AWS publishes no HyperPod ``ml.*`` per-hour table that could be checked, so every figure says what it is:
``sagemaker-ml`` (a published SageMaker ``ml.*`` on-demand rate), ``ec2-list`` (the EC2 list price of the
same hardware, not the SageMaker rate) or ``derived``, with its source, region and date. Every shipped figure is
on the SageMaker basis (a type without a published SageMaker rate is its EC2 price at the published SageMaker
ratio, labelled ``derived``), so a comparison across GPUs compares like with like. A type with no
sourced figure has none; ``--price-per-node-hour`` (the advisor's) replaces the table for the user's rate.
``plan`` and ``validate`` print :func:`node_cost` first; the advisor prices its layouts with :func:`table_price`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec.endpoint import NodeUsage
from hyperpod_dpd.spec.instances import InstanceType

PRICE_FILE = "node-prices.json"
KINDS = ("sagemaker-ml", "ec2-list", "derived", "user")
USER_KIND_LABEL = "your rate"


@dataclass(frozen=True, kw_only=True)
class NodePrice:
    """USD per node-hour of one instance type, what kind of figure it is, and where it comes from."""

    usd_per_node_hour: float
    kind: str
    source: str
    region: str = ""
    date: str = ""

    @property
    def kind_label(self) -> str:
        return USER_KIND_LABEL if self.kind == "user" else str(price_table()["kinds"][self.kind])

    def provenance(self) -> str:
        """``EC2 list price, not the SageMaker rate, us-east-1, 2026-08-06: <source>`` in one line."""
        where = ", ".join(part for part in (self.region, self.date) if part)
        return f"{self.kind_label}{', ' + where if where else ''}: {self.source}"

    def describe(self) -> str:
        return f"${self.usd_per_node_hour:,.2f} per node-hour ({self.provenance()})"

    def to_json(self) -> dict[str, Any]:
        return {"usd_per_node_hour": self.usd_per_node_hour, "kind": self.kind, "kind_label": self.kind_label,
                "source": self.source, "region": self.region, "date": self.date}


@cache
def price_table() -> dict[str, Any]:
    text = resources.files("hyperpod_dpd.data").joinpath(PRICE_FILE).read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def table_price(instance_type: str) -> NodePrice | None:
    """The table's figure for ``instance_type`` (e.g. ``ml.p5.48xlarge``), or ``None`` when it has none."""
    entry = price_table()["prices"].get(instance_type)
    if entry is None:
        return None
    return NodePrice(usd_per_node_hour=float(entry["usd_per_node_hour"]), kind=str(entry["kind"]),
                     source=str(entry["source"]), region=str(entry["region"]), date=str(entry["date"]))


def unpriced_reason(instance_type: str) -> str:
    reason = price_table()["unpriced"].get(instance_type)
    return str(reason) if reason else "not in the price table"


@dataclass(frozen=True, kw_only=True)
class NodeCost:
    """The nodes a spec's stack creates for its endpoint (per role), and what they cost per hour."""

    usage: NodeUsage
    price: NodePrice | None

    @property
    def usd_per_hour(self) -> float | None:
        return None if self.price is None else self.usage.nodes * self.price.usd_per_node_hour

    def lines(self) -> list[str]:
        """``nodes: prefill 1 x ml.p5.48xlarge, decode 1 x ml.p5.48xlarge = 2 nodes`` and the dollars."""
        name = self.usage.instance_type.facts.name
        roles = ", ".join(f"{r.role} {r.nodes} x {name}" for r in self.usage.roles)
        first = f"nodes: {roles} = {self.usage.nodes} node{'s' * (self.usage.nodes != 1)}"
        if self.price is None:
            return [first, f"cost: no price for {name} ({unpriced_reason(name)}); "
                           "--price-per-node-hour USD takes your rate"]
        return [first, f"cost: ${self.usd_per_hour:,.2f}/hour = {self.usage.nodes} x {self.price.describe()}",
                "  plus EKS, NAT and the system nodes; the GPU nodes bill from cluster creation, weight staging "
                "included"]

    def to_json(self) -> dict[str, Any]:
        return {"instance_type": self.usage.instance_type.facts.name, "nodes": self.usage.nodes,
                "nodes_per_role": {r.role: r.nodes for r in self.usage.roles},
                "usd_per_hour": self.usd_per_hour, "price": None if self.price is None else self.price.to_json(),
                **({"unpriced": unpriced_reason(self.usage.instance_type.facts.name)} if self.price is None else {})}


def user_price(usd_per_node_hour: float) -> NodePrice:
    """The user's own rate (``--price-per-node-hour``); ``ValueError`` unless a positive, finite number."""
    if isinstance(usd_per_node_hour, bool) or not math.isfinite(usd_per_node_hour) or usd_per_node_hour <= 0:
        raise ValueError(f"{usd_per_node_hour!r} is not a positive number of US dollars")
    return NodePrice(usd_per_node_hour=float(usd_per_node_hour), kind="user", source="--price-per-node-hour")


def node_cost(usage: NodeUsage, *, override: float | None = None) -> NodeCost:
    """The nodes of ``usage`` at the user's rate when given, else at the table's figure (or none)."""
    price = user_price(override) if override is not None else table_price(usage.instance_type.facts.name)
    return NodeCost(usage=usage, price=price)


def node_price(instance_type: InstanceType, *, override: float | None = None) -> NodePrice | None:
    """The user's rate when given, else the table's; ``None`` when the table has no figure for the type."""
    if override is None:
        return table_price(instance_type.facts.name)
    try:
        return user_price(override)
    except ValueError:
        raise SpecError([Problem(field="price_per_node_hour", value=override, message="must be a positive number "
                                 "of US dollars", fix="give e.g. --price-per-node-hour 63.30")],
                        source="the traffic") from None
