"""``compile_role(spec, role)``: a role's ``autoscaling.slo`` as the KEDA triggers, bounds and windows it renders to.

The control law is Dynamo Planner's throughput law (peers-2026 §2.1) in KEDA's terms. KEDA hands each
trigger to the HPA as an external metric: ``metricType: Average`` becomes an ``AverageValue`` target
(kedacore/keda pkg/scalers/scaler.go ``GetMetricTargetType``, ``GetMetricTarget``), for which the HPA asks
for ``ceil(sum of the metric / target)`` replicas once ``sum / (target x replicas)`` leaves its tolerance
(kubernetes v1.28 pkg/controller/podautoscaler/replica_calculator.go ``GetExternalPerPodMetricReplicas``,
read in the kevinhehc/k8s-1.28@f0212864 mirror). So a query that returns the role's *total* demand in tokens
per second, over a target of what one replica serves at the SLO, asks for exactly the replicas the demand
needs. ``metricType: Value`` is ``GetExternalMetricReplicas`` (same file): ``ceil(ready pods x metric /
target)``, a proportional step, which suits the SLO-ratio floor (p90 over target, target 1: twice the
target asks for twice the pods; below the target it asks for fewer, which the max below ignores). The HPA
takes the largest count any trigger asks for (horizontal.go ``computeReplicasForMetrics``), so the floors
only ever add replicas.
"""

from __future__ import annotations

import math

from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.planner import plan
from hyperpod_dpd.scaling import queries, startup
from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, DecodeBound, RoleCapacity, Signal
from hyperpod_dpd.scaling.shape import role_shape, role_spec, scaled_roles
from hyperpod_dpd.spec import DpdSpec, MetricType
from hyperpod_dpd.spec.architecture import preset_for_model_name
from hyperpod_dpd.validation.slo_scaling import budget_replicas

# Without a TTFT target the decode queue floor counts the requests a decoder completes in this long: the TTFT
# target the advisor's own messages suggest (advisor/traffic.py, "--ttft-ms 2000"), a wait a chat user notices.
DEFAULT_QUEUE_WINDOW_S = 2.0
PINNED_SOURCE = "pinned in the spec (autoscaling.slo.capacity_tokens_per_s)"


def capacity_field(role: str) -> str:
    return f"{role}.autoscaling.slo.capacity_tokens_per_s"


def unresolved(role: str) -> Problem:
    return Problem(field=capacity_field(role), value=None,
                   message="is not set, and the charts render from the spec alone: one replica's capacity at the "
                           "SLO must be computed before rendering",
                   fix="synthesize with hyperpod-dpd synth or the CDK app (they compute it with the advisor), "
                       "or pin it (hyperpod-dpd plan prints it)")


def compile_role(spec: DpdSpec, role: str, *, capacity: RoleCapacity | None = None) -> CompiledScaling:
    """The role's compiled autoscaling. ``capacity`` overrides the spec's pin (with its provenance).

    Raises :class:`SpecError` when the role has no ``autoscaling.slo``, its SLO target is missing, or its
    capacity is neither given nor pinned.
    """
    sizing = role_shape(spec, role)
    scaling, slo, target_s, lengths = sizing.scaling, sizing.slo, sizing.target_s, sizing.prompt_lengths
    if capacity is None:
        if slo.capacity_tokens_per_s is None:
            raise SpecError([unresolved(role)])
        capacity = RoleCapacity(tokens_per_s=slo.capacity_tokens_per_s, source=PINNED_SOURCE)
    notes: list[str] = []
    # Whole tokens per second: the fallback (a whole multiple of it) then asks for exactly the planned replicas.
    per_replica = float(max(1, math.floor(capacity.tokens_per_s * slo.utilisation)))
    unit = "computed prompt tokens/s" if role == "prefill" else "output tokens/s"
    shape = (f"{sizing.isl}/{sizing.osl} tokens" if role == "decode"
             else f"{lengths[0]}-token prompts" if len(lengths) == 1
             else f"prompts of {lengths[0]} to {lengths[-1]} tokens (the lower end's or the upper end's capacity, "
                  "whichever is lower)")
    notes.append(f"demand target {per_replica:,.0f} {unit} per replica: {slo.utilisation:g} of the "
                 f"{capacity.tokens_per_s:,.0f} one replica serves within "
                 f"{'TTFT' if role == 'prefill' else 'TPOT'} {target_s * 1000:g} ms at {shape}; "
                 f"capacity {capacity.source}")

    maximum = scaling.max_replicas
    budget, binding = budget_replicas(spec, role, slo)
    if budget is not None and budget < maximum:
        notes.append(f"max_replicas {maximum} capped at {budget} by {binding}")
        maximum = budget
    if role == "decode" and maximum > DECODE_DEPLOYMENTS:
        notes.append(decode_cap_note(spec, maximum, capacity=capacity, per_replica=per_replica))
        maximum = DECODE_DEPLOYMENTS
    minimum = min(scaling.min_replicas, maximum)
    planned = min(maximum, max(minimum, role_spec(spec, role).replicas, 1))

    start_up_s = startup.start_up_seconds(spec, slo)
    down = startup.scale_down_stabilisation(start_up_s)
    how = ("given" if slo.start_up_seconds is not None else
           f"an estimate: the weights at {startup.LOAD_BYTES_PER_S / 1e9:g} GB/s plus {startup.WARM_UP_S:g} s, from "
           "one AWS figure, Llama 3.3 70B in 5-10 minutes from a cold S3 fetch; give start_up_seconds as measured")
    notes.append(f"start-up {start_up_s:,.0f} s ({how}): scale-down waits {down} s, scale-up "
                 f"{startup.SCALE_UP_STABILISATION_S} s")
    notes.append(f"while the demand series are absent the triggers hold {planned} replica(s)")

    window_s = target_s if role == "prefill" else (
        spec.slo.ttft_ms / 1000 if spec.slo is not None and spec.slo.ttft_ms is not None else DEFAULT_QUEUE_WINDOW_S)
    # The longest prompt the capacity was computed at: a queue of those is the most work per waiting request,
    # so the floor holds the SLO whatever lengths arrive. Sized from the shortest it let a queue of long prompts
    # hold several times the TTFT target in work (16k-token prompts: about 7 s against 2 s); a burst of short
    # ones now adds a replica early, which is the cheaper error (synth, which sees only the pinned number,
    # renders the same target).
    per_request = lengths[-1] if role == "prefill" else sizing.osl
    # Requests one replica clears within the window at its capacity: more waiting per replica misses the SLO.
    queue_target = max(1, math.floor(capacity.tokens_per_s * window_s / per_request))
    if role == "prefill":
        notes.append(f"queue floor: {queue_target} waiting per replica, the {lengths[-1]:,}-token prompts one "
                     f"replica clears within TTFT {target_s * 1000:g} ms")
    ratio_target_s = prefill_share_s(spec, target_s=target_s, longest=lengths[-1]) if role == "prefill" else target_s
    if ratio_target_s != target_s:
        notes.append(f"SLO-ratio floor: the prefiller's own p90 TTFT over {ratio_target_s * 1000:,.0f} ms, the TTFT "
                     "target less what the prefiller does not control (the KV transfer of the longest prompt at "
                     "line rate and the decoder's first step at its TPOT target)")
    triggers = (
        CompiledTrigger(name=f"{role}-slo-demand", signal=Signal.DEMAND, target=per_replica,
                        query=queries.demand(spec, role, fallback=per_replica * planned),
                        metric_type=MetricType.AVERAGE, fallback=per_replica * planned),
        CompiledTrigger(name=f"{role}-slo-queue", signal=Signal.QUEUE, target=float(queue_target),
                        query=queries.queue(spec, role), metric_type=MetricType.AVERAGE, fallback=0.0),
        CompiledTrigger(name=f"{role}-slo-ratio", signal=Signal.SLO_RATIO, target=1.0,
                        query=queries.slo_ratio(spec, role, target_s=ratio_target_s), metric_type=MetricType.VALUE,
                        fallback=0.0),
    )
    return CompiledScaling(
        role=role, min_replicas=minimum, max_replicas=maximum, polling_interval_s=scaling.polling_interval_seconds,
        cooldown_s=scaling.cooldown_seconds, initial_cooldown_s=startup.initial_cooldown(start_up_s),
        scale_up_stabilisation_s=startup.SCALE_UP_STABILISATION_S, scale_down_stabilisation_s=down,
        start_up_s=start_up_s, capacity=capacity, triggers=triggers, notes=tuple(notes))


# The prefiller's share of the TTFT target is never taken below this share of it: a target that transfer and
# decode alone nearly fill is an SLO the layout cannot meet, which check() reports; the floor stays usable.
MIN_PREFILL_SHARE = 0.5


def prefill_share_s(spec: DpdSpec, *, target_s: float, longest: int) -> float:
    """The part of the end-to-end TTFT target the prefiller's own TTFT (queue and prefill) may take.

    The router's TTFT is the prefiller's plus the KV transfer and the decoder's first step; the prefiller's
    histogram holds only its part, so its SLO-ratio floor divides by the target less the other two: the
    transfer of the longest prompt at the node's EFA line rate (the planner) and one decode step at the decode
    TPOT target (the decoder is scaled to hold it; 0 without one). A model the planner cannot size (no
    architecture, no preset: its capacities are pinned by hand) has no transfer estimate; only the step is taken.
    """
    sizable = spec.model.architecture is not None or preset_for_model_name(spec.model.name) is not None
    transfer_s = plan(spec, prompt_tokens=longest).request.transfer_seconds_at_line_rate if sizable else 0.0
    first_step_s = spec.slo.tpot_ms / 1000 if spec.slo is not None and spec.slo.tpot_ms is not None else 0.0
    # Whole milliseconds: the query then reads as written (1.937, not 1.9367879...).
    return round(max(MIN_PREFILL_SHARE * target_s, target_s - transfer_s - first_step_s), 3)


def decode_cap_note(spec: DpdSpec, wanted: int, *, capacity: RoleCapacity, per_replica: float) -> str:
    """What the compiler would do with more decode deployments, what goes wrong past one, and what to do instead.

    Past its capacity a decoder whose batch TPOT holds misses TPOT; one held by ``max_num_seqs`` or its KV room
    keeps its TPOT and queues the rest, so TTFT grows instead, and the cure differs.
    """
    cap = f"{capacity.tokens_per_s:,.0f}"
    seqs = spec.decode.max_num_seqs or DEFAULT_MAX_NUM_SEQS["decode"]
    past = {
        DecodeBound.TPOT: (f"above {cap} output tokens/s the one decoder misses its TPOT target (a larger batch's "
                           "step is slower than it)",
                           "a larger tensor_parallel_size (a faster decode step, so a larger batch fits the TPOT "
                           "target)"),
        DecodeBound.MAX_NUM_SEQS: (f"above {cap} output tokens/s requests queue on the one decoder: its batch is "
                                   f"held at decode.max_num_seqs {seqs} with the step within TPOT, so TPOT holds "
                                   "and TTFT grows",
                                   f"raise decode.max_num_seqs above {seqs} (the batch then grows up to the TPOT "
                                   "target or the KV room), a larger tensor_parallel_size"),
        DecodeBound.KV_ROOM: (f"above {cap} output tokens/s requests queue on the one decoder: its KV cache holds no "
                              "more sequences, with the step within TPOT, so TPOT holds and TTFT grows",
                              "FP8 KV cache or a larger tensor_parallel_size (more KV room)"),
    }
    what, cure = past[capacity.bound] if capacity.bound is not None else (
        f"above {cap} output tokens/s the one decoder falls behind (TPOT or, when its batch is full, TTFT grows)",
        "raise decode.max_num_seqs if the batch is full, a larger tensor_parallel_size")
    return (f"decode max_replicas {wanted} capped at {DECODE_DEPLOYMENTS}: the operator runs one decode deployment "
            "per endpoint (AWS's DPD docs and blog); the CRD accepts decodingSpec.replicas above 1 and AWS's "
            "troubleshooting page suggests raising it, but whether the router spreads decodes over several is "
            f"unverified. Uncapped, the triggers would ask for ceil(demand / {per_replica:,.0f}) decoders, up to "
            f"{wanted}; {what}. To serve more: {cure}, FP8 weights, or a second endpoint taking part of the "
            "traffic")


def compile_all(spec: DpdSpec, *, capacities: dict[str, RoleCapacity] | None = None) -> dict[str, CompiledScaling]:
    """Every SLO-scaled role's compiled autoscaling, by role name."""
    given = capacities or {}
    return {role: compile_role(spec, role, capacity=given.get(role)) for role in scaled_roles(spec)}
