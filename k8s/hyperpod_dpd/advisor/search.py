"""``search(spec, traffic)``: the DPD layout with the fewest nodes that meets the SLAs at one load.

Every candidate is a full spec (whole nodes per role, one TP for both roles because LMCache's cache
key includes the world size, ``max_num_seqs`` per role, a PD buffer that holds the decoder's
in-flight transfers) and must pass :func:`hyperpod_dpd.check`, so TP dividing the heads, weights and
buffer fitting each GPU and the single-decoder warning come from the same rules as every synth.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace

from hyperpod_dpd.advisor.comparison import MAX_SIMULATED_NODES, assumptions, dpd_node_count, kv_room, misses
from hyperpod_dpd.advisor.engine import engine_settings
from hyperpod_dpd.advisor.estimates import Estimate, Estimator
from hyperpod_dpd.advisor.steps import PhaseFactors
from hyperpod_dpd.advisor.systems import target_for
from hyperpod_dpd.advisor.traffic import MAX_CONCURRENCY, Sla, Traffic
from hyperpod_dpd.contracts.prices import node_price
from hyperpod_dpd.contracts.vllm import DEFAULT_MAX_NUM_SEQS
from hyperpod_dpd.errors import DpdError, Problem, SpecError
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.planner import chunks_for, kv_bytes_per_token_per_rank, plan, resolve_architecture
from hyperpod_dpd.planner.assumptions import CUDA_CONTEXT_HEADROOM_BYTES
from hyperpod_dpd.spec import DpdSpec, RoleSpec
from hyperpod_dpd.spec.units import ByteSize
from hyperpod_dpd.validation import check

DEFAULT_MAX_NODES = 8
DEFAULT_TOP = 3


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One DPD layout that passed ``check()``, with its estimate at the searched load."""

    spec: DpdSpec
    prefill_nodes: int
    decode_nodes: int
    estimate: Estimate
    misses: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def nodes(self) -> int:
        """The nodes the stack creates for this layout (the project's one node count)."""
        return self.estimate.nodes

    @property
    def runnable(self) -> bool:
        return runnable(self.spec)

    def to_json(self) -> dict[str, object]:
        spec = self.spec
        return {"nodes": self.nodes, "prefill_nodes": self.prefill_nodes, "decode_nodes": self.decode_nodes,
                "tensor_parallel_size": spec.tensor_parallel_size, "prefill_replicas": spec.prefill.replicas,
                "decode_replicas": spec.decode.replicas, "prefill_max_num_seqs": spec.prefill.max_num_seqs,
                "decode_max_num_seqs": spec.decode.max_num_seqs,
                "pd_buffer_size": str(spec.kv_cache.pd_buffer_size), "estimate": self.estimate.to_json(),
                "runnable_by_operator": self.runnable, "misses_sla": list(self.misses),
                "warnings": list(self.warnings)}


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """The best layouts (fewest nodes first), how many were tried, and why the others were refused."""

    load: str
    best: tuple[Candidate, ...]
    evaluated: int
    rejected: Mapping[str, int]
    assumptions: Mapping[str, str]

    def to_json(self) -> dict[str, object]:
        return {"load": self.load, "best": [c.to_json() for c in self.best], "evaluated": self.evaluated,
                "rejected_by_check": dict(self.rejected), "assumptions": dict(self.assumptions)}


class NoLayoutMeetsSla(DpdError):
    """No layout within the node limit meets the SLAs; ``closest`` is the one that misses by least."""

    def __init__(self, message: str, *, closest: Candidate | None) -> None:
        super().__init__(message)
        self.closest = closest


def pd_buffer_for(spec: DpdSpec, *, decode_max_num_seqs: int, isl: int) -> ByteSize:
    """Whole GiB holding ``decode_max_num_seqs`` transfers of an ``isl``-token prompt per rank (planner chunks).

    Never below the spec's buffer, and never so large that vLLM's share and the buffer leave a GPU less
    than the CUDA context headroom the planner asks for (the decoder then admits transfers as room frees).
    """
    architecture = resolve_architecture(spec)
    chunk = spec.kv_cache.chunk_tokens
    needed = decode_max_num_seqs * chunks_for(isl, chunk) * kv_bytes_per_token_per_rank(
        architecture, spec.tensor_parallel_size) * chunk
    gpu = spec.instance_type.facts.gpu_memory.bytes
    share = max(int(gpu * spec.role_gpu_memory_utilization(role)) for _, role in spec.roles())
    room_gib = (gpu - share - CUDA_CONTEXT_HEADROOM_BYTES) // 2**30
    gib = max(1, min(math.ceil(needed / 2**30), room_gib))
    return max(spec.kv_cache.pd_buffer_size, ByteSize.gibibytes(gib))


def layout(spec: DpdSpec, *, tensor_parallel_size: int, prefill_nodes: int, decode_nodes: int,
           concurrency: int, isl: int, osl: int) -> DpdSpec:
    """``spec`` with the given layout: whole nodes per role, ``max_num_seqs`` from each role's share of the load.

    The decoder's ``max_num_seqs`` is its share of ``concurrency``, capped by the requests its KV cache
    holds (the planner's figure); raises :class:`SpecError` when the planner cannot size the layout.
    """
    gpus = spec.instance_type.facts.gpus
    prefill = prefill_nodes * gpus // tensor_parallel_size
    decode = decode_nodes * gpus // tensor_parallel_size

    def role(current: RoleSpec, replicas: int, seqs: int | None) -> RoleSpec:
        return replace(current, replicas=replicas, max_num_seqs=seqs, autoscaling=None,
                       resources=replace(current.resources, gpus=None))

    shape = replace(spec, tensor_parallel_size=tensor_parallel_size,
                    prefill=role(spec.prefill, prefill, min(DEFAULT_MAX_NUM_SEQS["prefill"],
                                                            max(1, math.ceil(concurrency / prefill)))),
                    decode=role(spec.decode, decode, None))
    room = kv_room(plan(shape, prompt_tokens=isl).decode.kv_cache_tokens, isl + osl)
    seqs = max(1, min(math.ceil(concurrency / decode), room))
    return replace(shape, decode=replace(shape.decode, max_num_seqs=seqs),
                   kv_cache=replace(shape.kv_cache, pd_buffer_size=pd_buffer_for(shape, decode_max_num_seqs=seqs,
                                                                                 isl=isl)))


def runnable(spec: DpdSpec) -> bool:
    """A layout the operator runs: one decoder pod (one decode deployment) and roles of whole nodes."""
    gpus = spec.instance_type.facts.gpus
    return spec.decode.replicas == 1 and all(role.replicas * spec.role_gpus(role) % gpus == 0
                                             for _, role in spec.roles())


def search(spec: DpdSpec, traffic: Traffic, *, max_nodes: int = DEFAULT_MAX_NODES, top: int = DEFAULT_TOP,
           any_layout: bool = False, factors: PhaseFactors | None = None,
           price_per_node_hour: float | None = None) -> SearchResult:
    """The ``top`` layouts with the fewest nodes (at most ``max_nodes``) meeting ``traffic``'s SLAs.

    Only layouts the operator runs (:func:`runnable`) are tried unless ``any_layout``. ``traffic``
    must have exactly one load point and at least one SLA. Raises :class:`NoLayoutMeetsSla` when
    nothing within ``max_nodes`` meets them, :class:`SpecError` for bad input.
    """
    traffic.validate(spec)
    problems = _search_problems(traffic, max_nodes=max_nodes, top=top)
    if problems:
        raise SpecError(problems, source="the search")
    architecture = resolve_architecture(check(spec).spec)
    facts = spec.instance_type.facts
    estimator = Estimator(target_for(spec.instance_type, architecture), architecture, isl=traffic.isl,
                          osl=traffic.osl, gpus_per_node=facts.gpus, engine=engine_settings(spec), factors=factors,
                          price=node_price(spec.instance_type, override=price_per_node_hour))
    sla = traffic.sla
    concurrency = traffic.concurrency[0] if traffic.concurrency else None
    load = f"concurrency {concurrency}" if concurrency is not None else f"{traffic.request_rate:g} requests/s"
    rejected: Counter[str] = Counter()
    found: list[Candidate] = []
    evaluated = 0
    first_meeting: int | None = None
    for nodes in range(2, max_nodes + 1):
        if first_meeting is not None and nodes > first_meeting + 1:
            break
        sizes = [t for t in range(1, facts.gpus + 1) if facts.gpus % t == 0] if any_layout else [facts.gpus]
        for tp in sizes:
            for prefill_nodes in range(1, nodes):
                if not any_layout and nodes - prefill_nodes != 1:
                    continue  # one decoder of TP = GPUs per node fills exactly one node
                candidate = _evaluate(spec, estimator, traffic, tp=tp, prefill_nodes=prefill_nodes,
                                      decode_nodes=nodes - prefill_nodes, concurrency=concurrency, rejected=rejected)
                if candidate is None:
                    continue
                evaluated += 1
                found.append(candidate)
                if not candidate.misses and first_meeting is None:
                    first_meeting = nodes
    meeting = sorted((c for c in found if not c.misses), key=_rank)
    if not meeting:
        closest = min(found, key=lambda c: _shortfall(c.estimate, sla), default=None)
        raise NoLayoutMeetsSla(_no_layout_message(traffic, load, max_nodes, closest), closest=closest)
    best = tuple(_with_bottleneck(c) for c in meeting[:top])
    return SearchResult(load=load, best=best, evaluated=evaluated, rejected=dict(sorted(rejected.items())),
                        assumptions=assumptions(estimator, best[0].spec, transfer_s=_transfer(best[0].spec, traffic)))


def _search_problems(traffic: Traffic, *, max_nodes: int, top: int) -> list[Problem]:
    found = []
    if len(traffic.concurrency) + (traffic.request_rate is not None) != 1:
        found.append(Problem(field="traffic.concurrency", value=traffic.concurrency, message="the search takes "
                             "exactly one load point", fix="give one --concurrency value or --request-rate"))
    if not traffic.sla.any:
        found.append(Problem(field="traffic.ttft_ms", value=None, message="the search needs an SLA to meet",
                             fix="give --ttft-ms and/or --tpot-ms"))
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 2:
        found.append(Problem(field="max_nodes", value=max_nodes, message="must allow at least one prefill and "
                             "one decode node", fix="give 2 or more"))
    elif max_nodes > MAX_SIMULATED_NODES:
        found.append(Problem(field="max_nodes", value=max_nodes, message=f"is more than the {MAX_SIMULATED_NODES} "
                             "nodes the advisor simulates (every layout up to it is played through)",
                             fix=f"give at most {MAX_SIMULATED_NODES}"))
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        found.append(Problem(field="top", value=top, message="must be at least 1", fix="give e.g. 3"))
    return found


def _transfer(spec: DpdSpec, traffic: Traffic) -> float:
    return plan(spec, prompt_tokens=traffic.isl).request.transfer_seconds_at_line_rate


def _evaluate(spec: DpdSpec, estimator: Estimator, traffic: Traffic, *, tp: int, prefill_nodes: int,
              decode_nodes: int, concurrency: int | None, rejected: Counter[str]) -> Candidate | None:
    """The candidate for one layout, or ``None`` after counting what refused it (check(), planner, memory)."""
    try:
        return _candidate(spec, estimator, traffic, tp=tp, prefill_nodes=prefill_nodes, decode_nodes=decode_nodes,
                          concurrency=concurrency)
    except SpecError as err:
        for problem in err.problems:
            rejected[f"{problem.field}: {problem.message}"] += 1
        return None


def _candidate(spec: DpdSpec, estimator: Estimator, traffic: Traffic, *, tp: int, prefill_nodes: int,
               decode_nodes: int, concurrency: int | None) -> Candidate:
    load = Load(concurrency=concurrency, rate=traffic.request_rate if concurrency is None else None)
    # A request rate is first sized at the decoder batch the layout can hold at all, then at the requests
    # it keeps in flight at that rate, so the written spec asks for no more slots (and buffer) than it uses.
    in_flight = concurrency if concurrency is not None else MAX_CONCURRENCY

    def sized(requests: int) -> tuple[DpdSpec, Estimate]:
        shape = layout(spec, tensor_parallel_size=tp, prefill_nodes=prefill_nodes, decode_nodes=decode_nodes,
                       concurrency=requests, isl=traffic.isl, osl=traffic.osl)
        return shape, estimator.disaggregated(
            tp=tp, prefill_replicas=shape.prefill.replicas, decode_replicas=shape.decode.replicas, load=load,
            decode_max_num_seqs=shape.decode.max_num_seqs or requests, transfer_s=_transfer(shape, traffic),
            nodes=dpd_node_count(shape), bands=False)

    candidate, estimate = sized(in_flight)
    if concurrency is None and estimate.sustains_load:
        candidate, estimate = sized(rate_headroom(estimate.concurrency))
    checked = check(candidate)
    return Candidate(spec=candidate, prefill_nodes=prefill_nodes, decode_nodes=decode_nodes, estimate=estimate,
                     misses=misses(estimate, traffic.sla), warnings=tuple(w.render() for w in checked.warnings))


def rate_headroom(mean_in_flight: int) -> int:
    """Slots for a Poisson load of ``mean_in_flight`` requests: the mean plus three standard deviations.

    The count of requests in flight at Poisson arrivals is about Poisson itself (M/G/infinity), so
    ``L + 3 sqrt(L)`` slots hold it all but about 0.1 % of the time.
    """
    return max(1, math.ceil(mean_in_flight + 3 * math.sqrt(mean_in_flight)))


def _with_bottleneck(candidate: Candidate) -> Candidate:
    """Say so when requests wait longer for a prefiller than the decode takes: more prefill nodes help most."""
    e = candidate.estimate
    decode_s = e.e2e_s - e.ttft_s
    if e.sustains_load and e.queue_s > decode_s:
        note = (f"[prefill-bound] requests wait {e.queue_s * 1000:,.0f} ms for a prefiller, longer than their "
                f"{decode_s:.1f} s of decoding: a TTFT target (--ttft-ms) or another prefill node would show it")
        return replace(candidate, warnings=(*candidate.warnings, note))
    return candidate


def _rank(candidate: Candidate) -> tuple[bool, int, int, float]:
    """A layout the operator runs first, then fewest nodes, fewest check() warnings, most output per GPU."""
    return (not runnable(candidate.spec), candidate.nodes, len(candidate.warnings),
            -candidate.estimate.output_tokens_per_s_per_gpu)


def _shortfall(estimate: Estimate, sla: Sla) -> float:
    """How far the estimate is from the SLA: the largest ratio of figure to target."""
    over = [estimate.ttft_s / sla.ttft_s if sla.ttft_s else 0.0, estimate.tpot_s / sla.tpot_s if sla.tpot_s else 0.0]
    return max(over) if estimate.sustains_load else math.inf


def _no_layout_message(traffic: Traffic, load: str, max_nodes: int, closest: Candidate | None) -> str:
    targets = " and ".join(text for text in (
        f"TTFT <= {traffic.ttft_ms:g} ms" if traffic.ttft_ms is not None else "",
        f"TPOT <= {traffic.tpot_ms:g} ms" if traffic.tpot_ms is not None else "") if text)
    message = f"no DPD layout of up to {max_nodes} nodes meets {targets} at {load}"
    if closest is None:
        return message + "; no layout passed check() (see the rejected reasons)"
    e = closest.estimate
    return (f"{message}; the closest, {closest.nodes} nodes ({e.description}), gives TTFT {e.ttft_s * 1000:.0f} ms "
            f"and TPOT {e.tpot_s * 1000:.1f} ms. Relax the SLA, lower the load, or allow more nodes (--max-nodes)")
