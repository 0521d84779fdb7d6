"""``advise --trace`` and ``plan --trace``: a day of traffic sized per role, priced, and played through the layout.

Sizing (:func:`size_trace`): per window of the trace, the tokens per second each role must process (prompt
tokens reaching the prefillers less prefix-cache hits, output tokens of every request: the emulator's own
:func:`~hyperpod_dpd.advisor.emulator.workload.workload`, the quantities the compiled demand triggers read)
over the demand target of one replica (its capacity at the SLO times ``utilisation``, the compiled trigger's
target), rounded up: the replicas KEDA and the HPA would ask for. Proof (:func:`advise_trace`): the
emulator plays the trace through the layout the user wrote (every role fixed at its ``replicas``) and, with
``autoscale``, through the compiled SLO autoscaling; both share one latency model, so a layout's curves are
simulated once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.advisor.capacity import capacities
from hyperpod_dpd.advisor.emulator import EmulatedDay, emulate, queueing_latency
from hyperpod_dpd.advisor.emulator.hpa import SYNC_PERIOD_S
from hyperpod_dpd.advisor.emulator.workload import workload
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.contracts.operator import DECODE_DEPLOYMENTS
from hyperpod_dpd.contracts.prices import NodePrice, node_price
from hyperpod_dpd.contracts.router import PrefillRule
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.scaling import CompiledScaling, Signal, compile_all
from hyperpod_dpd.scaling.shape import ROLES, pod_nodes, role_shape, role_spec, scaled_roles
from hyperpod_dpd.spec import AutoscalingSpec, DpdSpec, SloScaling
from hyperpod_dpd.traces import DEFAULT_WINDOW_S, Trace, TraceSummary, summarise

DAY_S = 86_400.0
# What a spec without an AMP workspace is sized with: the workspace only names the triggers' server, not their
# targets or bounds, so the sizing is the same; synth still refuses the spec until the real one is written.
STAND_IN_WORKSPACE = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-stand-in"
# A trace whose routed prompts average more than this factor away from the capacity's prompt length is named:
# a prompt twice as long takes about twice the prefill time, so the TTFT at the same tokens/s differs.
SHAPE_GAP = 1.5
DEFAULT_SLO_NOTE = ("the spec has no SLO autoscaling: emulated with the compiled default (autoscaling: {{slo: true}} "
                    "on both roles, min_replicas 1, max_replicas {maximum})")


def with_slo_scaling(spec: DpdSpec, roles: tuple[str, ...] = ROLES) -> DpdSpec:
    """``spec`` with ``autoscaling.slo`` (every default, ``slo: true``) on each of ``roles`` that has none.

    A role's own bounds are kept; a role without autoscaling gets ``AutoscalingSpec``'s defaults, its
    ``max_replicas`` raised to its ``replicas`` if these are more. A spec without ``metrics.amp_workspace_url``
    gets :data:`STAND_IN_WORKSPACE`.
    """
    if spec.metrics.amp_workspace_url is None:
        spec = dataclasses.replace(spec, metrics=dataclasses.replace(spec.metrics,
                                                                     amp_workspace_url=STAND_IN_WORKSPACE))
    for role in roles:
        cfg = role_spec(spec, role)
        scaling = cfg.autoscaling
        if scaling is not None and scaling.slo is not None:
            continue
        if scaling is None:
            scaling = AutoscalingSpec(max_replicas=max(AutoscalingSpec.max_replicas, cfg.replicas))
        changed = dataclasses.replace(cfg, autoscaling=dataclasses.replace(scaling, slo=SloScaling()))
        spec = (dataclasses.replace(spec, prefill=changed) if role == "prefill"
                else dataclasses.replace(spec, decode=changed))
    return spec


@dataclass(frozen=True, kw_only=True)
class RoleNeed:
    """What one role needs over the trace, window by window.

    :param target_tokens_per_s: one replica's demand target (its capacity at the SLO times ``utilisation``).
    :param demand_tokens_per_s: the tokens per second the role must process in each window.
    :param needed: ``ceil(demand / target)`` per window, at least 1 (scaling to zero is not sized).
    :param node_hours: the whole nodes those replicas occupy, window by window, in node-hours over the trace.
    """

    role: str
    compiled: CompiledScaling
    target_tokens_per_s: float
    demand_tokens_per_s: tuple[float, ...]
    needed: tuple[int, ...]
    node_hours: float

    @property
    def min_replicas(self) -> int:
        return min(self.needed)

    @property
    def max_replicas(self) -> int:
        return max(self.needed)

    @property
    def over_operator_cap(self) -> bool:
        """Decode needs more decoders than the operator runs (one decode deployment per endpoint)."""
        return self.role == "decode" and self.max_replicas > DECODE_DEPLOYMENTS

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "capacity_tokens_per_s": round(self.compiled.capacity.tokens_per_s, 3),
                "capacity_source": self.compiled.capacity.source,
                "target_tokens_per_s": self.target_tokens_per_s, "min_replicas": self.min_replicas,
                "max_replicas": self.max_replicas, "over_operator_cap": self.over_operator_cap,
                "node_hours": round(self.node_hours, 3),
                "demand_tokens_per_s": [round(v, 3) for v in self.demand_tokens_per_s], "needed": list(self.needed)}


@dataclass(frozen=True, kw_only=True)
class TraceSizing:
    """A trace's summary and what each role needs over it, with what that costs per day.

    :param span_s: the windows' span (their count x ``window_s``): what a figure "per day" is scaled from.
    :param usd_per_day: the needed replicas' nodes, window by window, per day at the node price. None unpriced.
    :param fixed_usd_per_day: the layout the user wrote (every role at its ``replicas``) for a day.
    """

    summary: TraceSummary
    needs: Mapping[str, RoleNeed]
    span_s: float
    price: NodePrice | None
    usd_per_day: float | None
    fixed_nodes: int
    fixed_usd_per_day: float | None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"trace": self.summary.to_json(), "price": None if self.price is None else self.price.to_json(),
                "usd_per_day": _usd(self.usd_per_day), "fixed_nodes": self.fixed_nodes,
                "fixed_usd_per_day": _usd(self.fixed_usd_per_day),
                "roles": {name: need.to_json() for name, need in self.needs.items()}, "notes": list(self.notes)}


def _usd(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def per_day(value: float | None, span_s: float) -> float | None:
    """``value`` accrued over ``span_s`` seconds, scaled to a day."""
    return None if value is None else value * DAY_S / span_s


def _demand_target(compiled: CompiledScaling) -> float:
    return next(t.target for t in compiled.triggers if t.signal is Signal.DEMAND)


def size_trace(spec: DpdSpec, trace: Trace, *, window_s: float = DEFAULT_WINDOW_S,
               factors: PhaseFactors | None = None, price_per_node_hour: float | None = None) -> TraceSizing:
    """The replicas each role needs per window of ``trace``, at one replica's capacity at the spec's SLO.

    A role without ``autoscaling.slo`` is sized as ``slo: true`` would compile it. Raises :class:`SpecError`
    when the spec has no ``slo`` target for a role, when no replica meets it, or (naming the ``advisor``
    extra) when a capacity is neither pinned nor computable; :class:`UsageError` for a bad window or trace.
    """
    summary = summarise(trace, window_s=window_s, routing=PrefillRule(threshold=spec.routing.threshold))
    missing = [name for name in ("ttft_ms", "tpot_ms") if spec.slo is None or getattr(spec.slo, name) is None]
    if missing:
        raise SpecError([Problem(field=f"slo.{name}", value=None, message="is not set: a trace is sized and emulated "
                                 "against the spec's latency targets", fix="add slo: {ttft_ms: 2000, tpot_ms: 50} "
                                 "(your targets)") for name in missing])
    sized_spec = with_slo_scaling(spec)
    compiled = compile_all(sized_spec, capacities=capacities(sized_spec, factors=factors))
    shape = workload(trace, threshold=spec.routing.threshold, step_s=window_s)
    hours = window_s / 3600
    price = node_price(spec.instance_type, override=price_per_node_hour)
    needs = {}
    for role in ROLES:
        target = _demand_target(compiled[role])
        tokens = shape.prefill_tokens if role == "prefill" else shape.output_tokens
        demand = tuple(t / window_s for t in tokens)
        needed = tuple(max(1, math.ceil(d / target)) for d in demand)
        needs[role] = RoleNeed(role=role, compiled=compiled[role], target_tokens_per_s=target,
                               demand_tokens_per_s=demand, needed=needed,
                               node_hours=sum(pod_nodes(spec, role, n) for n in needed) * hours)
    span_s = len(summary.windows) * window_s
    fixed_nodes = sum(pod_nodes(spec, role, role_spec(spec, role).replicas) for role in ROLES)
    notes = []
    if needs["decode"].over_operator_cap:
        notes.append(f"decode needs up to {needs['decode'].max_replicas} decoders; the operator runs "
                     f"{DECODE_DEPLOYMENTS} decode deployment per endpoint (see plan's decode cap note)")
    sizing = role_shape(sized_spec, "prefill")  # every role scales on its SLO here, and both targets are set
    isl, osl = sizing.isl, sizing.osl
    if not isl / SHAPE_GAP <= shape.isl <= isl * SHAPE_GAP:
        notes.append(f"the capacities are computed for {isl}-token prompts (autoscaling.slo.input_tokens, by default "
                     f"routing.threshold) but the trace's routed prompts average {shape.isl} tokens (outputs {osl} "
                     f"against {shape.osl}): set prefill.autoscaling.slo.input_tokens: {shape.isl} and "
                     f"output_tokens: {shape.osl} to size for this traffic")
    if summary.windows[-1].start_s + window_s > trace.duration_s and len(summary.windows) > 1:
        notes.append("the last window is cut short by the trace's end: its rates read low")
    return TraceSizing(
        summary=summary, needs=needs, span_s=span_s, price=price,
        usd_per_day=None if price is None else per_day(
            sum(n.node_hours for n in needs.values()) * price.usd_per_node_hour, span_s),
        fixed_nodes=fixed_nodes,
        fixed_usd_per_day=None if price is None else fixed_nodes * 24 * price.usd_per_node_hour, notes=tuple(notes))


@dataclass(frozen=True, kw_only=True)
class TraceAdvice:
    """The sizing, the layout the user wrote played through the trace, and (``--autoscale``) the compiled scaling.

    :param autoscaled: None unless asked for.
    :param scaling: the compiled autoscaling the emulation ran (the spec's, or the ``slo: true`` default).
    :param scaling_note: why the default was used, when it was.
    """

    sizing: TraceSizing
    fixed: EmulatedDay
    autoscaled: EmulatedDay | None
    scaling: Mapping[str, CompiledScaling]
    scaling_note: str | None

    def usd_per_day(self, day: EmulatedDay) -> float | None:
        return per_day(day.usd, len(day.times_s) * day.step_s)

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {**self.sizing.to_json(), "fixed": self._day_json(self.fixed)}
        if self.autoscaled is not None:
            found["autoscaled"] = {**self._day_json(self.autoscaled), "scaling_note": self.scaling_note,
                                   "compiled": {role: {"min_replicas": c.min_replicas, "max_replicas": c.max_replicas,
                                                       "triggers": {t.name: t.target for t in c.triggers}}
                                                for role, c in self.scaling.items()}}
        return found

    def _day_json(self, day: EmulatedDay) -> dict[str, Any]:
        return {**day.to_json(), "usd_per_day": _usd(self.usd_per_day(day))}


def advise_trace(spec: DpdSpec, trace: Trace, *, window_s: float = DEFAULT_WINDOW_S, autoscale: bool = False,
                 factors: PhaseFactors | None = None, price_per_node_hour: float | None = None) -> TraceAdvice:
    """:func:`size_trace`, then the emulated day of the layout the user wrote and, with ``autoscale``, of the
    spec's compiled SLO autoscaling (the ``slo: true`` default on both roles when the spec has none).

    Raises what :func:`size_trace` and :func:`~hyperpod_dpd.advisor.emulator.emulate` raise.
    """
    sizing = size_trace(spec, trace, window_s=window_s, factors=factors, price_per_node_hour=price_per_node_hour)
    latency = queueing_latency(spec, workload(trace, threshold=spec.routing.threshold, step_s=SYNC_PERIOD_S),
                               factors=factors)
    fixed = emulate(spec, trace, factors=factors, latency=latency, price_per_node_hour=price_per_node_hour)
    if not autoscale:
        return TraceAdvice(sizing=sizing, fixed=fixed, autoscaled=None, scaling={}, scaling_note=None)
    roles = scaled_roles(spec)
    note = None
    if not roles:
        roles = ROLES
        note = DEFAULT_SLO_NOTE.format(maximum=sizing.needs["prefill"].compiled.max_replicas)
    scaling = {role: sizing.needs[role].compiled for role in roles}
    autoscaled = emulate(with_slo_scaling(spec, roles), trace, scaling=scaling, factors=factors, latency=latency,
                         price_per_node_hour=price_per_node_hour)
    return TraceAdvice(sizing=sizing, fixed=fixed, autoscaled=autoscaled, scaling=scaling, scaling_note=note)
