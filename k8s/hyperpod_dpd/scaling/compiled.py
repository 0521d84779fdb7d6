"""What SLO autoscaling compiles a role into: the values the operator's KEDA ScaledObject gets, and why.

The chart renders these into ``pdSpec.autoScalingSpec``; the autoscaling emulator plays the same values
through its model of KEDA and the HPA, so what is proven before purchase is what is deployed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hyperpod_dpd.spec.autoscaling import MetricType


class Signal(Enum):
    """What a compiled trigger's query measures (the emulator computes the same quantity from its model)."""

    # Tokens per second the role must process: prompt tokens the prefillers compute (every cached token left
    # out, vLLM's local_compute count), or output tokens the decoders generate.
    # An ``Average`` target of one replica's capacity at the SLO.
    DEMAND = "demand"
    # Requests waiting per replica (vllm:num_requests_waiting): a floor when demand under-reads a burst.
    QUEUE = "queue"
    # The observed latency over its SLO target (p90 TTFT or TPOT / target): a ``Value`` floor at 1.
    SLO_RATIO = "slo_ratio"


class DecodeBound(Enum):
    """What holds one decoder's batch at its capacity: past it, what goes wrong differs, and so does the cure."""

    # A larger batch's step would miss the TPOT target.
    TPOT = "tpot"
    # decode.max_num_seqs: the step is still within TPOT; more requests wait (TTFT grows), TPOT does not.
    MAX_NUM_SEQS = "max_num_seqs"
    # The KV cache holds no more sequences of the request shape: more requests wait, as above.
    KV_ROOM = "kv_room"


@dataclass(frozen=True, kw_only=True)
class RoleCapacity:
    """What one replica of a role sustains while meeting the SLO.

    :param tokens_per_s: prompt tokens per second (prefill) or output tokens per second (decode).
    :param source: how it was obtained (the advisor and its versions, a calibration, or the spec's pin).
    :param bound: decode only: what holds the batch there. :default: - unknown (pinned, or prefill)
    """

    tokens_per_s: float
    source: str
    bound: DecodeBound | None = None


@dataclass(frozen=True, kw_only=True)
class CompiledTrigger:
    """One KEDA Prometheus trigger.

    :param fallback: what ``query`` returns when its series are absent (KEDA reads an empty result as 0, which
        over an ``Average`` target asks for the minimum, so every compiled query ends in an ``or`` that yields
        this instead).
    """

    name: str
    signal: Signal
    query: str
    target: float
    metric_type: MetricType
    fallback: float


@dataclass(frozen=True, kw_only=True)
class CompiledScaling:
    """A role's compiled autoscaling, as rendered and as emulated.

    :param start_up_s: how long a new replica takes to serve (weights loaded, warmed), from which the
        stabilisation windows were chosen.
    :param initial_cooldown_s: one start-up, what KEDA's ``initialCooldownPeriod`` would be. Not rendered: KEDA
        reads it only when scaling to zero, which ``min_replicas >= 1`` rules out (advisor/emulator/keda.py).
    :param notes: what the compiler decided and why (printed by ``plan`` and ``advise --autoscale``).
    """

    role: str
    min_replicas: int
    max_replicas: int
    polling_interval_s: int
    cooldown_s: int
    initial_cooldown_s: int
    scale_up_stabilisation_s: int
    scale_down_stabilisation_s: int
    start_up_s: float
    capacity: RoleCapacity
    triggers: tuple[CompiledTrigger, ...]
    notes: tuple[str, ...] = ()
