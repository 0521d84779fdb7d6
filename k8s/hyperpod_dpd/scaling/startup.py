"""How long a new replica takes to serve, and the KEDA/HPA windows chosen from it.

A replica that took minutes to load its weights must not be dropped on a dip that lasts less than it
takes to get it back, and one that is needed should be asked for at once, since it serves only after its
start-up anyway.
"""

from __future__ import annotations

import math

from hyperpod_dpd.planner import plan
from hyperpod_dpd.spec import DpdSpec, SloScaling

# An ESTIMATE from one data point, not a measurement: AWS's HyperPod inference troubleshooting page says
# Llama 3.3 70B "takes 5-10 minutes from a cold S3 fetch" (weights and engine start together). Its BF16
# weights are 141 GB; the slow end (600 s) less WARM_UP_S below leaves 540 s, about 0.26 GB/s, rounded down
# to 0.25 GB/s. Planning at the slow end keeps a replica from being counted as serving before it does; a
# measured start-up belongs in autoscaling.slo.start_up_seconds.
LOAD_BYTES_PER_S = 0.25e9
# An ASSUMED engine start after the weights (KV cache profiling, and CUDA graph capture unless the engine
# runs eager), with no source of its own: it only splits AWS's 600 s above into load and warm-up, so the
# estimate for other model sizes scales the load part alone. AWS's blog runs its prefiller with
# --enforce-eager (no graph capture), which makes a minute generous there.
WARM_UP_S = 60.0
# The HPA refuses a stabilisation window above one hour (kubernetes release-1.27
# pkg/apis/autoscaling/validation/validation.go, MaxStabilizationWindowSeconds = 3600), so the compiler never
# renders more.
MAX_STABILISATION_S = 3600
# The HPA's own scale-down window (horizontal.go, --horizontal-pod-autoscaler-downscale-stabilization
# default 5m), and the bundled CRD's scaleDownStabilizationTime default: never go below it.
MIN_SCALE_DOWN_S = 300
# Scale-up is not delayed: a replica asked for late serves a start-up later still (the HPA's and the CRD's
# scale-up default is 0 too).
SCALE_UP_STABILISATION_S = 0
# A scale-down must wait out this many start-ups: removing a replica pays only when the dip outlasts the
# time to bring the replica back, and a dip as long as one start-up is common (traffic swings by the minute).
SCALE_DOWN_START_UPS = 2


def start_up_seconds(spec: DpdSpec, slo: SloScaling) -> float:
    """``slo.start_up_seconds``, else an estimate: the weights at :data:`LOAD_BYTES_PER_S` plus :data:`WARM_UP_S`."""
    if slo.start_up_seconds is not None:
        return float(slo.start_up_seconds)
    return plan(spec).weights_bytes / LOAD_BYTES_PER_S + WARM_UP_S


def scale_down_stabilisation(start_up_s: float) -> int:
    """Twice the start-up, rounded up to a minute, within [300 s, 3600 s]."""
    minutes = math.ceil(SCALE_DOWN_START_UPS * start_up_s / 60)
    return min(MAX_STABILISATION_S, max(MIN_SCALE_DOWN_S, minutes * 60))


def initial_cooldown(start_up_s: float) -> int:
    """One start-up, what KEDA's ``initialCooldownPeriod`` would be; not rendered.

    KEDA reads ``initialCooldownPeriod`` (and ``cooldownPeriod``) only when it scales a target to zero
    (kedacore/keda@8b4f083c pkg/scaling/executor/scale_scaledobjects.go:95-101 and :187-213), and SLO
    autoscaling keeps ``min_replicas >= 1``, so it would change nothing.
    """
    return math.ceil(start_up_s)
