"""``emulate(spec, trace, scaling=...)``: KEDA and the HPA driving each role's replicas through a trace.

Each step (15 s, the HPA's sync period, by default): pods past their start-up serve; the routed arrivals
(those reaching a prefiller) load the ready layout's DPD curve at their trailing rate over
:data:`STEADY_WINDOW_S`, or over :data:`RATE_WINDOW_S` when that stands out of Poisson noise (causal,
and in seconds, so the result does not depend on ``step_s``); while that
rate is above :data:`~hyperpod_dpd.advisor.emulator.latency.MAX_LOAD` of the layout's capacity the
excess is carried as a fluid backlog, latency is read at the limit, and each request's FIFO wait behind
the backlog is added to its TTFT. The share of requests within the SLO target is read from the curve's
TTFT distribution at that rate. Every 15 s the HPA turns the values KEDA cached into replicas
(:mod:`~hyperpod_dpd.advisor.emulator.hpa`); KEDA polls half a polling interval out of phase with it,
reading each compiled trigger the way its PromQL would over the samples Prometheus holds one scrape
interval after the fact (a ``rate(...[1m])`` becomes the minute's mean of tokens the role processed, a
queue gauge the requests waiting, an SLO ratio the window's p90 over its target). A new pod serves
``start_up_s`` after the HPA asks for it; a removed pod stops at once (a pod still starting goes first).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from hyperpod_dpd.advisor.comparison import decoder_slots
from hyperpod_dpd.advisor.emulator import keda
from hyperpod_dpd.advisor.emulator.day import EmulatedDay, RoleDay
from hyperpod_dpd.advisor.emulator.hpa import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    SYNC_PERIOD_S,
    Behaviour,
    Hpa,
    MetricSample,
)
from hyperpod_dpd.advisor.emulator.latency import MAX_LOAD, LatencyModel, QueueingLatency
from hyperpod_dpd.advisor.emulator.workload import Workload, workload
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import Estimator
from hyperpod_dpd.advisor.queueing import Stations
from hyperpod_dpd.advisor.steps import PhaseFactors, dpd_stations
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.advisor.traffic import Traffic
from hyperpod_dpd.contracts.prices import node_price
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.planner import plan
from hyperpod_dpd.scaling.compiled import CompiledScaling, CompiledTrigger, Signal
from hyperpod_dpd.scaling.shape import pod_nodes
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.traces.model import Trace
from hyperpod_dpd.validation import check

ROLES = ("prefill", "decode")
# The trailing span a burst is seen over. A queue forgets its past within its relaxation time, about
# 1 / (mu (1 - sqrt(rho))^2) for M/M/1: 9 s at 72 % of a 5 requests/s prefiller, 76 s at 90 %; so a minute's
# trailing rate follows any burst of a minute or more, causally (latency rises after a burst starts, not before).
RATE_WINDOW_S = 60.0
# The trailing span a steady rate is read over: at 3.5 requests/s about 1,000 arrivals (+-3 % of Poisson noise,
# against +-7 % in a minute). The curve's own Poisson arrivals already hold that noise; reading the convex curve
# at a noisy rate would count it twice (+3 % p90 TTFT at 65 % of capacity).
STEADY_WINDOW_S = 300.0
# How many standard deviations of Poisson noise the minute's rate must stand off the steady one to be a burst
# (two-sided 95 %).
BURST_Z = 2.0
# Prometheus' sample of a counter is up to one scrape old when KEDA queries it: the operator's default scrape
# (MetricsSpec.scrape_interval_seconds unset).
DEFAULT_SCRAPE_S = 15.0
# Arrivals a step's backlog wait is sampled at (evenly through the step), for the share of requests within target.
_WAIT_SAMPLES = 4
# A comparison that drops a NaN quantile (NaN > 0 is false), as the compiled SLO-ratio query ends.
_DROPS_NAN = re.compile(r">\s*0(?![.\d])")
# Layouts simulated above which the emulation says what its curves cost (a 20 x 20 range is 400 of them).
_LAYOUTS_NOTED = 16
# A prompt-length spread above which the one-size curve is warned about (+-10 % jitter is a CV of 0.06).
_CV_WARNING = 0.5


def _trailing(running: list[int], k: int, span: int, step_s: float) -> tuple[float, float]:
    """The mean rate over the ``span`` steps ending with step ``k`` (fewer at the start), and their seconds."""
    low = max(0, k + 1 - span)
    seconds = (k + 1 - low) * step_s
    return (running[k + 1] - running[low]) / seconds, seconds


def _arrival_rate(counts: tuple[int, ...], *, step_s: float) -> list[float]:
    """Each step's arrival rate, causally: the steady :data:`STEADY_WINDOW_S` rate, or the last
    :data:`RATE_WINDOW_S` minute's where it stands more than :data:`BURST_Z` Poisson deviations off it."""
    short, steady = max(1, round(RATE_WINDOW_S / step_s)), max(1, round(STEADY_WINDOW_S / step_s))
    running = [0]
    for count in counts:
        running.append(running[-1] + count)
    found = []
    for k in range(len(counts)):
        recent, seconds = _trailing(running, k, short, step_s)
        level, _ = _trailing(running, k, steady, step_s)
        noise = math.sqrt(max(level, 1 / seconds) / seconds)
        found.append(recent if abs(recent - level) > BURST_Z * noise else level)
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
    next_poll: float = 0.0
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

    served_prompt_tokens: list[float] = field(default_factory=list)
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


def _signal_value(trigger: CompiledTrigger, role: str, history: _History, *, upto: int, step_s: float,
                  slo_ttft_s: float | None, slo_tpot_s: float | None) -> float:
    """What ``trigger``'s query reads over the first ``upto`` steps (the samples Prometheus holds by then)."""
    if upto <= 0:
        return trigger.fallback  # no sample yet: the series is absent, the query's `or` answers
    steps = max(1, math.ceil(keda.window_s(trigger.query) / step_s))
    low = max(0, upto - steps)
    served = history.served[low:upto]
    if trigger.signal is Signal.QUEUE:
        return history.queue[upto - 1]
    if trigger.signal is Signal.DEMAND:
        if role == "prefill":
            # vllm:prompt_tokens_total counts every prompt token, cached or not; the compiled prefill query reads
            # vLLM's computed tokens (prompt_tokens_by_source_total{source="local_compute"}, scaling/queries.py
            # demand), and a hand-written one may subtract vllm:prefix_cache_hits_total instead
            computed = 'source="local_compute"' in trigger.query or "prefix_cache_hits" in trigger.query
            tokens = history.served_prefill_tokens if computed else history.served_prompt_tokens
        else:
            tokens = history.served_output_tokens
        return sum(tokens[low:upto]) / (len(served) * step_s)
    series, target = ((history.ttft_p90_s, slo_ttft_s) if role == "prefill" else (history.tpot_p90_s, slo_tpot_s))
    p90 = _weighted_p90(series[low:upto], served)
    if p90 is None or target is None:
        # No requests in the window: the pods' bucket series exist but histogram_quantile is NaN. The compiled
        # query drops it with `> 0` and its `or vector(fallback)` answers; without that filter KEDA reads the
        # NaN as 0 (keda.read_value).
        return trigger.fallback if _DROPS_NAN.search(trigger.query) else math.nan
    return p90 / target


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
        for name, value, least in (("start_up_s", compiled.start_up_s, "at least 0"),
                                    ("polling_interval_s", compiled.polling_interval_s, "above 0")):
            if not (isinstance(value, int | float) and math.isfinite(value)
                    and (value >= 0 if least == "at least 0" else value > 0)):
                problems.append(Problem(field=f"scaling.{role}.{name}", value=value,
                                        message=f"must be a finite number of seconds, {least}",
                                        fix=f"give the {name.removesuffix('_s').replace('_', ' ')} in seconds"))
        for index, trigger in enumerate(compiled.triggers):
            if not (isinstance(trigger.target, int | float) and math.isfinite(trigger.target) and trigger.target > 0):
                problems.append(Problem(field=f"scaling.{role}.triggers[{index}].target", value=trigger.target,
                                        message="must be a finite number above 0 (the HPA divides by it)",
                                        fix="give the value one replica should hold (Average) or the total (Value)"))
            if keda.window_s(trigger.query) <= 0:
                problems.append(Problem(field=f"scaling.{role}.triggers[{index}].query", value=trigger.query,
                                        message="has a zero range, which PromQL refuses",
                                        fix="give the range a positive duration, e.g. [1m]"))
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
    model on AIConfigurator's step times with ``factors``. Raises :class:`SpecError` for an empty, unordered
    or not finite trace, a bad step or more than ``workload.MAX_STEPS`` of them, or scaling that does not fit
    the spec (roles, bounds, trigger targets, start-up and polling times, zero ranges).
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
    trailing = _arrival_rate(shape.routed, step_s=step_s)
    scrape_s = float(spec.metrics.scrape_interval_seconds or DEFAULT_SCRAPE_S)
    for role in roles.values():
        if role.scaling is not None:
            # KEDA's poll loop starts when the ScaledObject is reconciled, out of phase with the HPA's sync:
            # half an interval in, so a poll and the sync that uses it are apart (scale_handler.go:454-482)
            role.next_poll = role.scaling.polling_interval_s / 2
    backlog = 0.0
    met_ttft = met_tpot = 0.0
    for k, arrivals in enumerate(shape.arrivals):
        start, end = k * step_s, (k + 1) * step_s
        for role in roles.values():
            role.promote(start)
        prefill, decode = roles["prefill"].ready, roles["decode"].ready
        limit = MAX_LOAD * model.capacity(prefill, decode) if prefill and decode else 0.0
        routed = shape.routed[k]
        # The fluid backlog follows the trailing rate against the limit, not the step's own count: the curve
        # already holds Poisson noise, and a count compared per step would make the result depend on step_s.
        if limit:
            carried = min(backlog + routed, max(0.0, backlog + (trailing[k] - limit) * step_s))
        else:
            carried = backlog + routed
        served = backlog + routed - carried
        rate = limit if carried > 0 or backlog > 0 else min(trailing[k], limit)
        point = model.at(max(1, prefill), max(1, decode), rate) if limit else None
        # FIFO behind a backlog falling or rising linearly from `backlog` to `carried` through the step
        low, high = min(backlog, carried), max(backlog, carried)
        waits = [(backlog + (i + 0.5) / _WAIT_SAMPLES * (carried - backlog)) / limit if limit else math.inf
                 for i in range(_WAIT_SAMPLES)] if high else []
        wait_p90 = (low + 0.9 * (high - low)) / limit if limit else math.inf
        ttft = point.ttft_p90_s + wait_p90 if point else math.inf
        tpot = point.tpot_p90_s if point else math.inf
        history.served.append(served)
        history.served_prompt_tokens.append((shape.prompt_tokens[k] / routed if routed else 0.0) * served)
        history.served_prefill_tokens.append((shape.prefill_tokens[k] / routed if routed else 0.0) * served)
        history.served_output_tokens.append(shape.output_tokens[k] if decode else 0.0)
        history.ttft_p90_s.append(ttft)
        history.tpot_p90_s.append(tpot)
        history.tpot_s.append(point.tpot_s if point else math.inf)
        history.queue.append(carried + (served / step_s * point.queue_s if point else 0.0))
        backlog = carried
        if point is not None and arrivals:
            if slo_ttft is not None:
                met_ttft += arrivals * (point.ttft_share_within(slo_ttft) if not high else
                                        sum(point.ttft_share_within(slo_ttft - w) for w in waits) / len(waits))
            if slo_tpot is not None:
                met_tpot += shape.output_tokens[k] * point.tpot_share_within(slo_tpot)
        syncing = math.floor(end / SYNC_PERIOD_S + 1e-9) > math.floor(start / SYNC_PERIOD_S + 1e-9)
        for role in roles.values():
            role.ready_series.append(role.ready)
            compiled = role.scaling
            if compiled is None or role.hpa is None:
                role.desired_series.append(role.pods)
                continue
            if syncing:  # the HPA reads what KEDA cached at its last poll, before this instant's poll
                desired = role.hpa.sync(now=end, samples=role.cached, spec_replicas=role.pods,
                                        status_replicas=role.pods, ready_replicas=role.ready)
                role.resize(desired, now=end, start_up_s=compiled.start_up_s)
            if end >= role.next_poll - 1e-9:
                role.next_poll += compiled.polling_interval_s * max(1, math.ceil(
                    (end - role.next_poll + 1e-9) / compiled.polling_interval_s))
                # the samples Prometheus holds: those scraped at least one scrape interval ago
                upto = math.floor((end - scrape_s) / step_s + 1e-9)
                role.cached = tuple(MetricSample(
                    value=keda.read_value(_signal_value(t, role.name, history, upto=upto, step_s=step_s,
                                                        slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot)),
                    target=t.target, target_type=keda.target_type(t.metric_type)) for t in compiled.triggers)
            role.desired_series.append(role.pods)
    return _day(spec, trace, shape=shape, roles=roles, history=history, model=model, met_ttft=met_ttft,
                met_tpot=met_tpot, slo_ttft=slo_ttft, slo_tpot=slo_tpot, price_per_node_hour=price_per_node_hour)


def _day(spec: DpdSpec, trace: Trace, *, shape: Workload, roles: dict[str, _Role], history: _History,
         model: LatencyModel, met_ttft: float, met_tpot: float, slo_ttft: float | None, slo_tpot: float | None,
         price_per_node_hour: float | None) -> EmulatedDay:
    step_s = shape.step_s
    price = node_price(spec.instance_type, override=price_per_node_hour)
    hours = step_s / 3600
    days = {}
    for name, role in roles.items():
        # pods during a step: those serving plus those starting (the desired count after the step's resize)
        pods = [max(r, d) for r, d in zip(role.ready_series, role.desired_series, strict=True)]
        node_hours = sum(pod_nodes(spec, name, p) for p in pods) * hours
        provisioned = pod_nodes(spec, name, role.scaling.max_replicas if role.scaling else role.ready_series[0])
        days[name] = RoleDay(
            role=name, autoscaled=role.scaling is not None, ready=tuple(role.ready_series),
            desired=tuple(role.desired_series), replica_hours=sum(pods) * hours, node_hours=node_hours,
            provisioned_nodes=provisioned, usd=None if price is None else node_hours * price.usd_per_node_hour,
            provisioned_usd=None if price is None else provisioned * len(pods) * hours * price.usd_per_node_hour)
    ttft_attainment = None if slo_ttft is None else met_ttft / len(trace.requests)
    tokens = sum(shape.output_tokens)
    tpot_attainment = None if slo_tpot is None else (met_tpot / tokens if tokens else 1.0)
    found = [v for v in (ttft_attainment, tpot_attainment) if v is not None]
    notes = [f"{shape.routed_share:.0%} of requests reach a prefiller (routing.threshold {spec.routing.threshold}) "
             "and load the DPD curve; the others' prefill on the decoders is not modelled, and their latency is "
             "read from the same curve"]
    if shape.prefill_cv > _CV_WARNING:
        # Pollaczek-Khinchine: the mean queue wait scales with (1 + CV^2) of the service time; the curve's
        # one prompt size with +-10 % jitter has CV^2 = 0.0033
        notes.append(f"the routed prompts' computed lengths vary (CV {shape.prefill_cv:.2f}) but the curve uses one "
                     f"size ({shape.prefill_isl} tokens): prefill queue waits may be up to "
                     f"{(1 + shape.prefill_cv ** 2) / (1 + 0.1 ** 2 / 3):.1f}x the curve's, and long prompts' TTFT "
                     "is above it")
    if shape.cached_share:
        notes.append(f"{shape.cached_share:.0%} of routed prompt tokens are prefix-cache hits (an unbounded cache)")
    layouts = model.layouts if isinstance(model, QueueingLatency) else ()
    if len(layouts) > _LAYOUTS_NOTED:
        notes.append(f"{len(layouts)} layouts' latency curves were simulated (about 2 s each): narrow the replica "
                     "ranges to emulate faster")
    source = (f"the advisor's queueing model at the trace's mean shape (isl {shape.isl}, prefill {shape.prefill_isl} "
              f"tokens computed, osl {shape.osl}), interpolated over load" if isinstance(model, QueueingLatency)
              else type(model).__name__)
    return EmulatedDay(
        source=trace.source, step_s=step_s, times_s=tuple(k * step_s for k in range(len(shape.arrivals))),
        arrivals_per_s=tuple(a / step_s for a in shape.arrivals), ttft_p90_s=tuple(history.ttft_p90_s),
        tpot_p90_s=tuple(history.tpot_p90_s), tpot_s=tuple(history.tpot_s), queue=tuple(history.queue), roles=days,
        slo_ttft_s=slo_ttft, slo_tpot_s=slo_tpot, slo_attainment=min(found) if found else None,
        ttft_attainment=ttft_attainment, tpot_attainment=tpot_attainment, requests=len(trace.requests),
        routed_share=shape.routed_share, cached_share=shape.cached_share, layouts=layouts, latency_source=source,
        price=None if price is None else price.describe(), notes=tuple(notes))
