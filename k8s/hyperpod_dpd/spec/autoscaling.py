"""Per-role autoscaling through the operator's KEDA integration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from hyperpod_dpd.spec._frozen import Frozen


class MetricType(Enum):
    """How KEDA compares the metric with the target: per replica (``Average``) or in total (``Value``)."""

    AVERAGE = "Average"
    VALUE = "Value"


@dataclass(frozen=True, kw_only=True)
class CloudWatchTrigger(Frozen):
    """Scale on a CloudWatch metric (for example the router's request count)."""

    KIND: ClassVar[str] = "cloudwatch"
    name: str
    namespace: str
    metric_name: str
    target_value: float
    statistic: str = "Average"
    metric_type: MetricType = MetricType.AVERAGE
    dimensions: Mapping[str, str] = field(default_factory=dict)
    period_seconds: int = 300
    min_value: float = 0.0


@dataclass(frozen=True, kw_only=True)
class PrometheusTrigger(Frozen):
    """Scale on a PromQL query against an Amazon Managed Prometheus workspace."""

    KIND: ClassVar[str] = "prometheus"
    name: str
    server_address: str
    query: str
    target_value: float
    metric_type: MetricType = MetricType.AVERAGE


Trigger = CloudWatchTrigger | PrometheusTrigger


# The output length SLO autoscaling sizes the decoder for when the spec gives none: the length `advise` and
# the docs' examples use (--osl 256), a chat answer.
DEFAULT_SLO_OUTPUT_TOKENS = 256
# The share of one replica's SLO capacity each trigger targets. The HPA leaves the replicas alone while the
# metric is within its tolerance of the target (0.1 by default, --horizontal-pod-autoscaler-tolerance;
# kubernetes pkg/controller/podautoscaler/replica_calculator.go GetExternalPerPodMetricReplicas), so a
# target of capacity / 1.1 keeps every replica at or below its capacity before the HPA acts: 0.9.
DEFAULT_SLO_UTILISATION = 0.9


@dataclass(frozen=True, kw_only=True)
class SloScaling(Frozen):
    """Scale the role on its latency SLO: ``slo: true`` takes every default.

    The compiler (:mod:`hyperpod_dpd.scaling`) turns it into KEDA triggers: the role's demand in tokens per
    second over what one replica serves within the spec's ``slo:`` target (the advisor computes it for the
    exact layout, or it is pinned here), with a queue floor and an SLO-ratio floor beside it.

    :param input_tokens: the prompt length the capacity is computed for: the typical one, from a trace or bench.
        :default: - prefill: the lower capacity of the routing threshold (at least 1,024 tokens) and the
        longest prompt max_model_len allows; decode: the routing threshold
    :param output_tokens: the output length the decode capacity is computed for. :default: 256
    :param capacity_tokens_per_s: one replica's computed prompt tokens (prefill) or output tokens (decode) per
        second at the SLO, at most 1e7. :default: - computed by the advisor at synth time (``hyperpod-dpd plan``
        prints it)
    :param utilisation: the share of that capacity each replica is driven to before KEDA adds one.
        :default: 0.9 (the HPA's 10% tolerance then still acts at or below capacity)
    :param max_nodes: a node budget for this role: caps max_replicas at the pods these nodes hold.
        :default: - no node budget
    :param max_usd_per_hour: a dollar budget for this role's nodes at the shipped price table's rate
        (``plan`` prints it): caps max_replicas the same way. :default: - no dollar budget
    :param start_up_seconds: how long a new replica takes to serve (weights loaded, engine warmed), from which
        the stabilisation windows are chosen. :default: - an estimate: the model's weight bytes at 0.25 GB/s
        plus 60 s of engine warm-up, from one AWS figure (Llama 3.3 70B takes 5-10 minutes from a cold S3 fetch)
    """

    SHORTHAND: ClassVar[bool] = True
    input_tokens: int | None = None
    output_tokens: int = DEFAULT_SLO_OUTPUT_TOKENS
    capacity_tokens_per_s: float | None = None
    utilisation: float = DEFAULT_SLO_UTILISATION
    max_nodes: int | None = None
    max_usd_per_hour: float | None = None
    start_up_seconds: float | None = None


@dataclass(frozen=True, kw_only=True)
class AutoscalingSpec(Frozen):
    """Bounds and triggers for one role.

    :param min_replicas: :default: 1
    :param max_replicas: :default: 5
    :param polling_interval_seconds: :default: 30
    :param cooldown_seconds: :default: 300
    :param triggers: KEDA triggers written out. With ``slo`` they are appended after the compiled ones
        (the HPA takes the largest replica count any trigger asks for). :default: - none
    :param slo: compile this role's triggers from the spec's ``slo:`` targets (``slo: true`` or a mapping of
        options). :default: - none (the triggers as written)
    """

    min_replicas: int = 1
    max_replicas: int = 5
    polling_interval_seconds: int = 30
    cooldown_seconds: int = 300
    triggers: tuple[Trigger, ...] = ()
    slo: SloScaling | None = None
