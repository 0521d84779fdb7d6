"""``emulate(spec, trace, scaling=...)``: KEDA and the HPA driving each role's replicas through a trace.

Each step (15 s, the HPA's sync period, by default): pods past their start-up serve; the step's arrivals
(plus any backlog) are served up to :data:`~hyperpod_dpd.advisor.autoscaling.latency.MAX_LOAD` of the
ready layout's capacity, the rest carried to the next step as a fluid backlog whose drain time is added
to TTFT; latency comes from the queueing model at the arrival rate averaged over :data:`SMOOTHING_S`
centred on the step (the curve's Poisson arrivals already hold a step's own noise; the centring makes a
burst's edge blur over 2.5 min each side), or at the limit while a backlog lasts. Then, when a role's polling interval
has passed, KEDA reads each compiled trigger the way its PromQL would over the emulated counters (a
``rate(...[1m])`` becomes the trailing minute's mean of tokens the role processed, a queue gauge the
requests waiting, an SLO ratio the window's p90 over its target), and every 15 s the HPA turns those
values into replicas (:mod:`~hyperpod_dpd.advisor.autoscaling.hpa`). A new pod serves ``start_up_s`` after
the HPA asks for it; a removed pod stops at once (a pod still starting goes first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hyperpod_dpd.advisor.autoscaling import keda
from hyperpod_dpd.advisor.autoscaling.day import EmulatedDay, RoleDay
from hyperpod_dpd.advisor.autoscaling.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SYNC_PERIOD_S,
    Behaviour,
    Hpa,
    MetricSample,
)
from hyperpod_dpd.advisor.autoscaling.latency import MAX_LOAD, LatencyModel, QueueingLatency
from hyperpod_dpd.advisor.autoscaling.workload import Workload, workload
from hyperpod_dpd.advisor.comparison import decoder_slots
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.advisor.prices import node_price
from hyperpod_dpd.advisor.queueing import Stations
from hyperpod_dpd.advisor.steps import PhaseFactors, dpd_stations
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.advisor.traffic import Traffic
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.planner import plan
from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, Signal
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.traces.model import Trace
from hyperpod_dpd.validation import check

ROLES = ("prefill", "decode")
# The span the arrival rate is averaged over before the latency curve is read: at 3.5 requests/s it holds about
# 1,000 arrivals (+-3 % of Poisson noise, against +-14 % in one 15 s step); diurnal change is far slower.
SMOOTHING_S = 300.0


def _centred_mean(counts: tuple[int, ...], *, half: int, step_s: float) -> list[float]:
    """Arrivals per second averaged over the ``2 x half + 1`` steps centred on each (fewer at the edges)."""
    running = [0]
    for count in counts:
        running.append(running[-1] + count)
    found = []
    for k in range(len(counts)):
        low, high = max(0, k - half), min(len(counts), k + half + 1)
        found.append((running[high] - running[low]) / ((high - low) * step_s))
    return found


def queueing_latency(spec: DpdSpec, shape: Workload, *, factors: PhaseFactors | None = None) -> QueueingLatency:
    """The spec's DPD stations at the trace's mean request shape, as ``advise`` builds them."""
    Traffic(isl=shape.isl, osl=shape.osl, request_rate=1.0).validate(spec)
    architecture = check(spec).architecture
    if architecture is None:
        raise SpecError([Problem(field="model.architecture", value=spec.model.name, message="is unknown",
                                 fix="set model.architecture to a preset")])
    estimator = Estimator(target_for(spec.instance_type, architecture), architecture, isl=shape.isl, osl=shape.osl,
                          gpus_per_node=spec.instance_type.facts.gpus, engine=engine_settings(spec), factors=factors)
    sized = plan(spec, prompt_tokens=shape.isl)
    slots = decoder_slots(spec, kv_cache_tokens=sized.decode.kv_cache_tokens, tokens_per_request=shape.isl + shape.osl)
    steps = estimator.steps(spec.tensor_parallel_size)
    transfer_s = sized.request.transfer_seconds_at_line_rate

    def stations(prefill: int, decode: int) -> Stations:
        return dpd_stations(steps, estimator.factors, prefill_replicas=prefill, decode_replicas=decode,
                            decode_slots=slots, transfer_s=transfer_s, isl=shape.prefill_isl)

    return QueueingLatency(stations=stations, osl=shape.osl)


@dataclass
class _Role:
    """One role's pods and, when autoscaled, its KEDA cache and HPA."""

    name: str
    ready: int
    scaling: CompiledScaling | None
    pending: list[float] = field(default_factory=list)
    hpa: Hpa | None = None
    cached: tuple[MetricSample, ...] = ()
    last_poll: float = -math.inf
    ready_series: list[int] = field(default_factory=list)
    desired_series: list[int] = field(default_factory=list)

    @property
    def pods(self) -> int:
        return self.ready + len(self.pending)

    def promote(self, now: float) -> None:
        started = [t for t in self.pending if t <= now]
        self.ready += len(started)
        self.pending = [t for t in self.pending if t > now]

    def resize(self, desired: int, *, now: float, start_up_s: float) -> None:
        if desired > self.pods:
            self.pending.extend([now + start_up_s] * (desired - self.pods))
            return
        surplus = self.pods - desired
        while surplus and self.pending:
            self.pending.pop()
            surplus -= 1
        self.ready -= surplus


@dataclass
class _History:
    """The per-step quantities the triggers' queries read."""

    served_prefill_tokens: list[float] = field(default_factory=list)
    served_output_tokens: list[float] = field(default_factory=list)
    served: list[float] = field(default_factory=list)
    ttft_p90_s: list[float] = field(default_factory=list)
    tpot_p90_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    queue: list[float] = field(default_factory=list)


def _weighted_p90(values: list[float], weights: list[float]) -> float | None:
    pairs = sorted((v, w) for v, w in zip(values, weights, strict=True) if w > 0 and not math.isnan(v))
    total = sum(w for _, w in pairs)
    if not total:
        return None
    running = 0.0
    for value, weight in pairs:
        running += weight
        if running >= 0.9 * total:
            return value
    return pairs[-1][0]


def _signal_value(trigger: CompiledTrigger, role: str, history: _History, *, step_s: float,
                  slo_ttft_s: float | None, slo_tpot_s: float | None) -> float:
    steps = max(1, math.ceil(keda.window_s(trigger.query) / step_s))
    served = history.served[-steps:]
    if trigger.signal is Signal.QUEUE:
        return history.queue[-1]
    if trigger.signal is Signal.DEMAND:
        tokens = history.served_prefill_tokens if role == "prefill" else history.served_output_tokens
        return sum(tokens[-steps:]) / (len(served) * step_s)
    series, target = ((history.ttft_p90_s, slo_ttft_s) if role == "prefill" else (history.tpot_p90_s, slo_tpot_s))
    p90 = _weighted_p90(series[-steps:], served)
    if p90 is None or target is None:
        return trigger.fallback  # no requests in the window: the series is absent, the query's `or` answers
    return p90 / target


def _nodes(spec: DpdSpec, role: str, pods: int) -> int:
    role_spec = spec.prefill if role == "prefill" else spec.decode
    return spec.role_nodes(replace(role_spec, replicas=pods, autoscaling=None), at_scale_limit=False) if pods else 0


def _check_scaling(spec: DpdSpec, scaling: Mapping[str, CompiledScaling]) -> None:
    problems = []
    for role, compiled in scaling.items():
        if role not in ROLES or compiled.role != role:
            problems.append(Problem(field="scaling", value=role, message="is not a role, or names another role's "
                                    "compiled scaling", fix="key it by 'prefill' or 'decode', as its role"))
        elif not 1 <= compiled.min_replicas <= compiled.max_replicas:
            problems.append(Problem(field=f"scaling.{role}.min_replicas", value=compiled.min_replicas,
                                    message=f"must be at least 1 and at most max_replicas {compiled.max_replicas}",
                                    fix="scaling to zero is not emulated: give min_replicas >= 1"))
        for trigger in compiled.triggers:
            if trigger.signal is Signal.SLO_RATIO and (spec.slo is None or (
                    spec.slo.ttft_ms if role == "prefill" else spec.slo.tpot_ms) is None):
                problems.append(Problem(field=f"scaling.{role}.triggers", value=trigger.name,
                                        message="reads an SLO ratio but the spec has no such slo target",
                                        fix=f"set slo.{'ttft_ms' if role == 'prefill' else 'tpot_ms'}"))
    if problems:
        raise SpecError(problems, source="the compiled scaling")


def emulate(spec: DpdSpec, trace: Trace, *, scaling: Mapping[str, CompiledScaling] | None = None,
            factors: PhaseFactors | None = None, step_s: float = SYNC_PERIOD_S, latency: LatencyModel | None = None,
            price_per_node_hour: float | None = None) -> EmulatedDay:
    """Play ``trace`` through the spec's layout, each role in ``scaling`` autoscaled by KEDA and the HPA.

    A role not in ``scaling`` keeps the spec's ``replicas`` (``scaling=None``: the layout the user wrote).
    ``latency`` replaces the queueing model (a test's analytic stand-in). :default: the advisor's queueing
    model on AIConfigurator's step times with ``factors``. Raises :class:`SpecError` for an empty trace, a
    bad step, or scaling that does not fit the spec.
    """
    scaling = dict(scaling or {})
    if not (isinstance(step_s, int | float) and math.isfinite(step_s) and 0 < step_s <= SYNC_PERIOD_S):
        raise SpecError([Problem(field="step_s", value=step_s, message=f"must be a positive number of seconds, at "
                                 f"most the HPA's {SYNC_PERIOD_S:g} s sync period",
                                 fix=f"give e.g. {SYNC_PERIOD_S:g}")], source="the emulation")
    _check_scaling(spec, scaling)
    shape = workload(trace, threshold=spec.routing.threshold, step_s=step_s)
    model = latency if latency is not None else queueing_latency(spec, shape, factors=factors)
    slo_ttft = None if spec.slo is None or spec.slo.ttft_ms is None else spec.slo.ttft_ms / 1000
    slo_tpot = None if spec.slo is None or spec.slo.tpot_ms is None else spec.slo.tpot_ms / 1000
    roles = {}
    for name in ROLES:
        compiled = scaling.get(name)
        replicas = (spec.prefill if name == "prefill" else spec.decode).replicas
        if compiled is None:
            roles[name] = _Role(name=name, ready=replicas, scaling=None)
            continue
        behaviour = Behaviour(scale_up=replace(DEFAULT_SCALE_UP, stabilisation_s=compiled.scale_up_stabilisation_s),
                              scale_down=replace(DEFAULT_SCALE_DOWN,
                                                 stabilisation_s=compiled.scale_down_stabilisation_s))
        roles[name] = _Role(name=name, ready=min(max(replicas, compiled.min_replicas), compiled.max_replicas),
                            scaling=compiled, hpa=Hpa(min_replicas=keda.hpa_min_replicas(compiled.min_replicas),
                                                      max_replicas=compiled.max_replicas, behaviour=behaviour))
    history = _History()
    smoothed = _centred_mean(shape.arrivals, half=max(0, round(SMOOTHING_S / 2 / step_s)), step_s=step_s)
    backlog = backlog_prefill = backlog_output = 0.0
    met = 0
    for k, arrivals in enumerate(shape.arrivals):
        start, end = k * step_s, (k + 1) * step_s
        for role in roles.values():
            role.promote(start)
        prefill, decode = roles["prefill"].ready, roles["decode"].ready
        limit = MAX_LOAD * model.capacity(prefill, decode) if prefill and decode else 0.0
        offered = arrivals + backlog
        served = min(offered, limit * step_s)
        share = served / offered if offered else 0.0
        offered_prefill = shape.prefill_tokens[k] + backlog_prefill
        offered_output = shape.output_tokens[k] + backlog_output
        carried = offered - served
        # The curve already holds Poisson arrivals' own burstiness: read it at the step's smoothed rate, not at
        # its raw count (which would count that burstiness twice), unless a backlog pins it at the limit.
        rate = served / step_s if carried > 0 else min(smoothed[k], limit)
        point = model.at(max(1, prefill), max(1, decode), rate) if limit else None
        wait = (backlog + carried) / 2 / limit if limit else math.inf
        ttft = point.ttft_p90_s + wait if point else math.inf
        tpot = point.tpot_p90_s if point else math.inf
        history.served.append(served)
        history.served_prefill_tokens.append(offered_prefill * share)
        history.served_output_tokens.append(offered_output * share)
        history.ttft_p90_s.append(ttft)
        history.tpot_p90_s.append(tpot)
        history.tpot_s.append(point.tpot_s if point else math.inf)
        history.queue.append(carried + (served / step_s * point.queue_s if point else 0.0))
        backlog, backlog_prefill, backlog_output = carried, offered_prefill * (1 - share), offered_output * (1 - share)
        if (slo_ttft is None or ttft <= slo_ttft) and (slo_tpot is None or tpot <= slo_tpot):
            met += arrivals
        syncing = math.floor(end / SYNC_PERIOD_S + 1e-9) > math.floor(start / SYNC_PERIOD_S + 1e-9)
        for role in roles.values():
            role.ready_series.append(role.ready)
            compiled = role.scaling
            if compiled is None or role.hpa is None:
                role.desired_series.append(role.pods)
                continue
            if end - role.last_poll >= compiled.polling_interval_s - 1e-9:
                role.last_poll = end
                role.cached = tuple(MetricSample(
                    value=keda.read_value(_signal_value(t, role.name, history, step_s=step_s, slo_ttft_s=slo_ttft,
                                                        slo_tpot_s=slo_tpot)),
                    target=t.target, target_type=keda.target_type(t.metric_type)) for t in compiled.triggers)
            if syncing:
                desired = role.hpa.sync(now=end, samples=role.cached, spec_replicas=role.pods,
                                        status_replicas=role.pods, ready_replicas=role.ready)
                role.resize(desired, now=end, start_up_s=compiled.start_up_s)
            role.desired_series.append(role.pods)
    return _day(spec, trace, shape=shape, roles=roles, history=history, model=model, met=met, slo_ttft=slo_ttft,
                slo_tpot=slo_tpot,
                price_per_node_hour=price_per_node_hour)


def _day(spec: DpdSpec, trace: Trace, *, shape: Workload, roles: dict[str, _Role], history: _History,
         model: LatencyModel, met: int, slo_ttft: float | None, slo_tpot: float | None,
         price_per_node_hour: float | None) -> EmulatedDay:
    step_s = shape.step_s
    price = node_price(spec.instance_type, override=price_per_node_hour)
    hours = step_s / 3600
    days = {}
    for name, role in roles.items():
        # pods during a step: those serving plus those starting (the desired count after the step's resize)
        pods = [max(r, d) for r, d in zip(role.ready_series, role.desired_series, strict=True)]
        node_hours = sum(_nodes(spec, name, p) for p in pods) * hours
        provisioned = _nodes(spec, name, role.scaling.max_replicas if role.scaling else role.ready_series[0])
        days[name] = RoleDay(
            role=name, autoscaled=role.scaling is not None, ready=tuple(role.ready_series),
            desired=tuple(role.desired_series), replica_hours=sum(pods) * hours, node_hours=node_hours,
            provisioned_nodes=provisioned, usd=None if price is None else node_hours * price.usd_per_node_hour,
            provisioned_usd=None if price is None else provisioned * len(pods) * hours * price.usd_per_node_hour)
    slo = slo_ttft is not None or slo_tpot is not None
    notes = [f"{shape.routed_share:.0%} of requests reach a prefiller (routing.threshold {spec.routing.threshold}); "
             "every request's latency is read from the DPD curve"]
    if shape.cached_share:
        notes.append(f"{shape.cached_share:.0%} of routed prompt tokens are prefix-cache hits (an unbounded cache)")
    layouts = model.layouts if isinstance(model, QueueingLatency) else ()
    source = (f"the advisor's queueing model at the trace's mean shape (isl {shape.isl}, prefill {shape.prefill_isl} "
              f"tokens computed, osl {shape.osl}), interpolated over load" if isinstance(model, QueueingLatency)
              else type(model).__name__)
    return EmulatedDay(
        source=trace.source, step_s=step_s, times_s=tuple(k * step_s for k in range(len(shape.arrivals))),
        arrivals_per_s=tuple(a / step_s for a in shape.arrivals), ttft_p90_s=tuple(history.ttft_p90_s),
        tpot_p90_s=tuple(history.tpot_p90_s), tpot_s=tuple(history.tpot_s), queue=tuple(history.queue), roles=days,
        slo_ttft_s=slo_ttft,
        slo_tpot_s=slo_tpot, slo_attainment=met / len(trace.requests) if slo else None, requests=len(trace.requests),
        routed_share=shape.routed_share, cached_share=shape.cached_share, layouts=layouts, latency_source=source,
        price=None if price is None else price.describe(), notes=tuple(notes))
