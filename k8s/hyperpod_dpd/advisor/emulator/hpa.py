"""The Horizontal Pod Autoscaler's control law, as the Kubernetes controller computes it, without a cluster.

Read from the controller's source, ``kubernetes/kubernetes`` master as of 2026 (the stored snapshot is
the fork ``adrianmoisey/kubernetes@786f7bb4``; the upstream snapshot was too large to fetch, so rules are
cited by function rather than line), files under ``pkg/controller/podautoscaler/``:

- ``horizontal.go`` ``computeReplicasForMetrics``: the desired count is the **maximum** over the metrics.
- ``horizontal.go`` ``reconcileAutoscaler``: ``currentReplicas`` is the scale target's ``spec.replicas``
  (pods asked for, started or not); above ``maxReplicas`` or below ``minReplicas`` it is clamped without
  reading metrics.
- ``replica_calculator.go`` ``GetExternalPerPodMetricReplicas`` (an ``AverageValue`` target): with
  ``statusReplicas`` pods, the usage ratio is ``total / (target x statusReplicas)``; inside the tolerance
  the count stays ``statusReplicas``, else it is ``ceil(total / target)``.
- ``replica_calculator.go`` ``GetExternalMetricReplicas`` -> ``getUsageRatioReplicaCount`` (a ``Value``
  target): the ratio is ``metric / target``; inside the tolerance the count stays ``spec.replicas``, else
  ``ceil(ratio x readyReplicas)``, and ``ceil(ratio)`` from zero. Upstream counts the ready pods itself
  (``getReadyPodsCount``: pods matching the selector that are ``Running`` with condition ``Ready`` true; the
  fork above reads ``scale.status.readyReplicas`` instead); either way a pod still loading weights does not
  count, which is the emulator's ``ready``.
- ``replica_calculator.go`` ``Tolerances.isWithin``: ``1 - 0.1 <= ratio <= 1 + 0.1``; the 0.1 is
  ``config/v1alpha1/defaults.go`` ``HorizontalPodAutoscalerTolerance`` (``kubernetes/kubernetes@85643c0f``).
- ``horizontal.go`` ``stabilizeRecommendationWithBehaviors``: the raw recommendation of every sync is
  kept; the result is ``currentReplicas`` raised to the **minimum** of the recommendations inside the
  scale-up window and lowered to the **maximum** of those inside the scale-down window.
- ``horizontal.go`` ``convertDesiredReplicasWithBehaviorRate`` with ``calculateScaleUpLimitWithScalingRules``
  and ``calculateScaleDownLimitWithBehaviors``: each policy allows a change from the replicas at the start
  of its period (``current - added + removed`` within ``periodSeconds``): ``Pods`` adds or removes
  ``value``, ``Percent`` multiplies by ``1 +- value/100`` (rounded up when adding, truncated when
  removing); ``selectPolicy: Max`` takes the policy that allows the most change; then ``max``/``min``.
- ``pkg/apis/autoscaling/v2/defaults.go`` (``kubernetes/kubernetes@a689afaa``): scale up at most
  ``max(4 pods, 100 %)`` per 15 s with no stabilisation; scale down 100 % per 15 s with the controller's
  downscale window, ``config/v1alpha1/defaults.go``: 5 min. The sync period there is 15 s.

KEDA always gives the HPA a ``behavior`` when the operator sets stabilisation times, so only the
``WithBehaviors`` path is modelled; that HyperPod's operator renders ``scaleUp/DownStabilizationTime`` into
``advanced.horizontalPodAutoscalerConfig.behavior`` is inferred (its code is not public), not verified.
The metric arrives in milli-units (KEDA ``GenerateMetricInMili``), which is ignored here: it moves a
ratio by at most 1e-3 / target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

# kube-controller-manager defaults (pkg/controller/podautoscaler/config/v1alpha1/defaults.go).
SYNC_PERIOD_S = 15.0
TOLERANCE = 0.1
DOWNSCALE_STABILISATION_S = 300.0


class PolicyKind(Enum):
    """How a scaling policy bounds a change: whole pods, or a share of the pods at the period's start."""

    PODS = "Pods"
    PERCENT = "Percent"


@dataclass(frozen=True, kw_only=True)
class ScalingPolicy:
    """``behavior.scale{Up,Down}.policies[]``: at most ``value`` pods or percent per ``period_s``."""

    kind: PolicyKind
    value: int
    period_s: float


@dataclass(frozen=True, kw_only=True)
class ScalingRules:
    """One direction's ``behavior``: its stabilisation window and its policies (``selectPolicy: Max``)."""

    stabilisation_s: float
    policies: tuple[ScalingPolicy, ...]


# pkg/apis/autoscaling/v2/defaults.go: defaultHPAScaleUpRules and defaultHPAScaleDownRules.
DEFAULT_SCALE_UP = ScalingRules(stabilisation_s=0.0, policies=(
    ScalingPolicy(kind=PolicyKind.PODS, value=4, period_s=15.0),
    ScalingPolicy(kind=PolicyKind.PERCENT, value=100, period_s=15.0)))
DEFAULT_SCALE_DOWN = ScalingRules(stabilisation_s=DOWNSCALE_STABILISATION_S, policies=(
    ScalingPolicy(kind=PolicyKind.PERCENT, value=100, period_s=15.0),))


@dataclass(frozen=True, kw_only=True)
class Behaviour:
    """The HPA's ``behavior`` and tolerance. :default: Kubernetes' own defaults."""

    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN
    tolerance: float = TOLERANCE


class TargetType(Enum):
    """The HPA's external-metric target: per pod (``AverageValue``) or in total (``Value``)."""

    AVERAGE_VALUE = "AverageValue"
    VALUE = "Value"


@dataclass(frozen=True, kw_only=True)
class MetricSample:
    """What one external metric reads now, against its target."""

    value: float
    target: float
    target_type: TargetType


def _within(ratio: float, tolerance: float) -> bool:
    return 1.0 - tolerance <= ratio <= 1.0 + tolerance


def replicas_for_metric(sample: MetricSample, *, spec_replicas: int, status_replicas: int, ready_replicas: int,
                        tolerance: float = TOLERANCE) -> int:
    """The count one metric asks for (``GetExternalPerPodMetricReplicas`` / ``GetExternalMetricReplicas``)."""
    if sample.target_type is TargetType.AVERAGE_VALUE:
        if status_replicas > 0 and _within(sample.value / (sample.target * status_replicas), tolerance):
            return status_replicas
        return math.ceil(sample.value / sample.target)
    ratio = sample.value / sample.target
    if spec_replicas == 0:
        return math.ceil(ratio)
    if _within(ratio, tolerance):
        return spec_replicas
    return math.ceil(ratio * ready_replicas)


@dataclass
class Hpa:
    """One HPA's memory between syncs: its raw recommendations and its recent scale events.

    :param min_replicas: ``spec.minReplicas`` (KEDA's ``minReplicaCount``, at least 1 for the HPA).
    :param max_replicas: ``spec.maxReplicas``.
    """

    min_replicas: int
    max_replicas: int
    behaviour: Behaviour = field(default_factory=Behaviour)
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_up_events: list[tuple[float, int]] = field(default_factory=list)
    scale_down_events: list[tuple[float, int]] = field(default_factory=list)

    def sync(self, *, now: float, samples: Sequence[MetricSample], spec_replicas: int, status_replicas: int,
             ready_replicas: int) -> int:
        """One ``reconcileAutoscaler``: the replicas the HPA writes to the scale target at ``now``."""
        if not self.recommendations:  # recordInitialRecommendation
            self.recommendations.append((now, spec_replicas))
        if spec_replicas == 0:
            return 0  # "scaling is disabled since the replica count of the target is zero"
        if spec_replicas > self.max_replicas:
            desired = self.max_replicas
        elif spec_replicas < self.min_replicas:
            desired = self.min_replicas
        elif not samples:
            return spec_replicas
        else:
            wanted = max(replicas_for_metric(s, spec_replicas=spec_replicas, status_replicas=status_replicas,
                                             ready_replicas=ready_replicas, tolerance=self.behaviour.tolerance)
                         for s in samples)
            desired = self._rate_limited(now, self._stabilised(now, wanted, spec_replicas), spec_replicas)
        if desired > spec_replicas:
            self.scale_up_events.append((now, desired - spec_replicas))
        elif desired < spec_replicas:
            self.scale_down_events.append((now, spec_replicas - desired))
        # horizontal.go markScaleEventsOutdated: an event older than its direction's longest policy period no
        # longer limits a change, so it is dropped (upstream reuses its slot), keeping a day's memory bounded
        self.scale_up_events = self._recent(self.scale_up_events, now, self.behaviour.scale_up)
        self.scale_down_events = self._recent(self.scale_down_events, now, self.behaviour.scale_down)
        return desired

    @staticmethod
    def _recent(events: list[tuple[float, int]], now: float, rules: ScalingRules) -> list[tuple[float, int]]:
        longest = max((policy.period_s for policy in rules.policies), default=0.0)
        return [(when, change) for when, change in events if when > now - longest]

    def _stabilised(self, now: float, wanted: int, current: int) -> int:
        up_cutoff = now - self.behaviour.scale_up.stabilisation_s
        down_cutoff = now - self.behaviour.scale_down.stabilisation_s
        up, down = wanted, wanted
        for when, recommendation in self.recommendations:
            if when > up_cutoff:
                up = min(up, recommendation)
            if when > down_cutoff:
                down = max(down, recommendation)
        oldest = min(up_cutoff, down_cutoff)
        self.recommendations = [(w, r) for w, r in self.recommendations if w >= oldest]
        self.recommendations.append((now, wanted))
        return min(max(current, up), down)

    def _changed_within(self, events: list[tuple[float, int]], now: float, period_s: float) -> int:
        return sum(change for when, change in events if when > now - period_s)

    def _rate_limited(self, now: float, desired: int, current: int) -> int:
        if desired > current:
            proposals = []
            for policy in self.behaviour.scale_up.policies:
                start = (current - self._changed_within(self.scale_up_events, now, policy.period_s)
                         + self._changed_within(self.scale_down_events, now, policy.period_s))
                proposals.append(start + policy.value if policy.kind is PolicyKind.PODS
                                 else math.ceil(start * (1 + policy.value / 100)))
            limit = max(max(proposals, default=current), current)
            return min(desired, self.max_replicas, limit)
        if desired < current:
            proposals = []
            for policy in self.behaviour.scale_down.policies:
                start = (current - self._changed_within(self.scale_up_events, now, policy.period_s)
                         + self._changed_within(self.scale_down_events, now, policy.period_s))
                proposals.append(start - policy.value if policy.kind is PolicyKind.PODS
                                 else int(start * (1 - policy.value / 100)))
            limit = min(min(proposals, default=current), current)
            return max(desired, self.min_replicas, limit)
        return desired
