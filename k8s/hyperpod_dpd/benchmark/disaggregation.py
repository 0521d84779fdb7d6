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

The snapshots are read through the API server's pod proxy, so ``bench`` needs no port-forward and
no network path to the pods: ``get`` on ``pods/proxy`` in both namespaces (and ``pods/log`` in the
router's, whose documented routing line counts when its metrics carry no routing counter).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hyperpod_dpd.benchmark.job import RESULTS_MARK
from hyperpod_dpd.benchmark.route import RoutePath, isl_for_model
from hyperpod_dpd.benchmark.trust import Trust, TrustWarning
from hyperpod_dpd.clients.kube import JsonDict, KubeError
from hyperpod_dpd.contracts.operator import (
    OPERATOR_NAMESPACE,
    ROLE_LABEL,
    ROUTER_CONTAINER,
    role_deployment,
    router_deployment,
)
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.ops.dpd_counters import DEFAULT_METRICS_PATH as METRICS_PATH
from hyperpod_dpd.ops.dpd_counters import routing_decisions, sample_value
from hyperpod_dpd.spec import DpdSpec

DISAGGREGATED = "dpd_routing_disaggregated_total"
LOCAL = "dpd_routing_local_total"
FALLBACK = "dpd_routing_fallback_total"
E2E_TTFT = "dpd_e2e_ttft_seconds"  # the router's histogram: prefill, KV transfer and the first decode step
EXTERNAL_KV = "vllm:prompt_tokens_by_source_total"
EXTERNAL_SOURCE = "external_kv_transfer"
MIN_FRACTION = 0.95  # a DPD level below this did not measure DPD


def sample_sum(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The sum of every sample of ``name`` in Prometheus text whose labels include ``labels`` (0 when none)."""
    return sample_value(text, name, labels) or 0.0


@dataclass(frozen=True, kw_only=True)
class DpdCounters:
    """One snapshot of the router's routing decisions and the decoder's externally received prompt tokens."""

    disaggregated: float
    local: float
    fallback: float
    external_kv_tokens: float
    ttft_seconds: float = 0.0
    ttft_count: float = 0.0

    @classmethod
    def parse(cls, router: Iterable[str], decoder: Iterable[str]) -> DpdCounters:
        """From the ``/metrics`` text of every router pod and every decoder pod (summed)."""
        routers, decoders = list(router), list(decoder)
        return cls(disaggregated=sum(sample_sum(t, DISAGGREGATED) for t in routers),
                   local=sum(sample_sum(t, LOCAL) for t in routers),
                   fallback=sum(sample_sum(t, FALLBACK) for t in routers),
                   external_kv_tokens=sum(sample_sum(t, EXTERNAL_KV, {"source": EXTERNAL_SOURCE}) for t in decoders),
                   ttft_seconds=sum(sample_sum(t, f"{E2E_TTFT}_sum") for t in routers),
                   ttft_count=sum(sample_sum(t, f"{E2E_TTFT}_count") for t in routers))


@dataclass(frozen=True, kw_only=True)
class LevelDisaggregation:
    """What the router and decoder counted while one level ran (the difference of two snapshots)."""

    load: Load
    disaggregated: int
    local: int
    fallback: int
    external_kv_tokens: int
    router_ttft_mean_s: float | None = None

    @classmethod
    def between(cls, before: DpdCounters, after: DpdCounters, *, load: Load) -> LevelDisaggregation:
        """A counter that went down (a pod restarted) counts from zero, as Prometheus' ``increase`` does."""
        def grew(name: str) -> float:
            old, new = float(getattr(before, name)), float(getattr(after, name))
            return new - old if new >= old else new

        count = grew("ttft_count")
        return cls(load=load, disaggregated=round(grew("disaggregated")), local=round(grew("local")),
                   fallback=round(grew("fallback")), external_kv_tokens=round(grew("external_kv_tokens")),
                   router_ttft_mean_s=grew("ttft_seconds") / count if count else None)

    @property
    def routed(self) -> int:
        return self.disaggregated + self.local + self.fallback

    @property
    def fraction(self) -> float | None:
        """Disaggregated over routed; None when the router counted nothing."""
        return self.disaggregated / self.routed if self.routed else None

    def as_dict(self) -> dict[str, Any]:
        return {**self.load.as_dict(), "disaggregated": self.disaggregated, "local": self.local,
                "fallback": self.fallback, "fraction": self.fraction, "external_kv_tokens": self.external_kv_tokens,
                "router_ttft_mean_s": self.router_ttft_mean_s}


def disaggregation_warnings(path: RoutePath, levels: Sequence[Load], measured: Mapping[Load, LevelDisaggregation],
                            *, prompt_tokens: Mapping[Load, float | None] | None = None, isl: int = 0,
                            threshold: int = 0) -> list[TrustWarning]:
    """A DPD level below :data:`MIN_FRACTION`, with no KV received, or not measured; a direct one that was not.

    ``prompt_tokens`` (the server's mean count per level, with the model's tokenizer), ``isl`` and
    ``threshold`` let a level below :data:`MIN_FRACTION` say which ``--isl`` this model needs."""
    found: list[TrustWarning] = []
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
            fix = (f"the model's tokenizer counted {counted:,.0f} prompt tokens per request against the threshold "
                   f"{threshold}: use --isl {needed} or more" if needed is not None and counted
                   else "Check the deployed routingThreshold against --isl")
            found.append(TrustWarning(code=Trust.NOT_DISAGGREGATED, load=level, message=(
                f"the router disaggregated {seen.disaggregated} of {seen.routed} requests ({fraction:.0%}, below "
                f"{MIN_FRACTION:.0%}; {seen.local} went straight to the decoder, {seen.fallback} fell back): these "
                f"numbers are not DPD's. {fix[0].upper()}{fix[1:]}")))
        elif path is RoutePath.DPD and seen.disaggregated and seen.external_kv_tokens == 0:
            found.append(TrustWarning(code=Trust.NO_KV_TRANSFER, load=level, message=(
                f"the router disaggregated {seen.disaggregated} requests but the decoder received no KV tokens from "
                "the prefiller: it recomputed every prompt (see 'Retrieved 0 out of N' in its log; check "
                "PYTHONHASHSEED and the KV connector)")))
        elif path is RoutePath.DIRECT and fraction > 1 - MIN_FRACTION:
            found.append(TrustWarning(code=Trust.NOT_DIRECT, load=level, message=(
                f"--path direct, but the router disaggregated {seen.disaggregated} of {seen.routed} requests "
                f"({fraction:.0%}): these numbers are not the decoder's alone")))
    return found


@dataclass(frozen=True, kw_only=True)
class MetricsSources:
    """Where the counters are: the router pods (by name prefix) and the decoder pods (by label)."""

    router_namespace: str
    router_prefix: str
    router_container: str
    decoder_namespace: str
    decoder_selector: str
    decoder_prefix: str
    decoder_port: int

    @classmethod
    def for_spec(cls, spec: DpdSpec) -> MetricsSources:
        """The operator's names for this endpoint (see :mod:`hyperpod_dpd.contracts.operator`)."""
        return cls(router_namespace=OPERATOR_NAMESPACE, router_prefix=f"{router_deployment(spec)}-",
                   router_container=ROUTER_CONTAINER, decoder_namespace=spec.namespace,
                   decoder_selector=f"{ROLE_LABEL}=decode", decoder_prefix=f"{role_deployment(spec, 'decode')}-",
                   decoder_port=spec.port)


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


def read_counters(kube: MetricsKube, sources: MetricsSources) -> DpdCounters:
    """One snapshot from every running router and decoder pod; raises :class:`KubeError` when none answers."""
    routers = [p for p in kube.pods(sources.router_namespace, "") if _name(p).startswith(sources.router_prefix)]
    decoders = [p for p in kube.pods(sources.decoder_namespace, sources.decoder_selector)
                if _name(p).startswith(sources.decoder_prefix)]
    if not routers or not decoders:
        raise KubeError(f"no router pod {sources.router_prefix}* in {sources.router_namespace} or no decoder pod "
                        f"{sources.decoder_prefix}* in {sources.decoder_namespace}")
    router_texts = [_router_counters(kube, sources, pod) for pod in routers]
    decoder_texts = [kube.pod_get(sources.decoder_namespace, _name(p), sources.decoder_port, METRICS_PATH)
                     for p in decoders]
    return DpdCounters.parse(router_texts, decoder_texts)


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
