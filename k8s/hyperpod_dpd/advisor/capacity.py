"""One replica's capacity at the SLO, for the exact layout, and ``resolve(spec)`` that pins it in the spec.

Prefill: the highest prompt-token rate one prefiller serves with p90 TTFT within ``slo.ttft_ms``. One
prefiller is one lane of the advisor's queueing model (:func:`~hyperpod_dpd.advisor.queueing.open_loop`,
Poisson arrivals, prompts served one at a time in FCFS order, the same model ``advise`` uses), its p90 TTFT
counting the queue, the prefill, the KV transfer at line rate and the decoder's first step at its SLO batch:
the TTFT budget is left for those by simulating them, not by a guessed margin. Poisson arrivals rather than
Dynamo's deterministic ``1 / wall_time`` leave the headroom a bursty minute needs; the rate is found by
bisection, so the result is the model's own p90, deterministic by its seed. It is found at each of
the role's :attr:`~hyperpod_dpd.scaling.shape.RoleShape.prompt_lengths` and the lowest in tokens per second is
the capacity.

Decode: Dynamo Planner's law (peers-2026 §2.1): the largest batch ``B <= min(max_num_seqs, KV room)``
whose decode step stays within ``slo.tpot_ms``; one decoder then generates ``B / step(B)`` tokens per second.
It assumes pure decode steps: the prompts below ``routing.threshold`` that the decoder prefills itself take
step time this does not count, while their output tokens are in the demand, so with many short prompts the
capacity is overstated by about the share of decode time their prefills take; the queue and SLO-ratio
floors then add what demand alone misses.
"""

from __future__ import annotations

import dataclasses
import math

from hyperpod_dpd.advisor import estimates, queueing
from hyperpod_dpd.advisor.comparison import kv_room
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import AdvisorUnavailable, Estimator
from hyperpod_dpd.advisor.steps import PhaseFactors, StepTimes
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.errors import Problem, SpecError, install_extra
from hyperpod_dpd.planner import plan
from hyperpod_dpd.scaling.compiled import DecodeBound, RoleCapacity
from hyperpod_dpd.scaling.compiler import capacity_field
from hyperpod_dpd.scaling.shape import RoleShape, pin_capacities, role_shape, unpinned_roles
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.validation import check

# Bisection steps over (0, 1 / prefill time): 2^-10 (0.1%) of the lane's service rate, below the simulation's own
# run-to-run spread between seeds; each step simulates OPEN_LOOP_REQUESTS arrivals (about 0.1 s).
BISECTION_STEPS = 10
# The lowest share of the lane's service rate tried: at it the queue is empty, so a p90 above the target there
# means a lone prompt already misses it.
IDLE_SHARE = 1e-3
# Requests simulated per bisection step: the advisor's own open-loop horizon.
REQUESTS = queueing.OPEN_LOOP_REQUESTS


@dataclasses.dataclass(frozen=True, kw_only=True)
class DecodeBatch:
    """The decode batch at the SLO: ``batch`` sequences at ``step_s`` per step, out of ``limit`` possible."""

    batch: int
    step_s: float
    limit: int
    # What ``limit`` is: max_num_seqs or the KV room, whichever is smaller (max_num_seqs on a tie).
    limited_by: DecodeBound

    @property
    def bound(self) -> DecodeBound:
        """What holds the batch: the TPOT target below the limit, else what the limit is."""
        return self.limited_by if self.batch == self.limit else DecodeBound.TPOT

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.step_s


def _estimator(spec: DpdSpec, shape: RoleShape, factors: PhaseFactors | None) -> Estimator:
    architecture = check(spec).architecture
    if architecture is None:  # check() resolves one whenever the spec names a known model
        raise SpecError([Problem(field="model.architecture", value=spec.model.name, message="is unknown",
                                 fix="set model.architecture to a preset")])
    return Estimator(target_for(spec.instance_type, architecture), architecture, isl=shape.isl, osl=shape.osl,
                     gpus_per_node=spec.instance_type.facts.gpus, engine=engine_settings(spec), factors=factors)


def decode_batch(spec: DpdSpec, steps: StepTimes, factors: PhaseFactors, *, tpot_s: float,
                 shape: RoleShape) -> DecodeBatch:
    """The largest batch within the KV room and ``max_num_seqs`` whose corrected step is within ``tpot_s``."""
    isl, osl = shape.isl, shape.osl
    room = kv_room(plan(spec, prompt_tokens=isl).decode.kv_cache_tokens, isl + osl)
    seqs = spec.decode.max_num_seqs or DEFAULT_MAX_NUM_SEQS["decode"]
    limit, limited_by = (seqs, DecodeBound.MAX_NUM_SEQS) if seqs <= room else (room, DecodeBound.KV_ROOM)

    def step(batch: int) -> float:
        return factors.decode * steps.decode_step_s(batch)

    if step(1) > tpot_s:
        one = step(1) * 1000
        raise SpecError([Problem(field="slo.tpot_ms", value=round(tpot_s * 1000, 3),
                                 message=f"is below one decode step at batch 1 ({one:.1f} ms by the advisor): no "
                                         "decoder meets it",
                                 fix=f"raise slo.tpot_ms above {math.ceil(one)}, or raise tensor_parallel_size")])
    low, high = 1, limit  # step() grows with the batch: the largest batch within the target, by bisection
    while low < high:
        middle = (low + high + 1) // 2
        if step(middle) <= tpot_s:
            low = middle
        else:
            high = middle - 1
    return DecodeBatch(batch=low, step_s=step(low), limit=limit, limited_by=limited_by)


def _prefill_p90(stations: queueing.Stations, rate: float, lane_rate: float) -> float:
    outcome = queueing.open_loop(stations, osl=2, rate=rate, capacity_per_s=lane_rate, requests=REQUESTS)
    return math.inf if outcome.saturated else outcome.ttft_p90_s


def prefill_rate(spec: DpdSpec, steps: StepTimes, factors: PhaseFactors, *, shape: RoleShape,
                 first_step_s: float) -> float:
    """Prompts per second one prefiller serves with the simulated p90 TTFT within the shape's TTFT target.

    The prompts are ``shape.isl`` long; the fix for a target no prefiller meets depends on whether that length
    is the spec's ``input_tokens`` (:attr:`~hyperpod_dpd.scaling.shape.RoleShape.given_input`).
    """
    isl, ttft_s = shape.isl, shape.target_s
    service = factors.prefill * steps.prefill_s(isl)
    transfer = plan(spec, prompt_tokens=isl).request.transfer_seconds_at_line_rate
    # One prefill lane; the decoder is never the bottleneck here (its slots are unbounded), it adds its first step.
    stations = queueing.Stations(prefill_lanes=1, decoders=1, slots=1 << 30, prefill_s=lambda _load: service,
                                 tpot_s=lambda _batch: first_step_s, handoff_s=transfer, overhead_s=factors.overhead_s)
    lane_rate = 1 / service
    idle = _prefill_p90(stations, IDLE_SHARE * lane_rate, lane_rate)
    if idle > ttft_s:
        # Not "lower routing.threshold": that moves no prompt off the prefiller, it only models a shorter one.
        longest = "" if shape.given_input else (", lower max_model_len (the longest prompt a prefiller is given; "
                                    f"{isl} tokens leave room for the output)")
        raise SpecError([Problem(field="slo.ttft_ms", value=round(ttft_s * 1000, 3),
                                 message=f"is below one {isl}-token prompt's TTFT on an idle prefiller "
                                         f"({idle * 1000:,.0f} ms by the advisor: prefill, KV transfer and the first "
                                         "decode step)",
                                 fix=f"raise slo.ttft_ms above {math.ceil(idle * 1000)}{longest}, or raise "
                                     "tensor_parallel_size")])
    low, high = IDLE_SHARE * lane_rate, lane_rate
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        if _prefill_p90(stations, middle, lane_rate) <= ttft_s:
            low = middle
        else:
            high = middle
    return low


def _source(estimator: Estimator, what: str, *, tp: int) -> str:
    found = estimates.versions(estimator.target)
    backend = found["backend"].split(" (")[0]
    return (f"advisor on aiconfigurator {found['aiconfigurator']} ({found['system']}, {backend}, TP{tp}): {what}; "
            f"{estimator.factors.source}")


def role_capacity(spec: DpdSpec, role: str, *, factors: PhaseFactors | None = None) -> RoleCapacity:
    """One replica's prompt (prefill) or output (decode) tokens per second at the role's SLO target.

    ``factors`` are calibrated phase corrections (``advisor.calibration.calibrate(...).factors``); without
    them AIConfigurator's own. Raises :class:`AdvisorUnavailable` without the ``advisor`` extra and
    :class:`SpecError` when no replica meets the target.
    """
    shape = role_shape(spec, role)
    target_s = shape.target_s
    if role == "decode":
        estimator = _estimator(spec, shape, factors)
        steps = estimator.steps(spec.tensor_parallel_size)
        batch = decode_batch(spec, steps, estimator.factors, tpot_s=target_s, shape=shape)
        held = {DecodeBound.TPOT: "held by TPOT", DecodeBound.MAX_NUM_SEQS: "held by max_num_seqs",
                DecodeBound.KV_ROOM: "held by the KV room"}[batch.bound]
        what = (f"batch {batch.batch} of {batch.limit} ({held}) at {batch.step_s * 1000:.2f} ms per step within "
                f"TPOT {target_s * 1000:g} ms, {shape.isl}/{shape.osl} tokens; pure decode steps (the short prompts a "
                "decoder prefills itself are not counted)")
        return RoleCapacity(tokens_per_s=batch.tokens_per_s, bound=batch.bound,
                            source=_source(estimator, what, tp=spec.tensor_parallel_size))
    lengths = shape.prompt_lengths
    found = [_prefill_capacity(spec, shape.at_prompt(isl), factors) for isl in lengths]
    estimator, rate, isl = min(found, key=lambda f: (f[1] * f[2], f[2]))
    over = "" if len(lengths) == 1 else (f", the lowest in tokens/s over prompts of "
                                         f"{' and '.join(str(n) for n in lengths)} tokens")
    what = (f"{rate:.3g} prompts/s of {isl} tokens with p90 TTFT within {target_s * 1000:g} ms on one prefill lane "
            f"(Poisson arrivals; KV transfer and the first decode step included){over}")
    return RoleCapacity(tokens_per_s=rate * isl,
                        source=_source(estimator, what, tp=spec.tensor_parallel_size))


def _prefill_capacity(spec: DpdSpec, shape: RoleShape,
                      factors: PhaseFactors | None) -> tuple[Estimator, float, int]:
    """``(estimator, prompts per second, prompt tokens)`` of one prefiller at ``shape.isl``."""
    estimator = _estimator(spec, shape, factors)
    steps = estimator.steps(spec.tensor_parallel_size)
    tpot_s = spec.slo.tpot_ms / 1000 if spec.slo is not None and spec.slo.tpot_ms is not None else None
    first = (decode_batch(spec, steps, estimator.factors, tpot_s=tpot_s, shape=shape).step_s if tpot_s is not None
             else estimator.factors.decode * steps.decode_step_s(1))
    rate = prefill_rate(spec, steps, estimator.factors, shape=shape, first_step_s=first)
    return estimator, rate, shape.isl


def capacities(spec: DpdSpec, *, factors: PhaseFactors | None = None) -> dict[str, RoleCapacity]:
    """The capacity of every SLO-scaled role that does not pin one, by role name."""
    found = {}
    for role in unpinned_roles(spec):
        try:
            found[role] = role_capacity(spec, role, factors=factors)
        except AdvisorUnavailable:
            raise SpecError([needs_advisor(role)]) from None
    return found


def needs_advisor(role: str) -> Problem:
    return Problem(field=capacity_field(role), value=None,
                   message=f"needs the advisor extra to compute ({estimates.EXTRA}: NVIDIA AIConfigurator is not "
                           "installed)",
                   fix=f"{install_extra(estimates.EXTRA)}, or pin it (hyperpod-dpd plan prints it where "
                       "the extra is installed)")


def resolve(spec: DpdSpec, *, factors: PhaseFactors | None = None) -> DpdSpec:
    """``spec`` with every SLO-scaled role's capacity pinned, so the charts render from the spec alone.

    A spec without SLO autoscaling, or whose capacities are all pinned, comes back as it is (AIConfigurator is
    not imported then). Raises :class:`SpecError` naming ``<role>.autoscaling.slo.capacity_tokens_per_s``
    when the ``advisor`` extra is missing.
    """
    found = capacities(spec, factors=factors)
    return pin_capacities(spec, {role: round(c.tokens_per_s, 1) for role, c in found.items()})
