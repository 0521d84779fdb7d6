"""What each measured layout costs to run: its nodes, its GPUs and the price of a node-hour.

The DPD endpoint takes the nodes the stack creates for its roles (``DpdSpec.node_usage``, idle GPUs
included, as they are billed); the aggregated twin is one replica of ``tensor_parallel_size`` GPUs
(``charts/aggregated.py`` renders ``replicas: 1``) on the whole nodes it needs. The price is the
advisor's table (``data/node-prices.json``, each figure with its kind and source) or the user's rate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.contracts.prices import NodePrice, node_price, unpriced_reason
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.endpoint import NodeUsage, RoleUsage

SECONDS_PER_HOUR = 3600
MILLION = 1_000_000


@dataclass(frozen=True, kw_only=True)
class Layout:
    """One endpoint's nodes and GPUs (all provisioned ones count) and what a node-hour costs."""

    label: str
    usage: NodeUsage
    price: NodePrice | None
    note: str = ""  # where the layout differs from the spec's: the pods bench counted serving

    @property
    def gpus(self) -> int:
        return self.usage.gpus_provisioned

    @property
    def nodes(self) -> int:
        return self.usage.nodes

    def per_gpu(self, tokens_per_s: float) -> float:
        """Output tokens per second per provisioned GPU."""
        return tokens_per_s / self.gpus

    def per_node_hour(self, tokens_per_s: float) -> float:
        """Output tokens per node-hour."""
        return tokens_per_s * SECONDS_PER_HOUR / self.nodes

    def usd_per_million(self, tokens_per_s: float) -> float | None:
        """US dollars per million output tokens at this throughput; None without a price or a token."""
        if self.price is None or tokens_per_s <= 0:
            return None
        return self.nodes * self.price.usd_per_node_hour / (tokens_per_s * SECONDS_PER_HOUR) * MILLION

    def describe(self) -> str:
        name = self.usage.instance_type.api_name
        cost = (f"at {self.price.describe()}" if self.price is not None
                else f"no price for {name} ({unpriced_reason(name)}); --price-per-node-hour USD takes your rate")
        counted = f" ({self.note})" if self.note else ""
        return f"{self.label}: {self.nodes} x {name}, {self.gpus} GPUs{counted}, {cost}"

    def as_dict(self) -> dict[str, Any]:
        return {"label": self.label, "instance_type": self.usage.instance_type.api_name, "nodes": self.nodes,
                "gpus": self.gpus, "price": None if self.price is None else self.price.to_json()}


def layouts(spec: DpdSpec, *, price_per_node_hour: float | None = None) -> tuple[Layout, Layout]:
    """The DPD endpoint's layout and its aggregated twin's, priced alike.

    :param price_per_node_hour: the user's USD rate. :default: - the shipped table's figure, or none
    """
    price = node_price(spec.instance_type, override=price_per_node_hour)
    gpus = spec.tensor_parallel_size
    twin = NodeUsage(instance_type=spec.instance_type, roles=(RoleUsage(
        role="aggregated", pods=1, gpus_per_pod=gpus, nodes=math.ceil(gpus / spec.instance_type.facts.gpus)),))
    return (Layout(label="dpd", usage=spec.node_usage(), price=price),
            Layout(label="aggregated", usage=twin, price=price))


def served(layout: Layout, pods: Mapping[str, int]) -> Layout:
    """``layout`` with each role's pods as bench counted them serving (by role, ``prefill``/``decode``; a role
    not counted keeps the spec's), on the whole nodes those pods need: per-GPU and per-dollar figures divide
    by what ran, not by what the spec says (autoscaling or a ``kubectl scale`` changes it)."""
    gpus_per_node = layout.usage.instance_type.facts.gpus
    roles, changed = [], []
    for role in layout.usage.roles:
        count = pods.get(role.role, 0)
        if count <= 0 or count == role.pods:
            roles.append(role)
            continue
        per_node = dataclasses.replace(role, pods=count).pods_per_node(gpus_per_node)
        roles.append(dataclasses.replace(role, pods=count, nodes=math.ceil(count / per_node)))
        changed.append(f"{count} {role.role} pods served where the spec says {role.pods}")
    if not changed:
        return layout
    return dataclasses.replace(layout, usage=dataclasses.replace(layout.usage, roles=tuple(roles)),
                               note="; ".join(changed))
