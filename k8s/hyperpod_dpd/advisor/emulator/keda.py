"""What KEDA puts between a Prometheus trigger and the HPA, read from ``kedacore/keda@8b4f083c`` (2026-08-20).

- Metric types (``pkg/scalers/scaler.go:101-111`` ``GetMetricTargetType``): KEDA hands the HPA an external
  metric whose target is ``AverageValue`` or ``Value``, as the trigger says; HyperPod's CRD spells them
  ``Average`` and ``Value`` (``data/inferenceendpointconfig-v1.json``), and that the operator maps
  ``Average`` to ``AverageValue`` is inferred from the name, not verified in its code.
- Empty results (``pkg/scalers/prometheus_scaler.go:56`` ``ignoreNullValues`` defaults to true; ``:267-283``
  and ``:298-302``): no series, an empty value list, NaN or Inf all read **0**, not an error. The
  compiled queries end in ``or vector(fallback)``, so the emulator reads the fallback when the
  series it models would be absent (no requests in the window).
- Polling (``pkg/scaling/scale_handler.go:454-482`` ``checkScalers`` stores each poll's records;
  ``:774-781`` ``GetScaledObjectMetrics`` serves the HPA from them when ``useCachedMetrics``, which the
  HyperPod CRD defaults to true): the HPA sees a value refreshed every ``pollingInterval``, however often it syncs.
- Cooldowns (``pkg/scaling/executor/scale_scaledobjects.go:95-101`` and ``:187-213``): ``cooldownPeriod``
  and ``initialCooldownPeriod`` only gate scaling **to zero** (``minReplicaCount`` 0); between 1 and the
  maximum the HPA alone decides, so with ``min_replicas >= 1`` they change nothing here.
- ``controllers/keda/hpa.go:161`` and ``apis/keda/v1alpha1/scaledobject_types.go:303-309``: the HPA's
  ``minReplicas`` is ``minReplicaCount`` when positive, else 1.
"""

from __future__ import annotations

import math
import re

from hyperpod_dpd.advisor.emulator.hpa import TargetType
from hyperpod_dpd.spec.autoscaling import MetricType

# The range PromQL's rate() most often uses when a query names none the emulator can read.
DEFAULT_WINDOW_S = 60.0
# PromQL durations (prometheus/common model/time.go ParseDuration): units in falling order, each at most once,
# ``ms`` below ``s``; a year is 365 days. A range ``[5m]`` or a subquery ``[5m:30s]`` (its range, then its step).
_UNIT_S = {"y": 365 * 86400.0, "w": 7 * 86400.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_DURATION = "".join(f"(?:(\\d+){unit})?" for unit in ("y", "w", "d", "h", "m(?!s)", "s", "ms"))
_RANGE = re.compile(rf"\[({_DURATION})(?::[^\]]*)?\]")
_PART = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")


def target_type(metric_type: MetricType) -> TargetType:
    """The HPA target a HyperPod trigger's ``metricType`` becomes."""
    return TargetType.AVERAGE_VALUE if metric_type is MetricType.AVERAGE else TargetType.VALUE


def read_value(value: float | None) -> float:
    """What KEDA's Prometheus scaler reports for a query result (``ignoreNullValues`` true): absent, NaN or
    infinite is 0."""
    if value is None or math.isnan(value) or math.isinf(value):
        return 0.0
    return value


def window_s(query: str) -> float:
    """The longest range selector in ``query`` (``[1m]`` -> 60, ``[1m30s]`` -> 90, ``[5m:30s]`` -> 300), which the
    emulator averages over; :data:`DEFAULT_WINDOW_S` when it has none. A zero range reads 0 (PromQL refuses it)."""
    found = [sum(int(amount) * _UNIT_S[unit] for amount, unit in _PART.findall(match.group(1)))
             for match in _RANGE.finditer(query) if match.group(1)]
    return max(found) if found else DEFAULT_WINDOW_S


def hpa_min_replicas(min_replica_count: int) -> int:
    """The HPA's ``minReplicas`` for a ScaledObject's ``minReplicaCount``."""
    return min_replica_count if min_replica_count > 0 else 1
