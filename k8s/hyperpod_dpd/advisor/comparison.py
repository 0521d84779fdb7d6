"""``advise(spec, traffic)``: the spec's DPD layout against an aggregated baseline at each load point."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from hyperpod_dpd.advisor import estimates, published, queueing
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import Estimate, Estimator, Layout
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.advisor.traffic import Sla, Traffic
from hyperpod_dpd.contracts.prices import NodePrice, node_price, unpriced_reason
from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS, VLLM_VERSION
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.planner import plan
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.validation import check

ESTIMATE_NOTE = ("an estimate from kernel measurements, not a benchmark: confirm it on the cluster "
                 "(hyperpod-dpd bench) before sizing a purchase on it")


@dataclass(frozen=True, kw_only=True)
class AdvicePoint:
    """One load point: both layouts side by side and a one-line verdict.

    ``concurrency`` is the requests in flight (for a request-rate load, the DPD layout's).
    ``misses`` lists the SLA targets each layout misses, e.g. ``{"disaggregated": ("ttft",)}``.
    ``tuned_aggregated`` is the best aggregated engine of :data:`TUNED_GRID` on the baseline's nodes
    (meeting the SLA when one is given), the baseline a user who tunes vLLM would compare against.
    """

    concurrency: int
    aggregated: Estimate
    disaggregated: Estimate
    verdict: str
    request_rate: float | None = None
    misses: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tuned_aggregated: Estimate | None = None

    def to_json(self) -> dict[str, object]:
        tuned = None if self.tuned_aggregated is None else self.tuned_aggregated.to_json()
        return {"concurrency": self.concurrency, "request_rate": self.request_rate,
                "aggregated": self.aggregated.to_json(), "disaggregated": self.disaggregated.to_json(),
                "tuned_aggregated": tuned,
                "verdict": self.verdict, "misses_sla": {k: list(v) for k, v in self.misses.items()}}


@dataclass(frozen=True, kw_only=True)
class Advice:
    """The comparison for every load point, with what it rests on.

    ``by_analogy_to`` names the measured model whose data stand in for a model AIConfigurator does not
    cover (:mod:`hyperpod_dpd.advisor.analogy`); ``None`` when the figures rest on the model's own data.
    """

    model: str
    instance_type: str
    isl: int
    osl: int
    baseline_nodes: int
    points: tuple[AdvicePoint, ...]
    assumptions: Mapping[str, str]
    sla: Sla = field(default_factory=Sla)
    warnings: tuple[str, ...] = ()
    price: NodePrice | None = None
    by_analogy_to: str | None = None

    @property
    def meets_sla(self) -> bool:
        """True unless the DPD layout misses an SLA target at some load point."""
        return not any(point.misses.get("disaggregated") for point in self.points)

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "instance_type": self.instance_type, "isl": self.isl, "osl": self.osl,
                "baseline_nodes": self.baseline_nodes, "by_analogy_to": self.by_analogy_to,
                "sla": {"ttft_s": self.sla.ttft_s, "tpot_s": self.sla.tpot_s},
                "points": [point.to_json() for point in self.points],
                "price": None if self.price is None else self.price.to_json(),
                "assumptions": dict(self.assumptions), "warnings": list(self.warnings)}


def misses(estimate: Estimate, sla: Sla) -> tuple[str, ...]:
    """The SLA targets ``estimate`` misses (a load it cannot sustain misses every target)."""
    found = []
    if sla.ttft_s is not None and (estimate.ttft_s > sla.ttft_s or not estimate.sustains_load):
        found.append("ttft")
    if sla.tpot_s is not None and (estimate.tpot_s > sla.tpot_s or not estimate.sustains_load):
        found.append("tpot")
    return tuple(found)


def _change(new: float, old: float) -> float:
    if math.isnan(new) or math.isnan(old):
        return math.nan
    return new / old - 1 if old else 0.0


def _sign(change: float) -> int:
    """-1, 0 or 1, with a change that prints as 0% counted as none."""
    return 0 if round(abs(change) * 100) == 0 else (1 if change > 0 else -1)


def verdict(aggregated: Estimate, disaggregated: Estimate, *, load: str, fixed_rate: bool = False) -> str:
    """One line: what DPD does to TPOT and throughput (and TTFT) against the baseline, on which GPUs.

    At a ``fixed_rate`` both layouts serve the same throughput, so only latencies are compared.
    """
    if not aggregated.sustains_load or not disaggregated.sustains_load:
        short = [e for e in (disaggregated, aggregated) if not e.sustains_load]
        return "; ".join(f"{e.layout} is saturated at {load} (capacity {e.capacity_per_s:.2f} "
                         "requests/s)" for e in short)
    tpot = _change(disaggregated.tpot_s, aggregated.tpot_s)
    throughput = _change(disaggregated.output_tokens_per_s, aggregated.output_tokens_per_s)
    ttft = _change(disaggregated.ttft_s, aggregated.ttft_s)
    if math.isnan(tpot):
        tpot_text, tpot_sign = "has no TPOT to change (fewer than 2 output tokens)", 0
    else:
        tpot_sign = _sign(tpot)
        tpot_text = {-1: f"cuts TPOT by {-tpot:.0%}", 0: "leaves TPOT about the same",
                     1: f"raises TPOT by {tpot:.0%}"}[tpot_sign]
    gain_sign = _sign(throughput)
    gain_text = {1: f"gives {throughput:.0%} more throughput", 0: "gives about the same throughput",
                 -1: f"gives {-throughput:.0%} less throughput"}[gain_sign]
    joint = "but" if tpot_sign * gain_sign > 0 else "and"
    gpus = (f"on the same {aggregated.nodes} node(s)" if aggregated.nodes == disaggregated.nodes
            else f"on {disaggregated.nodes} nodes against {aggregated.nodes}")
    ttft_text = {1: f"TTFT rises {ttft:.0%}", 0: "TTFT about the same", -1: f"TTFT falls {-ttft:.0%}"}[_sign(ttft)]
    if fixed_rate:
        return f"DPD {tpot_text} at {load} {gpus}; {ttft_text}"
    return f"DPD {tpot_text} {joint} {gain_text} at {load} {gpus}; {ttft_text}"


# The most nodes one comparison or search simulates. Measured on 2 cores: 16 nodes in about 4 s, 64 in about
# 16 s, 256 in about 140 s; past this, a command would look hung.
MAX_SIMULATED_NODES = 64


def advise(spec: DpdSpec, traffic: Traffic, *, baseline_nodes: int | None = None,
           factors: PhaseFactors | None = None, price_per_node_hour: float | None = None,
           thorough: bool = True) -> Advice:
    """Predict the spec's DPD layout against aggregated vLLM for ``traffic``.

    The baseline is the same model, TP and engine flags without ``pdSpec``, on ``baseline_nodes``
    nodes (default: as many nodes as the stack creates for the DPD layout, the comparison at equal
    cost), every GPU running a replica. ``factors`` are calibrated phase corrections (default:
    AIConfigurator's own). Raises :class:`SpecError` for a bad spec, traffic or unsupported model,
    instance type or engine flag, and :class:`AdvisorUnavailable` when the ``advisor`` extra is missing.
    ``thorough`` false skips the ranges and the tuned baseline (the point figures stay the same), for
    a fit that reads only those. :default: True
    """
    traffic.validate(spec)
    checked = check(spec)
    architecture = checked.architecture
    if architecture is None:  # check() resolves one whenever the spec names a known model
        raise SpecError([Problem(field="model.architecture", value=spec.model.name, message="is unknown",
                                 fix="set model.architecture to a preset")])
    engine = engine_settings(spec)
    price = node_price(spec.instance_type, override=price_per_node_hour)
    facts = spec.instance_type.facts
    dpd_nodes = dpd_node_count(spec)
    nodes = dpd_nodes if baseline_nodes is None else baseline_nodes
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise SpecError([Problem(field="baseline_nodes", value=baseline_nodes, message="must be a whole number of "
                                 "nodes, at least 1", fix=f"give e.g. {dpd_nodes}, the DPD layout's node count")],
                        source="the traffic")
    if nodes > MAX_SIMULATED_NODES:
        given = "" if baseline_nodes is not None else f"defaults to the DPD layout's {nodes} nodes and "
        raise SpecError([Problem(field="baseline_nodes", value=baseline_nodes, message=f"{given}is more than the "
                                 f"{MAX_SIMULATED_NODES} nodes the advisor simulates: it plays every replica's "
                                 "requests through, so the time grows with the node count (minutes beyond a few "
                                 "hundred)",
                                 fix=f"give --baseline-nodes {MAX_SIMULATED_NODES} or fewer (for a larger fleet, "
                                     "compare one slice of it at its share of the load)")], source="the traffic")
    target = target_for(spec.instance_type, architecture)
    estimator = Estimator(target, architecture, isl=traffic.isl, osl=traffic.osl, gpus_per_node=facts.gpus,
                          engine=engine, factors=factors, price=price)
    tp = spec.tensor_parallel_size
    sized = plan(spec, prompt_tokens=traffic.isl)
    transfer_s = sized.request.transfer_seconds_at_line_rate
    per_request = traffic.isl + traffic.osl
    decode_seqs = decoder_slots(spec, kv_cache_tokens=sized.decode.kv_cache_tokens, tokens_per_request=per_request)
    below_threshold = traffic.isl < spec.routing.threshold

    # The baseline runs the shared gpu_memory_utilization: the planner's prefill figures without a role override.
    shared = plan(replace(spec, prefill=replace(spec.prefill, gpu_memory_utilization=None)), prompt_tokens=traffic.isl)
    baseline_batch = kv_room(shared.prefill.kv_cache_tokens, per_request)

    def baseline_at(load: Load) -> Estimate:
        return estimator.aggregated(tp=tp, replicas=nodes * facts.gpus // tp, load=load, max_batch=baseline_batch,
                                    nodes=nodes, bands=thorough)

    def tuned_at(load: Load) -> Estimate | None:
        if not thorough:
            return None
        replicas = nodes * facts.gpus // tp
        # A cap at or above the requests each engine can hold in a closed loop changes nothing: tried once.
        ceiling = baseline_batch if load.concurrency is None else min(baseline_batch,
                                                                      math.ceil(load.concurrency / replicas))
        grid = sorted({(budget, min(seqs, ceiling)) for budget, seqs in TUNED_GRID if seqs <= budget})
        tried = [estimator.with_engine(replace(engine, max_num_batched_tokens=budget)).aggregated(
            tp=tp, replicas=replicas, load=load, max_batch=seqs, nodes=nodes, bands=False,
            description=f"{replicas} x TP{tp} vLLM replica(s) with --max-num-batched-tokens {budget} "
                        f"--max-num-seqs {seqs}") for budget, seqs in grid]
        fit = [e for e in tried if e.sustains_load and not misses(e, traffic.sla)]
        if not fit:
            return None
        if load.rate is not None:  # at a fixed rate every layout serves the same throughput: the fastest tokens win
            return min(fit, key=lambda e: (e.tpot_s, e.ttft_s))
        return max(fit, key=lambda e: (e.output_tokens_per_s, -e.tpot_s))

    def dpd_at(load: Load) -> Estimate:
        if below_threshold:
            return estimator.aggregated(
                tp=tp, replicas=spec.decode.replicas, load=load, max_batch=decode_seqs, nodes=dpd_nodes,
                layout=Layout.DISAGGREGATED, bands=thorough,
                description=f"decoder only ({spec.decode.replicas} x TP{tp}): prompts below the routing threshold "
                            "skip the prefiller")
        return estimator.disaggregated(tp=tp, prefill_replicas=spec.prefill.replicas,
                                       decode_replicas=spec.decode.replicas, load=load,
                                       decode_max_num_seqs=decode_seqs, transfer_s=transfer_s, nodes=dpd_nodes,
                                       bands=thorough)

    loads = [Load(concurrency=c) for c in traffic.concurrency]
    if traffic.request_rate is not None:
        loads.append(Load(rate=traffic.request_rate))
    points = [_point(baseline_at, dpd_at, traffic, load, tuned_at) for load in loads]
    warnings = [w.render() for w in checked.warnings]
    warnings += [text for point in points for text in near_capacity(point)]
    if published_layout(spec, architecture_name=architecture.name, baseline_nodes=nodes, traffic=traffic):
        gpu = next(name for name, instance in published.GPUS.items() if instance is spec.instance_type)
        warnings += [text for point in points for text in outside_published(point, gpu=gpu)]
    if below_threshold:
        warnings.append(f"[below-threshold] traffic.isl: {traffic.isl}-token prompts are below routing.threshold "
                        f"{spec.routing.threshold}, so the router sends them straight to the decoder and the "
                        "prefill nodes stay idle; lower the threshold to disaggregate them")
    return Advice(model=spec.model.name, instance_type=facts.name, isl=traffic.isl, osl=traffic.osl,
                  baseline_nodes=nodes, points=tuple(points), sla=traffic.sla, warnings=tuple(warnings),
                  assumptions=assumptions(estimator, spec, transfer_s=transfer_s), price=estimator.price,
                  by_analogy_to=target.model_path if target.analogy_of else None)


# Above this share of its capacity an open loop of OPEN_LOOP_REQUESTS arrivals has not reached steady
# state: the audit of this model found the queue at 99 % of capacity 5.0 s against M/D/1's 8.2 s.
NEAR_CAPACITY = 0.9


def near_capacity(point: AdvicePoint) -> list[str]:
    """A warning for each layout an open loop runs above :data:`NEAR_CAPACITY`, with the simulated horizon."""
    rate = point.request_rate
    if rate is None:
        return []
    found = []
    for side in (point.aggregated, point.disaggregated):
        load = rate / side.capacity_per_s if side.capacity_per_s > 0 else math.inf
        if side.sustains_load and load > NEAR_CAPACITY:
            horizon = queueing.OPEN_LOOP_REQUESTS / rate
            found.append(f"[near-capacity] {side.layout}: {rate:g} requests/s is {load:.0%} of its capacity "
                         f"({side.capacity_per_s:.2f} requests/s); the simulation covers "
                         f"{queueing.OPEN_LOOP_REQUESTS:,} arrivals ({horizon:,.0f} s), too short for the queue "
                         "to settle, so its queue and TTFT are a lower bound; keep the load below "
                         f"{NEAR_CAPACITY:.0%} of capacity or add a prefiller (--search)")
    return found


def published_layout(spec: DpdSpec, *, architecture_name: str, baseline_nodes: int, traffic: Traffic) -> bool:
    """Whether the comparison is the one AWS published (docs/advise.md, "Checked against the published
    measurements"): its GPU, model, TP and 1P+1D against one node, at a request shape near its own."""
    return (spec.instance_type in published.GPUS.values() and architecture_name == published.BLOG_ARCHITECTURE
            and spec.tensor_parallel_size == published.BLOG_TP and baseline_nodes == 1
            and (spec.prefill.replicas, spec.decode.replicas) == (1, 1) and traffic.isl >= spec.routing.threshold
            and published.near_the_blog(isl=traffic.isl, osl=traffic.osl))


def outside_published(point: AdvicePoint, *, gpu: str) -> list[str]:
    """A warning for each predicted change outside what AWS measured at the nearest published concurrency."""
    if point.request_rate is not None:
        return []
    dpd, agg = point.disaggregated, point.aggregated
    if not (dpd.sustains_load and agg.sustains_load):
        return []
    changes = {published.TPOT: dpd.tpot_s / agg.tpot_s - 1, published.E2E: dpd.e2e_s / agg.e2e_s - 1,
               published.THROUGHPUT: dpd.output_tokens_per_s / agg.output_tokens_per_s - 1}
    found = []
    for metric, change in changes.items():
        figure = published.nearest(gpu, metric, point.concurrency)
        # Within the data's own resolution (TARGET_MEAN: what two runs of a level differ by) is not outside.
        if figure is None or math.isnan(change) or figure.miss(change) <= published.TARGET_MEAN:
            continue
        found.append(f"{metric} {change * 100:+.0f} % (AWS: {figure.describe()} at {figure.concurrency})")
    if not found:
        return []
    return [f"[outside-published] concurrency {point.concurrency}: DPD's predicted {' and '.join(found)} "
            f"lie{'' if len(found) > 1 else 's'} more than {published.TARGET_MEAN * 100:.0f} points outside what "
            f"AWS measured for this layout on {gpu} ({published.ISL:,} / {published.OSL} tokens, 1P+1D against 1 "
            "node); read the prediction with the published figures (docs/advise.md, 'Checked against the "
            "published measurements') or calibrate on your own bench (--calibrate)"]


def dpd_node_count(spec: DpdSpec) -> int:
    """The nodes the stack creates for the spec's roles (the project's one node count, idle GPUs included)."""
    return sum(spec.role_nodes(role) for _, role in spec.roles())


def kv_room(kv_cache_tokens: int, tokens_per_request: int) -> int:
    """Requests one engine's KV cache holds (the planner's per-GPU token figure), at least 1."""
    return max(1, kv_cache_tokens // tokens_per_request)


def decoder_slots(spec: DpdSpec, *, kv_cache_tokens: int, tokens_per_request: int) -> int:
    """Requests one decoder runs at once: its ``max_num_seqs``, capped by the requests its KV cache holds."""
    return min(kv_room(kv_cache_tokens, tokens_per_request), spec.decode.max_num_seqs or DEFAULT_MAX_NUM_SEQS["decode"])


def _point(baseline_at: Callable[[Load], Estimate], dpd_at: Callable[[Load], Estimate], traffic: Traffic,
           load: Load, tuned_at: Callable[[Load], Estimate | None]) -> AdvicePoint:
    agg, dpd = baseline_at(load), dpd_at(load)
    missed = {side.layout.value: found for side in (agg, dpd) if (found := misses(side, traffic.sla))}
    at_rate = load.rate is not None
    tuned = tuned_at(load)
    text = verdict(agg, dpd, load=load.describe(), fixed_rate=at_rate)
    if tuned is not None and not dpd.sustains_load:
        text += (f"; a tuned aggregated engine sustains it: {tuned.description} (TTFT {tuned.ttft_s * 1000:,.0f} ms, "
                 f"TPOT {tuned.tpot_s * 1000:.1f} ms)")
    elif tuned is not None and tuned_wins(tuned, dpd, fixed_rate=at_rate):
        gain = _change(tuned.output_tokens_per_s, dpd.output_tokens_per_s)
        what = (f"TPOT {tuned.tpot_s * 1000:.1f} ms against DPD's {dpd.tpot_s * 1000:.1f} ms" if at_rate
                else f"{gain:.0%} more throughput than DPD at TPOT {tuned.tpot_s * 1000:.1f} ms")
        text += f"; but a tuned aggregated engine wins: {tuned.description} gives {what}"
    return AdvicePoint(concurrency=dpd.concurrency, request_rate=load.rate, aggregated=agg, disaggregated=dpd,
                       misses=missed, verdict=text, tuned_aggregated=tuned)


# The aggregated engines tried at the baseline's node count: a step budget (``--max-num-batched-tokens``;
# smaller budgets interleave prefill chunks more finely with the decodes) and a batch cap
# (``--max-num-seqs``), never above the baseline's KV room.
TUNED_BUDGETS = (512, 2048, 8192, 16384)
TUNED_GRID = tuple((budget, seqs) for budget in TUNED_BUDGETS for seqs in (8, 16, 32, 64, 128, 256))


def tuned_wins(tuned: Estimate, dpd: Estimate, *, fixed_rate: bool) -> bool:
    """A tuned aggregated engine beats DPD: more throughput (closed loop), or lower TPOT and TTFT (fixed rate)."""
    if not dpd.sustains_load:
        return True  # the tuned engine sustains what DPD cannot
    if fixed_rate:
        return tuned.tpot_s < dpd.tpot_s and tuned.ttft_s < dpd.ttft_s
    return _sign(_change(tuned.output_tokens_per_s, dpd.output_tokens_per_s)) > 0


def assumptions(estimator: Estimator, spec: DpdSpec, *, transfer_s: float) -> dict[str, str]:
    """What every figure rests on; printed with each result."""
    found = dict(estimates.versions(estimator.target))
    found["engine_version"] = (f"the kernel data were measured on {estimator.target.backend} "
                               f"{estimates.kernel_version(estimator.target)}; the DPD images run vLLM "
                               f"{VLLM_VERSION}, whose kernels and scheduler may differ (calibrate with bench)")
    found["engine"] = estimator.engine.describe()
    found["transport"] = (f"EFA at the node's line rate ({spec.instance_type.facts.network_gbps:,} Gbps): the "
                          f"planner's KV transfer time ({transfer_s * 1000:.1f} ms for the prompt) is added to DPD's "
                          "TTFT; AIConfigurator's disaggregated estimate has no network term")
    found["load"] = ("an event simulation of the same queueing model for both layouts on AIConfigurator's per-step "
                     "kernel timings: prompts wait for a prefill lane (FCFS), decode steps slow as the batch grows; "
                     "a concurrency is a closed loop of clients, a request rate Poisson arrivals, saturated at or "
                     "above the layout's capacity")
    found["factors"] = estimator.factors.describe()
    found["cost"] = (estimator.price.describe() if estimator.price is not None else
                     f"no price for {spec.instance_type.facts.name} "
                     f"({unpriced_reason(spec.instance_type.facts.name)}): give --price-per-node-hour")
    found["layouts"] = ("DPD: one prefill at a time per prefiller, each decoder up to its max_num_seqs; baseline: "
                        "the same model, TP, engine flags and gpu_memory_utilization without pdSpec, a replica on "
                        "every GPU of its nodes; every engine's batch is capped by the KV cache the planner sizes; "
                        "nodes are the nodes the stack creates, idle GPUs included")
    found["estimate"] = ESTIMATE_NOTE
    return found
