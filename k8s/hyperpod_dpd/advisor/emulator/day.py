"""The emulated day: per-step series and what they add up to (SLO attainment, replica-hours, dollars)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


def _round(value: float | None, digits: int) -> float | None:
    """JSON has no NaN or infinity: a figure a layout with no capacity does not have is ``null``."""
    return None if value is None or not math.isfinite(value) else round(value, digits)


@dataclass(frozen=True, kw_only=True)
class RoleDay:
    """One role over the day.

    :param ready: replicas serving during each step.
    :param desired: what the HPA wrote at the end of each step (the fixed count when not autoscaled).
    :param replica_hours: pod-hours, starting pods included (they hold their GPUs while loading).
    :param node_hours: whole nodes those pods occupy, hour by hour.
    :param provisioned_nodes: nodes the stack creates for the role (for ``max_replicas``: KEDA adds pods,
        not HyperPod nodes), which are billed whether pods run on them or not.
    :param usd: ``node_hours`` at the node price; ``None`` without a price.
    :param provisioned_usd: ``provisioned_nodes`` for the whole trace at the node price.
    """

    role: str
    autoscaled: bool
    ready: tuple[int, ...]
    desired: tuple[int, ...]
    replica_hours: float
    node_hours: float
    provisioned_nodes: int
    usd: float | None
    provisioned_usd: float | None

    @property
    def peak_replicas(self) -> int:
        return max(self.desired, default=0)

    def to_json(self) -> dict[str, object]:
        return {"role": self.role, "autoscaled": self.autoscaled, "peak_replicas": self.peak_replicas,
                "replica_hours": round(self.replica_hours, 3), "node_hours": round(self.node_hours, 3),
                "provisioned_nodes": self.provisioned_nodes, "usd": _round(self.usd, 2),
                "provisioned_usd": _round(self.provisioned_usd, 2), "ready": list(self.ready),
                "desired": list(self.desired)}


@dataclass(frozen=True, kw_only=True)
class EmulatedDay:
    """A trace played through KEDA, the HPA and the queueing model, step by step.

    Latencies are per step: the 90th percentile TTFT (the queueing model's, plus the 90th percentile wait
    behind any backlog) and TPOT of the requests arriving in it. Attainment is what ``slo.objective`` holds
    to: :attr:`ttft_attainment` the share of requests whose TTFT is within ``slo.ttft_ms`` (each step's
    requests read from the curve's TTFT distribution, shifted by their wait behind a backlog), and
    :attr:`tpot_attainment` the share of output tokens whose request's TPOT is within ``slo.tpot_ms``;
    ``None`` without that target. :attr:`slo_attainment` is the lower of the two.

    :param times_s: each step's start, from the trace's first request.
    :param tpot_s: each step's mean TPOT (``advise`` reports the mean).
    :param queue: requests waiting at each step's end (backlog plus the model's queue, by Little's law).
    :param layouts: the prefill x decode replica counts whose latency curves were simulated.
    """

    source: str
    step_s: float
    times_s: tuple[float, ...]
    arrivals_per_s: tuple[float, ...]
    ttft_p90_s: tuple[float, ...]
    tpot_p90_s: tuple[float, ...]
    tpot_s: tuple[float, ...]
    queue: tuple[float, ...]
    roles: Mapping[str, RoleDay]
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_attainment: float | None
    ttft_attainment: float | None
    tpot_attainment: float | None
    requests: int
    routed_share: float
    cached_share: float
    layouts: tuple[tuple[int, int], ...]
    latency_source: str
    price: str | None
    notes: tuple[str, ...] = field(default=())

    def _weighted_mean(self, series: tuple[float, ...]) -> float:
        weights = [a * self.step_s for a in self.arrivals_per_s]
        total = sum(weights)
        return sum(w * v for w, v in zip(weights, series, strict=True)) / total if total else math.nan

    @property
    def mean_ttft_p90_s(self) -> float:
        """The steps' p90 TTFT, weighted by their arrivals."""
        return self._weighted_mean(self.ttft_p90_s)

    @property
    def mean_tpot_p90_s(self) -> float:
        """The steps' p90 TPOT, weighted by their arrivals."""
        return self._weighted_mean(self.tpot_p90_s)

    @property
    def mean_tpot_s(self) -> float:
        """The steps' mean TPOT, weighted by their arrivals."""
        return self._weighted_mean(self.tpot_s)

    @property
    def usd(self) -> float | None:
        """What the pods' nodes cost over the trace, both roles; ``None`` without a price."""
        found = [role.usd for role in self.roles.values()]
        return None if any(v is None for v in found) else sum(v for v in found if v is not None)

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source, "step_s": self.step_s, "requests": self.requests,
            "routed_share": round(self.routed_share, 4), "cached_share": round(self.cached_share, 4),
            "slo": {"ttft_s": self.slo_ttft_s, "tpot_s": self.slo_tpot_s},
            "slo_attainment": _round(self.slo_attainment, 4), "ttft_attainment": _round(self.ttft_attainment, 4),
            "tpot_attainment": _round(self.tpot_attainment, 4),
            "mean_ttft_p90_s": _round(self.mean_ttft_p90_s, 4), "mean_tpot_p90_s": _round(self.mean_tpot_p90_s, 5),
            "usd": _round(self.usd, 2), "price": self.price, "latency": self.latency_source,
            "layouts": [list(layout) for layout in self.layouts],
            "roles": {name: role.to_json() for name, role in self.roles.items()},
            "series": {"time_s": list(self.times_s),
                       "arrivals_per_s": [round(v, 4) for v in self.arrivals_per_s],
                       "ttft_p90_s": [_round(v, 4) for v in self.ttft_p90_s],
                       "tpot_p90_s": [_round(v, 5) for v in self.tpot_p90_s],
                       "tpot_s": [_round(v, 5) for v in self.tpot_s],
                       "queue": [round(v, 2) for v in self.queue]},
            "notes": list(self.notes),
        }
