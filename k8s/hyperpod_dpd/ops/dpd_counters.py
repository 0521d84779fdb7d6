"""Did the endpoint really disaggregate? The router's decisions and the decoder's transferred KV tokens.

Two counts, read from a laptop through the API server (no port-forward, no Prometheus):

* the router's ``Conditional routing: ... disaggregate=True`` log lines (AWS's DPD page documents
  the line; the router's own metrics port is not documented);
* ``vllm:prompt_tokens_by_source_total{source="external_kv_transfer"}`` of each decode pod, from
  vLLM's ``/metrics`` through the pod proxy. vLLM 0.19.0 counts there every prompt token the
  decoder took from the KV connector instead of computing it (``vllm/v1/metrics/loggers.py``).

Read them before and after a request (:func:`read_counters`, :meth:`DpdCounters.since`): a
disaggregated request that moved no KV tokens is the silent failure DPD is known for.

Per decoder pod, :func:`decoder_counts` reads that counter and ``vllm:prompt_tokens_total`` (every
prompt token the pod's scheduler saw, ``vllm/v1/metrics/loggers.py`` l.591 and l.1117), and
:func:`pod_deltas` subtracts two readings pod by pod, taking a restarted pod's (or a new pod's)
reading as its whole delta, since its counters started again from zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.contracts.operator import (
    OPERATOR_NAMESPACE,
    ROLE_LABEL,
    ROUTER_CONTAINER,
    role_deployment,
    router_deployment,
)
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.spec import DpdSpec

# The router's one documented line per request (AWS's DPD page): which path it chose and why.
ROUTING_LINE = re.compile(
    r"Conditional routing: estimated_tokens=(?P<tokens>\d+), threshold=(?P<threshold>\d+), "
    r"disaggregate=(?P<disaggregate>True|False)")
DEFAULT_METRICS_PATH = "/metrics"
# One sample line of the Prometheus text format: ``name{labels} value [timestamp]``, labels optional.
SAMPLE = re.compile(r'^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
LABEL = re.compile(r'(?P<key>\w+)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, kw_only=True)
class EndpointNames:
    """Where one endpoint's pods and router live (the operator's names; see :mod:`hyperpod_dpd.contracts.operator`)."""

    namespace: str
    prefill_deployment: str
    decode_deployment: str
    router_deployment: str
    metrics_port: int
    metrics_path: str = DEFAULT_METRICS_PATH

    @classmethod
    def of(cls, spec: DpdSpec) -> EndpointNames:
        """The names the operator gives ``spec``'s objects, and where its vLLM serves ``/metrics``."""
        port = spec.metrics.model_metrics_port if spec.metrics.model_metrics_port is not None else spec.port
        return cls(namespace=spec.namespace, prefill_deployment=role_deployment(spec, "prefill"),
                   decode_deployment=role_deployment(spec, "decode"),
                   router_deployment=router_deployment(spec), metrics_port=port,
                   metrics_path=spec.metrics.model_metrics_path or DEFAULT_METRICS_PATH)


@dataclass(frozen=True, kw_only=True)
class DpdCounters:
    """The router's disaggregated decisions in the log window, and each decoder's external KV tokens so far.

    :param external_kv_by_pod: ``external_kv_transfer`` prompt tokens per decode pod, kept apart so that
        one pod's restart (its counter back at zero) cannot hide another pod's growth.
    """

    disaggregated_requests: int
    external_kv_by_pod: Mapping[str, float]

    @property
    def external_kv_tokens(self) -> float:
        return sum(self.external_kv_by_pod.values())

    @property
    def decode_pods(self) -> int:
        return len(self.external_kv_by_pod)

    def since(self, before: DpdCounters) -> DpdCounters:
        """The change from ``before``, pod by pod: a pod that is new, or whose counter went down (it
        restarted), counts from zero, as Prometheus' ``increase`` does; a pod gone since is left out."""
        return DpdCounters(disaggregated_requests=max(0, self.disaggregated_requests - before.disaggregated_requests),
                           external_kv_by_pod={pod: counter_growth(before.external_kv_by_pod.get(pod), now)
                                               for pod, now in self.external_kv_by_pod.items()})


def counter_growth(then: float | None, now: float) -> float:
    """A counter's growth between two readings of one pod; a drop (or no first reading) means it restarted at 0."""
    return now if then is None or now < then else now - then


def sample_value(exposition: str, metric: str, labels: Mapping[str, str] | None = None) -> float | None:
    """The sum of ``metric``'s samples whose labels include ``labels`` in a Prometheus text exposition, or None."""
    total: float | None = None
    for line in exposition.splitlines():
        found = SAMPLE.match(line)
        if found is None or found["name"] != metric:
            continue
        have = {pair["key"]: pair["value"] for pair in LABEL.finditer(found["labels"] or "")}
        if labels and any(have.get(key) != value for key, value in labels.items()):
            continue
        try:
            total = (total or 0.0) + float(found["value"])
        except ValueError:  # a malformed sample is not a count
            continue
    return total


def role_metrics(kube: KubeApi, names: EndpointNames, role: str) -> dict[str, str]:
    """Each ``role`` pod's ``/metrics`` text, read through the API server's pod proxy."""
    deployment = names.prefill_deployment if role == "prefill" else names.decode_deployment
    prefix = f"{deployment}-"
    pods = [str(p["metadata"]["name"]) for p in kube.pods(names.namespace, f"{ROLE_LABEL}={role}")
            if str((p.get("metadata") or {}).get("name", "")).startswith(prefix)]
    return {pod: kube.pod_get(names.namespace, pod, names.metrics_port, names.metrics_path) for pod in pods}


def external_kv_tokens(kube: KubeApi, names: EndpointNames) -> dict[str, float]:
    """``external_kv_transfer`` prompt tokens of each decode pod.

    Raises :class:`~hyperpod_dpd.clients.kube.KubeError` when a pod's metrics cannot be read, and
    ``ValueError`` when a pod's vLLM does not export the series (metrics off or another vLLM).
    """
    tokens: dict[str, float] = {}
    for pod, text in role_metrics(kube, names, "decode").items():
        value = sample_value(text, m.PROMPT_TOKENS_BY_SOURCE.name, {"source": m.EXTERNAL_KV_TRANSFER})
        if value is None:
            series = f'{m.PROMPT_TOKENS_BY_SOURCE.name}{{source="{m.EXTERNAL_KV_TRANSFER}"}}'
            raise ValueError(f"{pod} exports no {series} on :{names.metrics_port}{names.metrics_path} "
                             "(is --disable-log-stats set?)")
        tokens[pod] = value
    return tokens


# vLLM 0.19.0's total prompt-token counter (the contract's ``vllm:prompt_tokens`` family): it grows by
# each prompt's full length when the request is prefilled, whatever the tokens' source.
PROMPT_TOKENS_TOTAL = str(m.derived_families()["vllm:prompt_tokens"]["series"][0])


@dataclass(frozen=True, kw_only=True)
class DecoderCounts:
    """One decode pod's counters: prompt tokens it took from the KV connector, all it was given, those its own
    prefix cache held, and (when ``vllm:request_prompt_tokens`` is exported) the requests it served whose prompt
    was above a bucket bound."""

    external_kv_tokens: float
    prompt_tokens: float
    cache_hit_tokens: float = 0.0
    long_prompts: float | None = None


@dataclass(frozen=True, kw_only=True)
class PodDelta:
    """How much one decode pod's counters grew between two readings; ``note`` says when they restarted."""

    pod: str
    external_kv_tokens: float
    prompt_tokens: float
    note: str = ""
    cache_hit_tokens: float = 0.0
    long_prompts: float | None = None


def long_requests(text: str, bound: int) -> float | None:
    """Requests ``vllm:request_prompt_tokens`` counted above ``bound`` (one of its bucket bounds), or None."""
    family = m.REQUEST_PROMPT_TOKENS.name
    total = sample_value(text, f"{family}_count")
    below = next((value for le in (f"{bound}.0", str(bound))
                  if (value := sample_value(text, f"{family}_bucket", {"le": le})) is not None), None)
    return None if total is None or below is None else total - below


def decoder_counts(kube: KubeApi, names: EndpointNames, *, long_bound: int | None = None) -> dict[str, DecoderCounts]:
    """Each decode pod's :class:`DecoderCounts` (requests above ``long_bound`` when given); raises as
    :func:`external_kv_tokens` does."""
    counts: dict[str, DecoderCounts] = {}
    for pod, text in role_metrics(kube, names, "decode").items():
        external = sample_value(text, m.PROMPT_TOKENS_BY_SOURCE.name, {"source": m.EXTERNAL_KV_TRANSFER})
        total = sample_value(text, PROMPT_TOKENS_TOTAL)
        if external is None or total is None:
            series = (f'{m.PROMPT_TOKENS_BY_SOURCE.name}{{source="{m.EXTERNAL_KV_TRANSFER}"}}' if external is None
                      else PROMPT_TOKENS_TOTAL)
            raise ValueError(f"{pod} exports no {series} on :{names.metrics_port}{names.metrics_path} "
                             "(is --disable-log-stats set?)")
        hits = sample_value(text, m.PROMPT_TOKENS_BY_SOURCE.name, {"source": m.LOCAL_CACHE_HIT}) or 0.0
        counts[pod] = DecoderCounts(external_kv_tokens=external, prompt_tokens=total, cache_hit_tokens=hits,
                                    long_prompts=None if long_bound is None else long_requests(text, long_bound))
    return counts


def pod_deltas(before: Mapping[str, DecoderCounts], after: Mapping[str, DecoderCounts]) -> dict[str, PodDelta]:
    """The growth of each pod in ``after`` since ``before``.

    A pod absent from ``before`` is new, and a pod whose counter went down restarted between the
    readings: both started from zero, so their ``after`` values are the delta, and the note says so.
    A pod that is gone from ``after`` is left out.
    """
    deltas: dict[str, PodDelta] = {}
    for pod, now in after.items():
        then = before.get(pod)
        restarted = then is not None and (now.prompt_tokens < then.prompt_tokens
                                          or now.external_kv_tokens < then.external_kv_tokens)
        if then is None or restarted:
            note = ("new since the first reading" if then is None else "its counters went down: vLLM restarted "
                    "between the readings, so the values since the restart are used")
            deltas[pod] = PodDelta(pod=pod, external_kv_tokens=now.external_kv_tokens,
                                   prompt_tokens=now.prompt_tokens, cache_hit_tokens=now.cache_hit_tokens,
                                   long_prompts=now.long_prompts, note=note)
        else:
            long = (None if now.long_prompts is None or then.long_prompts is None
                    else now.long_prompts - then.long_prompts)
            deltas[pod] = PodDelta(pod=pod, external_kv_tokens=now.external_kv_tokens - then.external_kv_tokens,
                                   prompt_tokens=now.prompt_tokens - then.prompt_tokens,
                                   cache_hit_tokens=now.cache_hit_tokens - then.cache_hit_tokens, long_prompts=long)
    return deltas


def router_pods(kube: KubeApi, router: str) -> list[str]:
    """The pods of the router Deployment ``router`` in the operator's namespace."""
    names = (str((pod.get("metadata") or {}).get("name", "")) for pod in kube.pods(OPERATOR_NAMESPACE, ""))
    return [name for name in names if name.startswith(f"{router}-")]


def router_logs(kube: KubeApi, router: str, since_seconds: int) -> dict[str, str]:
    """Each router pod's ``router-container`` log of the last ``since_seconds``."""
    return {pod: kube.pod_log(OPERATOR_NAMESPACE, pod, ROUTER_CONTAINER, since_seconds)
            for pod in router_pods(kube, router)}


def disaggregated_requests(kube: KubeApi, names: EndpointNames, since_seconds: int) -> int:
    """The router pods' ``disaggregate=True`` lines in the last ``since_seconds``."""
    logs = router_logs(kube, names.router_deployment, since_seconds)
    return sum(routing_decisions(log)[0] for log in logs.values())


def routing_decisions(log: str) -> tuple[int, int]:
    """How many requests a router log sent the disaggregated way, and how many straight to the decoder."""
    choices = [found["disaggregate"] for found in ROUTING_LINE.finditer(log)]
    return choices.count("True"), choices.count("False")


def read_counters(kube: KubeApi, names: EndpointNames, *, since_seconds: int) -> DpdCounters:
    """Both counts now; raises ``KubeError``/``ValueError`` as :func:`external_kv_tokens` does."""
    return DpdCounters(disaggregated_requests=disaggregated_requests(kube, names, since_seconds),
                       external_kv_by_pod=external_kv_tokens(kube, names))
