"""Did the router disaggregate a benchmark level's requests, and did the decoder receive their KV cache?

Two counter snapshots, one before and one after a level, give the answer without trusting any
client-side number:

- the router's ``dpd_routing_disaggregated_total``, ``dpd_routing_local_total`` (short prompts sent
  straight to the decoder) and ``dpd_routing_fallback_total`` (AWS's dashboard: "Fallback (error)"),
  as the HyperPod inference dashboard queries them;
- the decoder's ``vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}`` (vLLM 0.19,
  ``vllm/v1/metrics/loggers.py``): prompt tokens whose KV arrived from the prefiller rather than
  being computed locally. Disaggregated requests with no such tokens mean the transfer failed and
  the decoder recomputed (the operator's ``Retrieved 0 out of N``).

The same snapshots give each role's prefix-cache hit rate per level: vLLM 0.19's
``vllm:prefix_cache_hits_total`` over ``vllm:prefix_cache_queries_total`` (tokens; ``vllm/v1/metrics/
loggers.py`` l.505 and l.516, ``data/metrics-contract.json``), on the decoders and, when bench can read
them, the prefillers: a level that re-sent earlier prompts, or a shared-prefix workload, shows there.

The snapshots are read through the API server's pod proxy, so ``bench`` needs no port-forward and
no network path to the pods: ``get`` on ``pods/proxy`` in both namespaces (and ``pods/log`` in the
router's, whose documented routing line counts when its metrics carry no routing counter).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median_low
from typing import Any, Protocol

from hyperpod_dpd.benchmark.proof.trust import Trust, TrustWarning
from hyperpod_dpd.benchmark.run.job import RESULTS_MARK
from hyperpod_dpd.benchmark.run.route import MARGIN, ROUND_TO, RoutePath, isl_for_model, route_problems
from hyperpod_dpd.clients.kube import JsonDict, KubeError
from hyperpod_dpd.contracts.operator import (
    OPERATOR_NAMESPACE,
    ROLE_LABEL,
    ROUTER_CONTAINER,
    role_deployment,
    router_deployment,
)
from hyperpod_dpd.contracts.router import clears
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.observability import evidence as ev
from hyperpod_dpd.observability.metrics import INTER_TOKEN_LATENCY, KV_STORE_PUT_TIME, PREFILL_TIME, QUEUE_TIME, TTFT
from hyperpod_dpd.ops.dpd_counters import DEFAULT_METRICS_PATH as METRICS_PATH
from hyperpod_dpd.ops.dpd_counters import LABEL, ROUTING_LINE, SAMPLE, routing_decisions, sample_value
from hyperpod_dpd.spec import DpdSpec

DISAGGREGATED = "dpd_routing_disaggregated_total"
LOCAL = "dpd_routing_local_total"
FALLBACK = "dpd_routing_fallback_total"
E2E_TTFT = "dpd_e2e_ttft_seconds"  # the router's histogram: prefill, KV transfer and the first decode step
EXTERNAL_KV = "vllm:prompt_tokens_by_source_total"
EXTERNAL_SOURCE = "external_kv_transfer"
CACHE_HIT_SOURCE = "local_cache_hit"  # the decoder's own prefix cache: not recomputed, not transferred
PROMPT_TOKENS = "vllm:prompt_tokens_total"
# Requests an engine finished, by finished_reason (vllm/v1/metrics/loggers.py:645, vLLM 0.19.0; the metrics contract).
# A client that went away is counted in none of them: AsyncLLM.abort goes to OutputProcessor.abort_requests
# (vllm/v1/engine/output_processor.py:446-505), which never reaches _update_stats_from_finished. "abort" counts only
# the engine's own aborts (pause_generation(mode="abort"), vllm/v1/engine/core.py:1528; a streamed input's end,
# vllm/v1/core/sched/scheduler.py:1746): requests no client received whole, so they are left out too.
REQUEST_SUCCESS = "vllm:request_success_total"
ABORTED = "abort"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"  # vllm/v1/metrics/loggers.py:516 (vLLM 0.19.0), in tokens
PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"  # vllm/v1/metrics/loggers.py:505, in tokens
# The vLLM pods whose prefix cache is reported: their key's role -> the role it is reported under.
CACHE_ROLES = {"decoder": "decoder", "prefiller": "prefill"}
POD_TEMPLATE_HASH = "pod-template-hash"  # set by the Deployment controller on every pod it makes
MIN_FRACTION = 0.95  # a DPD level below this did not measure DPD
# A disaggregated prompt's KV arrives whole but for its last, partly filled block, which the decoder computes
# (vLLM loads whole blocks: at most 16 tokens of a 4,352-token prompt, under 1%); a tenth missing is transfers
# that failed and were recomputed (kv_load_failure_policy=recompute), not rounding. The evidence model's, which
# the alerts and verify judge by too.
KV_MIN_FRACTION = ev.MIN_ARRIVED_SHARE


def sample_sum(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The sum of every sample of ``name`` in Prometheus text whose labels include ``labels`` (0 when none)."""
    return sample_value(text, name, labels) or 0.0


def histogram_buckets(text: str, name: str) -> dict[float, float]:
    """``name``'s cumulative buckets in Prometheus text, by upper bound (``+Inf`` as infinity), summed over labels."""
    buckets: dict[float, float] = {}
    for line in text.splitlines():
        found = SAMPLE.match(line)
        if found is None or found["name"] != f"{name}_bucket":
            continue
        labels = {pair["key"]: pair["value"] for pair in LABEL.finditer(found["labels"] or "")}
        try:
            bound, value = float(labels.get("le", "nan")), float(found["value"])
        except ValueError:
            continue
        if not math.isnan(bound):
            buckets[bound] = buckets.get(bound, 0.0) + value
    return buckets


@dataclass(frozen=True)
class BucketQuantile:
    """Where a histogram puts its ``q`` quantile: the bucket ``(lower, upper]`` that holds it and Prometheus'
    linear estimate inside it. ``upper`` is ``math.inf`` (and ``estimate`` None) when the quantile lies above the
    top finite bucket, where the histogram says only that it is more than ``lower``."""

    lower: float
    upper: float
    estimate: float | None

    @property
    def finite(self) -> bool:
        return not math.isinf(self.upper)


def bucket_quantile(buckets: Mapping[float, float], q: float) -> BucketQuantile | None:
    """The ``q`` quantile of cumulative bucket counts (by upper bound), found as Prometheus' ``histogram_quantile``
    finds it (prometheus/promql/quantile.go ``BucketQuantile``, v3.x: the first bucket whose count reaches
    ``q * total``, linear inside it, the first bucket starting at 0); None when nothing was counted. Prometheus
    returns the top finite bound for a quantile in the ``+Inf`` bucket; this says "above it" instead."""
    total = buckets.get(math.inf, 0.0)
    return bucket_at_rank(buckets, q * total) if 0.0 <= q <= 1.0 else None


def bucket_at_rank(buckets: Mapping[float, float], rank: float) -> BucketQuantile | None:
    """The bucket holding the ``rank``-th smallest counted value (1 the fastest), with the linear estimate inside it;
    None when nothing was counted or there is no ``+Inf`` bucket (then the total, so every rank, is unknown). The
    counts are taken as their running maximum first, as Prometheus does for a histogram whose buckets were scraped
    out of step (``ensureMonotonicAndIgnoreSmallDeltas``)."""
    ordered = sorted(buckets.items())
    if not ordered or not math.isinf(ordered[-1][0]) or ordered[-1][1] <= 0:
        return None
    lower, below, highest = 0.0, 0.0, 0.0
    for bound, raw in ordered:
        count = highest = max(highest, raw)
        if count >= rank:
            if math.isinf(bound):
                return BucketQuantile(lower=lower, upper=bound, estimate=None)
            inside = count - below
            share = (rank - below) / inside if inside > 0 else 1.0
            return BucketQuantile(lower=lower, upper=bound, estimate=lower + (bound - lower) * share)
        lower, below = bound, count
    return None


def quantile_bounds(buckets: Mapping[float, float], q: float) -> tuple[float, float] | None:
    """The finite bucket ``[lower, upper]`` that holds the ``q`` quantile; None when nothing was counted or it lies
    in the ``+Inf`` bucket."""
    found = bucket_quantile(buckets, q)
    return (found.lower, found.upper) if found is not None and found.finite else None


# The histograms the TTFT decomposition reads, per role (names from the metrics contract,
# benchmark/proof/decomposition.py says what each stage is): the prefiller's queue, prefill and LMCache put (the KV
# push to the decoder), the decoder's queue, first step and its own TTFT.
PREFILLER_STAGE_FAMILIES = (QUEUE_TIME.name, PREFILL_TIME.name, KV_STORE_PUT_TIME.name)
DECODER_STAGE_FAMILIES = (QUEUE_TIME.name, PREFILL_TIME.name, TTFT.name)

# One pod's counters, by name: a router's (routing decisions, its TTFT histogram) or a decoder's (prompt tokens
# by source, prompt and generated tokens), and its containers' restarts.
RESTARTS = "restarts"
# A pod listed Running and serving whose metrics did not answer (a crash-looping container, a proxy error): its entry
# holds only this mark and its restarts, so the snapshot stands without it and the levels beside it say they miss it
UNREAD = "unread"
BUCKET = "ttft_le:"  # a router TTFT bucket, by its upper bound
ENGINE_BUCKET = "engine_ttft_le:"  # a vLLM pod's vllm:time_to_first_token_seconds bucket, by its upper bound
FINISHED = "finished_requests"  # a vLLM pod's requests finished other than aborted
ROUTER_SERIES = {"disaggregated": (DISAGGREGATED, None), "local": (LOCAL, None), "fallback": (FALLBACK, None),
                 "ttft_seconds": (f"{E2E_TTFT}_sum", None), "ttft_count": (f"{E2E_TTFT}_count", None)}
DECODER_SERIES = {"external_kv_tokens": (EXTERNAL_KV, {"source": EXTERNAL_SOURCE}),
                  "cache_hit_tokens": (EXTERNAL_KV, {"source": CACHE_HIT_SOURCE}),
                  "prompt_tokens": (PROMPT_TOKENS, None), "generation_tokens": (GENERATION_TOKENS, None),
                  "prefix_cache_hits": (PREFIX_CACHE_HITS, None), "prefix_cache_queries": (PREFIX_CACHE_QUERIES, None),
                  # each decoder's own time between output tokens, so that one slow decoder shows beside its siblings
                  "itl_seconds": (f"{INTER_TOKEN_LATENCY.name}_sum", None),
                  "itl_count": (f"{INTER_TOKEN_LATENCY.name}_count", None)}
STAGE = "stage:"  # a histogram's _sum or _count, for the TTFT decomposition (benchmark/proof/decomposition.py)
DECODER_SERIES |= {f"{STAGE}decode:{family}{part}": (f"{family}{part}", None)
                   for family in DECODER_STAGE_FAMILIES for part in ("_sum", "_count")}
# A prefiller is read for its prefix cache and the TTFT decomposition's prefill stages, nothing else.
PREFILLER_SERIES = {"prefix_cache_hits": (PREFIX_CACHE_HITS, None),
                    "prefix_cache_queries": (PREFIX_CACHE_QUERIES, None)}
PREFILLER_SERIES |= {f"{STAGE}prefill:{family}{part}": (f"{family}{part}", None)
                     for family in PREFILLER_STAGE_FAMILIES for part in ("_sum", "_count")}


def pod_sample(text: str, *, router: bool, restarts: int = 0, prefiller: bool = False) -> dict[str, float]:
    """The counters of one pod's ``/metrics`` text; a series the pod does not export is left out (not 0)."""
    found: dict[str, float] = {RESTARTS: float(restarts)}
    series = ROUTER_SERIES if router else PREFILLER_SERIES if prefiller else DECODER_SERIES
    for key, (name, labels) in series.items():
        value = sample_value(text, name, labels)
        if value is not None:
            found[key] = value
    if router:
        found.update({f"{BUCKET}{bound!r}": count for bound, count in histogram_buckets(text, E2E_TTFT).items()})
    elif not prefiller:
        engine = histogram_buckets(text, TTFT.name)
        found.update({f"{ENGINE_BUCKET}{bound!r}": count for bound, count in engine.items()})
        finished = sample_value(text, REQUEST_SUCCESS)
        if finished is not None:
            found[FINISHED] = finished - (sample_value(text, REQUEST_SUCCESS, {"finished_reason": ABORTED}) or 0.0)
    return found


def _named(texts: Iterable[str] | Mapping[str, str], role: str) -> dict[str, str]:
    if isinstance(texts, Mapping):
        return {f"{role}/{name}": text for name, text in texts.items()}
    return {f"{role}/{index}": text for index, text in enumerate(texts)}


@dataclass(frozen=True, kw_only=True)
class DpdCounters:
    """One snapshot of every router, decoder and prefill pod's counters, by ``router/<pod>``, ``decoder/<pod>`` or
    ``prefiller/<pod>`` (a prefiller's counters feed only its prefix-cache rate and the TTFT decomposition)."""

    pods: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # the pods (keys of ``pods``, marked :data:`UNREAD` there) whose metrics could not be read, and why
    unread: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, router: Iterable[str] | Mapping[str, str], decoder: Iterable[str] | Mapping[str, str], *,
              restarts: Mapping[str, int] | None = None, prefiller: Iterable[str] | Mapping[str, str] = (),
              unread: Mapping[str, str] | None = None) -> DpdCounters:
        """From the ``/metrics`` text of every router pod, every decoder pod and every prefiller pod (by pod
        name when a mapping), with each pod's container restarts when known; ``unread`` (by ``role/pod``) the
        running pods whose metrics could not be read, and why."""
        restarts = restarts or {}
        unread = unread or {}
        pods = {key: pod_sample(text, router=True, restarts=restarts.get(key, 0))
                for key, text in _named(router, "router").items()}
        pods |= {key: pod_sample(text, router=False, restarts=restarts.get(key, 0))
                 for key, text in _named(decoder, "decoder").items()}
        pods |= {key: pod_sample(text, router=False, prefiller=True, restarts=restarts.get(key, 0))
                 for key, text in _named(prefiller, "prefiller").items()}
        pods |= {key: {RESTARTS: float(restarts.get(key, 0)), UNREAD: 1.0} for key in unread}
        return cls(pods=pods, unread=dict(unread))

    def total(self, name: str) -> float:
        return sum(sample.get(name, 0.0) for sample in self.pods.values())


def serving_pods(snapshot: DpdCounters) -> dict[str, int]:
    """How many decoder and prefiller pods a snapshot read (those it could not read left out)."""
    counted: dict[str, int] = {}
    for pod, sample in snapshot.pods.items():
        role = pod.partition("/")[0]
        if role in CACHE_ROLES and UNREAD not in sample:
            counted[role] = counted.get(role, 0) + 1
    return counted


def _grew(before: Mapping[str, float] | None, after: Mapping[str, float]) -> tuple[dict[str, float], bool]:
    """One pod's increase between two snapshots, and whether it restarted in between: a pod that was not there
    before, a container restart, or any counter that went down counts from zero (as Prometheus' ``increase``)."""
    if before is None:
        return dict(after), False
    reset = after.get(RESTARTS, 0.0) != before.get(RESTARTS, 0.0) or any(
        value < before.get(key, 0.0) for key, value in after.items() if key != RESTARTS)
    return ({key: value if reset else value - before.get(key, 0.0) for key, value in after.items()
             if key != RESTARTS}, reset)


def _unread(pod: str, before: DpdCounters, after: DpdCounters) -> str | None:
    """How ``pod`` (in ``after``) was missed, when either snapshot could not read it; None when both did."""
    when = [name for name, counters in (("before", before), ("after", after))
            if UNREAD in (counters.pods.get(pod) or {})]
    if not when:
        return None
    why = after.unread.get(pod) or before.unread.get(pod)
    return f"{pod} could not be read {' and '.join(when)} this level" + (f" ({why})" if why else "")


@dataclass(frozen=True, kw_only=True)
class LevelDisaggregation:
    """What the router and decoder counted while one level ran: per pod, the difference of two snapshots."""

    load: Load
    disaggregated: int
    local: int
    fallback: int
    external_kv_tokens: int
    router_ttft_mean_s: float | None = None
    cache_hit_tokens: int = 0
    prompt_tokens: int | None = None  # the decoders' vllm:prompt_tokens_total, when exported
    generation_tokens: int | None = None  # the decoders' vllm:generation_tokens_total, when exported
    router_ttft_buckets: Mapping[float, float] = field(default_factory=dict)
    # pods that restarted, appeared, went away or could not be read during the level: its counts miss them
    pod_changes: tuple[str, ...] = ()
    # prefillers left out of the TTFT stages (they appeared, went away or did not answer): the stages' means are
    # over the other prefillers' requests
    stage_notes: tuple[str, ...] = ()
    # per role (decoder, prefill): the prefix cache's (hit, queried) prompt tokens, for the roles that export them
    prefix_cache: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # the level's increase of each stage histogram's _sum and _count, by "prefill:<family>_sum" or
    # "decode:<family>_count"; a series no pod exports is absent (unmeasured), never 0
    stage_totals: Mapping[str, float] = field(default_factory=dict)
    finished_requests: int | None = None  # the decoders' (engines') vllm:request_success_total, aborts left out
    # per role (decoder, prefiller): the pods whose counters were read at the level's end, i.e. that served it
    serving_pods: Mapping[str, int] = field(default_factory=dict)
    engine_ttft_buckets: Mapping[float, float] = field(default_factory=dict)  # their vllm:time_to_first_token_seconds
    # each decoder's own mean time between output tokens over the level (vllm:inter_token_latency_seconds), by pod
    pod_tpot_s: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def between(cls, before: DpdCounters, after: DpdCounters, *, load: Load) -> LevelDisaggregation:
        """Each pod's increase, summed: a pod whose counter went down (it restarted) counts from zero, as
        Prometheus' ``increase`` does, without making any other pod's lifetime total this level's."""
        grown: dict[str, float] = {}
        cache: dict[str, list[float]] = {}
        tpot: dict[str, float] = {}
        changes, notes = [], []
        for pod, sample in after.pods.items():
            # A prefiller is read for the TTFT decomposition only (means of sums over counts), so one not in both
            # snapshots, or not read in both, is left out of it, with a note: dropping its requests biases no mean,
            # and its coming and going says nothing about the routing or the KV counts.
            prefiller = pod.startswith("prefiller/")
            missed = _unread(pod, before, after)
            if missed is not None:
                if prefiller:
                    notes.append(f"{missed}: the prefill stages leave its requests out")
                else:
                    changes.append(missed)
                continue
            if prefiller and pod not in before.pods:
                notes.append(f"{pod} started during this level: the prefill stages leave its requests out")
                continue
            delta, reset = _grew(before.pods.get(pod), sample)
            if pod not in before.pods:
                changes.append(f"{pod} started")
            elif reset:
                changes.append(f"{pod} restarted")
            role = pod.partition("/")[0]
            if role == "decoder" and delta.get("itl_count"):
                tpot[pod] = delta.get("itl_seconds", 0.0) / delta["itl_count"]
            if role in CACHE_ROLES and "prefix_cache_queries" in sample:
                totals = cache.setdefault(CACHE_ROLES[role], [0.0, 0.0])
                totals[0] += delta.get("prefix_cache_hits", 0.0)
                totals[1] += delta.get("prefix_cache_queries", 0.0)
            for key, value in delta.items():
                if role == "prefiller" and not key.startswith(STAGE):
                    continue  # the decoders' counts are the level's; a prefiller's feed its cache rate and stages
                grown[key] = grown.get(key, 0.0) + value
        gone = [pod for pod in before.pods if pod not in after.pods]
        changes += [f"{pod} went away" for pod in gone if not pod.startswith("prefiller/")]
        notes += [f"{pod} went away during this level: the prefill stages leave its requests out" for pod in gone
                  if pod.startswith("prefiller/")]

        def known(key: str) -> int | None:
            present = any(key in sample for pod, sample in after.pods.items() if not pod.startswith("prefiller/"))
            return round(grown.get(key, 0.0)) if present else None

        count = grown.get("ttft_count", 0.0)
        return cls(load=load, disaggregated=round(grown.get("disaggregated", 0.0)),
                   local=round(grown.get("local", 0.0)), fallback=round(grown.get("fallback", 0.0)),
                   external_kv_tokens=round(grown.get("external_kv_tokens", 0.0)),
                   cache_hit_tokens=round(grown.get("cache_hit_tokens", 0.0)),
                   prompt_tokens=known("prompt_tokens"), generation_tokens=known("generation_tokens"),
                   router_ttft_mean_s=grown.get("ttft_seconds", 0.0) / count if count else None,
                   router_ttft_buckets={float(key.removeprefix(BUCKET)): value for key, value in grown.items()
                                        if key.startswith(BUCKET)},
                   finished_requests=known(FINISHED),
                   engine_ttft_buckets={float(key.removeprefix(ENGINE_BUCKET)): value
                                        for key, value in grown.items() if key.startswith(ENGINE_BUCKET)},
                   pod_changes=tuple(changes), stage_notes=tuple(notes),
                   serving_pods=serving_pods(after),
                   prefix_cache={role: (round(hits), round(queries))
                                 for role, (hits, queries) in sorted(cache.items())},
                   stage_totals={key.removeprefix(STAGE): value for key, value in sorted(grown.items())
                                 if key.startswith(STAGE)}, pod_tpot_s=dict(sorted(tpot.items())))

    @property
    def routed(self) -> int:
        return self.disaggregated + self.local + self.fallback

    @property
    def fraction(self) -> float | None:
        """Disaggregated over routed; None when the router counted nothing."""
        return self.disaggregated / self.routed if self.routed else None

    @property
    def engine_ttft_mean_s(self) -> float | None:
        """The decoders' (for the twin: its engines') own mean ``vllm:time_to_first_token_seconds``; None unexported."""
        total, count = (self.stage_totals.get(f"decode:{TTFT.name}{part}") for part in ("_sum", "_count"))
        return None if total is None or not count else total / count

    def router_ttft_bounds(self, q: float) -> tuple[float, float] | None:
        """The router TTFT histogram bucket holding this level's ``q`` quantile (None when it has no finite one)."""
        return quantile_bounds(self.router_ttft_buckets, q)

    def prefix_cache_hit_rate(self, role: str = "decoder") -> float | None:
        """The fraction of ``role``'s queried prompt tokens its prefix cache held this level; None when unknown."""
        hits, queries = self.prefix_cache.get(role, (0, 0))
        return hits / queries if queries else None

    def kv_expected(self, mean_prompt_tokens: float | None) -> float | None:
        """Prompt tokens the disaggregated requests should have brought from the prefiller: the decoders' own
        prompt-token count for the level, shared out by request (else the server's per-request count)."""
        if self.prompt_tokens is not None and self.routed:
            return self.prompt_tokens * self.disaggregated / self.routed
        return None if mean_prompt_tokens is None else mean_prompt_tokens * self.disaggregated

    def as_dict(self) -> dict[str, Any]:
        return {**self.load.as_dict(), "disaggregated": self.disaggregated, "local": self.local,
                "fallback": self.fallback, "fraction": self.fraction, "external_kv_tokens": self.external_kv_tokens,
                "cache_hit_tokens": self.cache_hit_tokens, "prompt_tokens": self.prompt_tokens,
                "generation_tokens": self.generation_tokens, "router_ttft_mean_s": self.router_ttft_mean_s,
                "pod_changes": list(self.pod_changes), "stage_notes": list(self.stage_notes),
                "prefix_cache": {role: {"hit_tokens": hits, "queried_tokens": queries,
                                        "hit_rate": self.prefix_cache_hit_rate(role)}
                                 for role, (hits, queries) in self.prefix_cache.items()},
                "stage_totals": dict(self.stage_totals), "finished_requests": self.finished_requests,
                "engine_ttft_mean_s": self.engine_ttft_mean_s}


def disaggregation_warnings(path: RoutePath, levels: Sequence[Load], measured: Mapping[Load, LevelDisaggregation],
                            *, prompt_tokens: Mapping[Load, float | None] | None = None, isl: int = 0,
                            threshold: int = 0, estimates: RouterEstimates | None = None, osl: int = 0,
                            max_model_len: int | None = None) -> list[TrustWarning]:
    """A DPD level below :data:`MIN_FRACTION`, with no KV received, or not measured; a direct one that was not.

    ``prompt_tokens`` (the server's mean count per level, with the model's tokenizer), ``isl``, ``threshold``
    and the router's own ``estimates`` of the prompts it kept local let a level below :data:`MIN_FRACTION` say
    which ``--isl`` clears the threshold; ``osl`` and ``max_model_len`` check that it fits the model."""
    found: list[TrustWarning] = []
    local = sum(seen.local for seen in measured.values())
    fits = _Fits(osl=osl, threshold=threshold, max_model_len=max_model_len)
    for level in levels:
        seen = measured.get(level)
        if seen is None:
            found.append(TrustWarning(code=Trust.ROUTING_UNKNOWN, load=level, message=(
                "the router's and decoder's counters could not be read before and after this level, so nothing "
                "shows which path the requests took (bench needs get on pods/proxy in hyperpod-inference-system "
                "and the endpoint's namespace)")))
            continue
        fraction = seen.fraction
        if fraction is None:
            found.append(TrustWarning(code=Trust.ROUTING_UNKNOWN, load=level, message=(
                "the router counted no requests during this level (are its dpd_routing_* metrics served?)")))
        elif path is RoutePath.DPD and fraction < MIN_FRACTION:
            counted = (prompt_tokens or {}).get(level)
            needed = isl_for_model(isl=isl, prompt_tokens=counted, threshold=threshold)
            fix = _threshold_fix(isl=isl, counted=counted, needed=needed, threshold=threshold,
                                 estimates=_ours(estimates, local), fits=fits)
            found.append(TrustWarning(code=Trust.NOT_DISAGGREGATED, load=level, message=(
                f"the router disaggregated {seen.disaggregated} of {seen.routed} requests ({fraction:.0%}, below "
                f"{MIN_FRACTION:.0%}; {seen.local} went straight to the decoder, {seen.fallback} fell back): these "
                f"numbers are not DPD's. {fix[0].upper()}{fix[1:]}")))
        elif path is RoutePath.DPD and seen.disaggregated and (kv := kv_warnings(
                seen, load=level, expected=seen.kv_expected((prompt_tokens or {}).get(level)))):
            found += kv
        elif path is RoutePath.DIRECT and fraction > 1 - MIN_FRACTION:
            found.append(TrustWarning(code=Trust.NOT_DIRECT, load=level, message=(
                f"--path direct, but the router disaggregated {seen.disaggregated} of {seen.routed} requests "
                f"({fraction:.0%}): these numbers are not the decoder's alone")))
        found += restart_warnings({level: seen})
    return found


def restart_warnings(measured: Mapping[Load, LevelDisaggregation]) -> list[TrustWarning]:
    """``pod-restarted`` for every level a counted pod restarted, appeared or went away in (either endpoint's)."""
    return [TrustWarning(code=Trust.POD_RESTARTED, load=load, message=(
        f"pods changed during this level ({'; '.join(seen.pod_changes)}): its requests were served by a changing set "
        "of pods, and its counts miss what a pod that went away or could not be read served"))
        for load, seen in measured.items() if seen.pod_changes]


@dataclass(frozen=True, kw_only=True)
class _Fits:
    """What a suggested ``--isl`` must also fit: the model's context with ``osl`` (unchecked when not known)."""

    osl: int
    threshold: int
    max_model_len: int | None

    def caveat(self, isl: int | None) -> str:
        """Why ``isl`` would not run (route_problems' own words), or ""."""
        if isl is None or self.max_model_len is None:
            return ""
        problems = route_problems(isl=isl, osl=self.osl, path=RoutePath.DPD, threshold=self.threshold,
                                  max_model_len=self.max_model_len)
        return "".join(f"; but --isl {isl} {p.message} ({p.fix})" for p in problems if "max_model_len" in p.message)


def _ours(estimates: RouterEstimates | None, local: int) -> RouterEstimates | None:
    """The router's estimates when they can be this run's: no more than twice the requests its levels kept local
    (the log reaches back before the Job; more lines than that are mostly someone else's prompts)."""
    if estimates is None or estimates.typical <= 0 or estimates.count > 2 * max(local, 1):
        return None
    return estimates


def _threshold_fix(*, isl: int, counted: float | None, needed: int | None, threshold: int,
                   estimates: RouterEstimates | None = None, fits: _Fits | None = None) -> str:
    """What to change when a DPD level went local: the input length that clears the threshold at the router's own
    typical estimate (its log line), else the one the model's tokenizer needs, or, when its count already clears
    the threshold, how to scale by the router's estimate. The router estimates a prompt's length by its own rule
    (characters / 4 or tokens, :mod:`hyperpod_dpd.contracts.router`), not with the model's tokenizer, so a tokenizer
    with shorter tokens than Llama 3's (the shipped lengths' tokenizer) reaches the threshold in tokens while the
    estimate stays below it."""
    fits = fits or _Fits(osl=0, threshold=threshold, max_model_len=None)
    if estimates is not None and isl and not clears(estimates.typical, estimates.threshold):
        fix = isl_for_model(isl=isl, prompt_tokens=estimates.typical, threshold=estimates.threshold)
        deployed = "" if estimates.threshold == threshold else f" (the spec says {threshold})"
        tokens = f"; the model's tokenizer counted {counted:,.0f} per request" if counted else ""
        target = estimates.threshold * (1 + MARGIN)
        return (f"the router's own estimate of these prompts is {estimates.low:,}-{estimates.high:,} tokens, "
                f"{estimates.typical:,} typically (its 'Conditional routing' log line, {estimates.count} requests "
                f"kept local), below its threshold {estimates.threshold:,}{deployed} with the {MARGIN:.0%} margin "
                f"({target:,.0f}){tokens}: use --isl {fix} or more, which the router's rule estimates at "
                f"{estimates.typical * (fix or isl) // isl:,} or more{fits.caveat(fix)}")
    if needed is not None and counted:
        return (f"the model's tokenizer counted {counted:,.0f} prompt tokens per request against the threshold "
                f"{threshold}: use --isl {needed} or more{fits.caveat(needed)}")
    if counted and threshold and isl:
        target = math.ceil(threshold * (1 + MARGIN))
        return (f"the model's tokenizer counted {counted:,.0f} prompt tokens per request, clear of the threshold "
                f"{threshold}, but the router estimates length from characters (about 4 per token), and this "
                "tokenizer's tokens are shorter than the Llama 3 ones --isl was sized with: read estimated_tokens=E "
                f"in the router's 'Conditional routing' log line and use --isl {isl} x {target} / E rounded up to "
                f"{ROUND_TO}")
    return "Check the deployed routingThreshold against --isl"


def kv_window(seen: LevelDisaggregation, expected: float | None) -> ev.DecoderWindow[ev.Number]:
    """The level as the evidence model's decoder window, summed over the decoders: ``expected``, the disaggregated
    requests' prompt tokens (None when unknown), what arrived, what the decoders' own prefix cache held, and the
    rest, which they computed."""
    external, hits = float(seen.external_kv_tokens), float(seen.cache_hit_tokens)
    computed = None if expected is None else max(0.0, expected - external - hits)
    return ev.DecoderWindow(long_prompts=float(seen.disaggregated), long_prompt_tokens=expected,
                            external_tokens=external, cache_hit_tokens=hits, computed_tokens=computed,
                            chunk_tokens=0.0)


def kv_warnings(seen: LevelDisaggregation, *, load: Load, expected: float | None) -> list[TrustWarning]:
    """``no-kv-transfer`` or ``partial-kv-transfer`` for a level (or a replayed window) whose disaggregated requests'
    prompts hold ``expected`` tokens, judged by the evidence model (:func:`~ev.kv_short`): the decoders' own
    prefix-cache hits are taken out of what they needed, never counted as received."""
    window = kv_window(seen, expected)
    needed = ev.needed_tokens(ev.NUMBERS, window)
    hits = seen.cache_hit_tokens
    if seen.external_kv_tokens == 0 and ((needed is None and not hits) or (needed is not None and needed > 0)):
        held = (f" (its own prefix cache held {hits:,} prompt tokens, which are not received KV: the rest was "
                "recomputed)") if hits else ""
        return [TrustWarning(code=Trust.NO_KV_TRANSFER, load=load, message=(
            f"the router disaggregated {seen.disaggregated} requests but the decoder received no KV tokens from "
            f"the prefiller{held}: it recomputed what it lacked of every prompt (see 'Retrieved 0 out of N' in its "
            "log; check PYTHONHASHSEED and the KV connector)"))]
    share = ev.kv_short(ev.NUMBERS, window)
    if share is None:
        return []
    beyond = f" beyond the {hits:,} their own prefix cache held (not received KV)" if hits else ""
    return [TrustWarning(code=Trust.PARTIAL_KV_TRANSFER, load=load, message=(
        f"the decoders took {seen.external_kv_tokens:,} prompt tokens from the prefiller, {share:.0%} of the "
        f"{needed or 0.0:,.0f} the {seen.disaggregated} disaggregated requests' prompts needed{beyond} (below "
        f"{KV_MIN_FRACTION:.0%}): some transfers failed and the decoder recomputed those prompts (see "
        "'Retrieved N out of M' in its log), so TTFT mixes DPD with recomputation"))]


@dataclass(frozen=True, kw_only=True)
class MetricsSources:
    """Where the counters are: the pods of the router Deployment and of the decode Deployment (by label)."""

    router_namespace: str
    router_deployment: str
    router_container: str
    decoder_namespace: str
    decoder_selector: str
    decoder_deployment: str
    decoder_port: int
    prefiller_selector: str = ""  # "" reads no prefiller: the TTFT decomposition's prefill stages are unmeasured
    prefiller_deployment: str = ""
    # the twin's: the operator makes a router only for an endpoint with a pdSpec, and the twin's router name is
    # inferred (<name>-<namespace>-router), so its engine pods are read without it and its requests by the engines
    router_optional: bool = False

    @classmethod
    def for_spec(cls, spec: DpdSpec) -> MetricsSources:
        """The operator's names for this endpoint (see :mod:`hyperpod_dpd.contracts.operator`)."""
        return cls(router_namespace=OPERATOR_NAMESPACE, router_deployment=router_deployment(spec),
                   router_container=ROUTER_CONTAINER, decoder_namespace=spec.namespace,
                   decoder_selector=f"{ROLE_LABEL}=decode", decoder_deployment=role_deployment(spec, "decode"),
                   decoder_port=spec.port, prefiller_selector=f"{ROLE_LABEL}=prefill",
                   prefiller_deployment=role_deployment(spec, "prefill"))


    @classmethod
    def for_twin(cls, twin: DpdSpec, *, selector: str) -> MetricsSources:
        """The aggregated twin's router Deployment and its engine pods: those of the twin's own Deployment, by the
        label selector the operator writes in the twin's ``InferenceEndpointConfig`` ``status.selector`` (the
        CRD's scale subresource reads it, ``labelSelectorPath: .status.selector``, "LabelSelector for the
        deployment"); no prefiller."""
        return cls(router_namespace=OPERATOR_NAMESPACE, router_deployment=router_deployment(twin),
                   router_container=ROUTER_CONTAINER, decoder_namespace=twin.namespace, decoder_selector=selector,
                   decoder_deployment="", decoder_port=twin.port, router_optional=True)


class MetricsKube(Protocol):
    def pods(self, namespace: str, label_selector: str) -> list[JsonDict]: ...

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> str: ...

    def pod_log(self, namespace: str, pod: str, container: str, since_seconds: int | None = None,
                limit_bytes: int | None = None) -> str: ...


def _name(pod: JsonDict) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))


def _container_port(pod: JsonDict, container: str) -> int | None:
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == container:
            for port in spec.get("ports") or []:
                if port.get("containerPort"):
                    return int(port["containerPort"])
    return None


def of_deployment(pod: JsonDict, deployment: str) -> bool:
    """Whether ``pod`` belongs to the Deployment ``deployment``: the Deployment controller labels each of its pods
    ``pod-template-hash=H`` and owns them through the ReplicaSet ``<deployment>-H``. A name prefix alone would
    also take ``decode-<name>-70b``'s pods for ``decode-<name>``'s."""
    metadata = pod.get("metadata") or {}
    template = (metadata.get("labels") or {}).get(POD_TEMPLATE_HASH)
    owners = {str(o.get("name")) for o in metadata.get("ownerReferences") or [] if o.get("kind") == "ReplicaSet"}
    if template is not None:
        return f"{deployment}-{template}" in owners or (not owners and _name(pod).startswith(
            f"{deployment}-{template}-"))
    return any(owner.startswith(f"{deployment}-") and owner.count("-") == deployment.count("-") + 1
               for owner in owners)


def serving(pod: JsonDict) -> bool:
    """Running and not being deleted: an Evicted, Pending or Terminating pod serves nothing and answers nothing."""
    return (pod.get("status") or {}).get("phase") == "Running" and not (pod.get("metadata") or {}).get(
        "deletionTimestamp")


def restarts(pod: JsonDict) -> int:
    """The restarts of a pod's containers so far (a restarted container's counters start from zero)."""
    return sum(int(c.get("restartCount") or 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])


def read_counters(kube: MetricsKube, sources: MetricsSources) -> DpdCounters:
    """One snapshot from every running pod of the router and decode Deployments; raises :class:`KubeError`
    when either has none, or none whose metrics answer. A running pod whose metrics do not answer (a crash-looping
    container, a proxy error) is kept as :data:`UNREAD` with why: the levels beside this snapshot report it as a
    pod change (and a prefiller as left out of the TTFT stages), the other pods' counts stand."""
    routers = [p for p in kube.pods(sources.router_namespace, "")
               if of_deployment(p, sources.router_deployment) and serving(p)]
    # the twin's engines are their Deployment's selector's pods (no Deployment name to check them against)
    decoders = [p for p in kube.pods(sources.decoder_namespace, sources.decoder_selector)
                if (not sources.decoder_deployment or of_deployment(p, sources.decoder_deployment)) and serving(p)]
    if not decoders or (not routers and not sources.router_optional):
        engines = sources.decoder_deployment or f"the pods of {sources.decoder_selector}"
        raise KubeError(f"no running pod of Deployment {sources.router_deployment} in {sources.router_namespace} "
                        f"or of {engines} in {sources.decoder_namespace}")
    unread: dict[str, str] = {}

    def each(role: str, pods: list[JsonDict], read: Callable[[JsonDict], str]) -> dict[str, str]:
        texts = {}
        for pod in pods:
            try:
                texts[_name(pod)] = read(pod)
            except KubeError as err:
                unread[f"{role}/{_name(pod)}"] = f"its metrics did not answer: {str(err)[:200]}"
        return texts

    router_texts = each("router", routers, lambda pod: _router_counters(kube, sources, pod))
    decoder_texts = each("decoder", decoders, lambda pod: kube.pod_get(sources.decoder_namespace, _name(pod),
                                                                       sources.decoder_port, METRICS_PATH))
    if not decoder_texts or (routers and not router_texts and not sources.router_optional):
        raise KubeError("no running pod of the router or the decoders answered: " + "; ".join(
            f"{pod} {why}" for pod, why in unread.items()))
    prefillers = [p for p in kube.pods(sources.decoder_namespace, sources.prefiller_selector)
                  if of_deployment(p, sources.prefiller_deployment) and serving(p)] if sources.prefiller_deployment \
        else []
    prefiller_texts = each("prefiller", prefillers, lambda pod: kube.pod_get(sources.decoder_namespace, _name(pod),
                                                                             sources.decoder_port, METRICS_PATH))
    counts = {f"router/{_name(p)}": restarts(p) for p in routers} | {f"decoder/{_name(p)}": restarts(p)
                                                                       for p in decoders}
    counts |= {f"prefiller/{_name(p)}": restarts(p) for p in prefillers}
    return DpdCounters.parse(router_texts, decoder_texts, restarts=counts, prefiller=prefiller_texts, unread=unread)


def _router_counters(kube: MetricsKube, sources: MetricsSources, pod: JsonDict) -> str:
    """The router pod's routing counters: its ``/metrics``, or else the same counts from its log.

    Only AWS's dashboard names the ``dpd_routing_*`` series and no page documents the router's metrics
    port, while its ``Conditional routing: ... disaggregate=True|False`` line is documented: when the
    metrics do not answer or carry no routing counter, the whole log of the router container is
    counted instead and written as the same counters (a restarted pod starts from zero, as a counter does).
    """
    name, port = _name(pod), _container_port(pod, sources.router_container)
    text = ""
    if port is not None:
        try:
            text = kube.pod_get(sources.router_namespace, name, port, METRICS_PATH)
        except KubeError:
            text = ""
    if any(sample_value(text, counter) is not None for counter in (DISAGGREGATED, LOCAL, FALLBACK)):
        return text
    disaggregated, local = routing_decisions(kube.pod_log(sources.router_namespace, name, sources.router_container))
    return f"{text}\n{DISAGGREGATED} {disaggregated}\n{LOCAL} {local}\n"


@dataclass(frozen=True, kw_only=True)
class RouterEstimates:
    """The router's own length estimates of the prompts it kept local (``disaggregate=False``) and the threshold it
    logged, from its documented ``Conditional routing: estimated_tokens=E, threshold=T, ...`` lines. The log is
    read since before the Job started, so it may hold others' requests: the fix scales by the ``typical`` (median)
    estimate, which a few short prompts from anyone do not move, never by the lowest."""

    low: int
    high: int
    threshold: int
    count: int
    typical: int  # the median estimate (the lower middle one of an even count)


def kept_local(kube: MetricsKube, sources: MetricsSources, *, since_seconds: int) -> RouterEstimates | None:
    """The estimates of the requests every running router pod kept local in the last ``since_seconds``; None when
    no pod logged one or the log could not be read (the fix then falls back to the server's token count)."""
    found: list[tuple[int, int]] = []
    try:
        routers = [p for p in kube.pods(sources.router_namespace, "")
                   if of_deployment(p, sources.router_deployment) and serving(p)]
        for pod in routers:
            log = kube.pod_log(sources.router_namespace, _name(pod), sources.router_container,
                               since_seconds=since_seconds)
            found += [(int(line["tokens"]), int(line["threshold"])) for line in ROUTING_LINE.finditer(log)
                      if line["disaggregate"] == "False"]
    except KubeError:
        return None
    if not found:
        return None
    estimates = [tokens for tokens, _ in found]
    return RouterEstimates(low=min(estimates), high=max(estimates), threshold=max(t for _, t in found),
                           count=len(found), typical=median_low(estimates))


QUIET_MARK = re.compile(rf"^{re.escape(RESULTS_MARK)} (?:quiet=(?P<quiet>\d+)|level=(?P<level>\S+))\s*$", re.M)


@dataclass
class LevelSnapshots:
    """Counter snapshots taken in the benchmark pod's quiet windows, keyed by the number of levels done.

    Feed it the benchmark container's log at every poll (:meth:`observe`); when the last marker is
    ``quiet=K`` and window K has no snapshot yet, one is read. A window missed (a poll slower than
    the pause) or unreadable leaves the levels beside it unmeasured, never guessed.
    """

    read: Callable[[], DpdCounters]
    taken: dict[int, DpdCounters] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def observe(self, benchmark_log: str) -> None:
        marks = list(QUIET_MARK.finditer(benchmark_log))
        if not marks or marks[-1]["quiet"] is None:
            return
        window = int(marks[-1]["quiet"])
        if window in self.taken:
            return
        try:
            self.taken[window] = self.read()
        except KubeError as err:
            self.errors.append(str(err))

    def levels(self, loads: Sequence[Load]) -> dict[Load, LevelDisaggregation]:
        """Level i (in run order) is window i-1 to window i."""
        found = {}
        for done, level in enumerate(loads, start=1):
            before, after = self.taken.get(done - 1), self.taken.get(done)
            if before is not None and after is not None:
                found[level] = LevelDisaggregation.between(before, after, load=level)
        return found
