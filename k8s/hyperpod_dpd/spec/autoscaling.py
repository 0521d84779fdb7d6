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
TRIGGERS: tuple[type[CloudWatchTrigger] | type[PrometheusTrigger], ...] = (CloudWatchTrigger, PrometheusTrigger)


@dataclass(frozen=True, kw_only=True)
class AutoscalingSpec(Frozen):
    """Bounds and triggers for one role.

    :param min_replicas: :default: 1
    :param max_replicas: :default: 5
    :param polling_interval_seconds: :default: 30
    :param cooldown_seconds: :default: 300
    """

    min_replicas: int = 1
    max_replicas: int = 5
    polling_interval_seconds: int = 30
    cooldown_seconds: int = 300
    triggers: tuple[Trigger, ...] = ()
