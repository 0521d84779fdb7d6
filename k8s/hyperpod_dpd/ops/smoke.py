"""``verify --smoke``: a short and a long prompt through the router, with the path each one took.

Requests go through the API server's service proxy to ``<name>-<namespace>-routing-service:443`` (see
:class:`~hyperpod_dpd.clients.kube.ServiceProxyTransport`), streamed, so the time to the first token is
measured from a laptop (it includes the API server hop). The path comes from the router's own log
line ``Conditional routing: estimated_tokens=..., threshold=..., disaggregate=True|False``.

The long prompt is the disaggregation gate: it passes only when the router logged
``disaggregate=True`` for it *and* the decoders' ``external_kv_transfer`` prompt-token counter rose
(:mod:`hyperpod_dpd.ops.dpd_counters`). It starts with a fresh nonce, so no prefix cache can serve it.
Its length comes from :mod:`hyperpod_dpd.contracts.router`, the rule ``bench`` sizes its prompts with.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hyperpod_dpd.clients.checks import Check, failed, passed, skipped
from hyperpod_dpd.clients.kube import KubeApi, KubeError
from hyperpod_dpd.contracts.operator import (
    OPERATOR_NAMESPACE,
    ROUTER_PORT,
    router_deployment,
    router_service,
)
from hyperpod_dpd.contracts.router import MARGIN, router_estimates, sentence_length, smoke_sentence
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.ops.dpd_counters import (
    ROUTING_LINE,
    EndpointNames,
    external_kv_tokens,
    role_metrics,
    router_logs,
)
from hyperpod_dpd.spec import DpdSpec

FOX = smoke_sentence()  # "The quick brown fox jumps over the lazy dog. ", measured in data/
# vLLM counts with the model's own tokenizer; 12 per sentence bounds the common ones, so the prompt fits.
MOST_TOKENS_PER_FOX = 12
MIN_SENTENCES = 20  # enough KV cache to see it move even when the threshold is 0
SHORT_PROMPT = "In one word, what colour is the sky on a clear day?"
SHORT_PROMPT_TOKENS = 14  # with the Llama 3 tokenizer; characters / 4 gives 12
MAX_TOKENS = 16

SHORT = "smoke: short prompt"
LONG = "smoke: long prompt"
INPUTS = "smoke: alert inputs"
# What each role's /metrics must carry for the alerts to see it (after the long prompt, LMCache's
# store histogram has samples if the image exports it at all).
ROLE_INPUTS = {"prefill": (m.REQUESTS_RUNNING, m.REQUESTS_WAITING, m.KV_STORE_PUT_TIME),
               "decode": (m.REQUESTS_RUNNING, m.KV_CACHE_USAGE, m.PROMPT_TOKENS_BY_SOURCE, m.PREEMPTIONS,
                          m.INTER_TOKEN_LATENCY)}
NOT_TRANSFERRED_CAUSES = (
    "kv_cache.hash_seed (PYTHONHASHSEED) or the image differs between prefill and decode, so the keys never "
    "match; the LMCache pd_role lines are not 'sender' on prefill and 'receiver' on decode; or a decode container "
    "restarted in place and the prefillers still write to its old NIXL agent, since LMCache's PD sender never "
    "reconnects to a host and port it knows (kubectl rollout restart deployment/prefill-<name>, or replace the "
    "decode pods, which gives them new addresses: kubectl rollout restart deployment/decode-<name>)")


@dataclass(frozen=True)
class Prompt:
    name: str
    text: str
    expect_disaggregate: bool
    estimate: tuple[int, int]  # the router's smallest and largest estimate (token count, characters / 4)

    @property
    def estimated_tokens(self) -> int:
        """The middle of the estimate, to find the router's line for this prompt."""
        return sum(self.estimate) // 2

    def size(self, threshold: int) -> str:
        """How long the router will think the prompt is, and how far that is from ``threshold``."""
        low, high = self.estimate
        size = f"~{low} tokens" if low == high else f"~{low}-{high} tokens"
        if not self.expect_disaggregate or threshold <= 0:
            return size
        return (f"{size} by the router's count (tokens or characters / 4), at least {low - threshold} "
                f"({(low - threshold) / threshold:.1%}) above routing.threshold {threshold}")


def prompts(spec: DpdSpec) -> tuple[Prompt, Prompt | str]:
    """The short prompt, and a long one that clears the routing threshold under the router's length rule
    (or why there is none).

    The long prompt has the fewest sentences whose smallest estimate clears the threshold by the margin
    ``bench`` uses too, and must fit ``max_model_len`` (with the answer) at 12 tokens per sentence.
    """
    threshold = spec.routing.threshold
    short = Prompt(SHORT, SHORT_PROMPT, expect_disaggregate=threshold == 0,
                   estimate=router_estimates(tokens=SHORT_PROMPT_TOKENS, characters=len(SHORT_PROMPT)))
    length = sentence_length()
    repeats = max(length.units_to_clear(threshold), MIN_SENTENCES)
    room = spec.max_model_len - MAX_TOKENS - 64
    if repeats * MOST_TOKENS_PER_FOX > room:
        return short, (f"routing.threshold {threshold} needs a prompt of about {length.estimates(repeats)[0]} "
                       f"tokens to clear it by {MARGIN:.0%}, more than max_model_len {spec.max_model_len} leaves "
                       "room for")
    return short, Prompt(LONG, FOX * repeats, expect_disaggregate=True, estimate=length.estimates(repeats))


def unique(prompt: Prompt, nonce: str) -> Prompt:
    """``prompt`` behind a nonce, so neither role's prefix cache (nor LMCache's) already holds it."""
    return Prompt(prompt.name, f"[{nonce}] {prompt.text}", prompt.expect_disaggregate, prompt.estimate)


def request_body(spec: DpdSpec, text: str) -> dict[str, Any]:
    """An OpenAI-style streamed request; ``model`` is the mount path, as the operator serves it."""
    body: dict[str, Any] = {"model": spec.model.mount_path, "max_tokens": MAX_TOKENS, "stream": True,
                            "temperature": 0}
    if "chat" in spec.invocation_path:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    return body


@dataclass(frozen=True)
class Timing:
    status: int
    first_token_s: float | None
    total_s: float
    streamed: bool
    error_body: str = ""


def send(kube: KubeApi, spec: DpdSpec, prompt: Prompt, *, timeout: float,
         clock: Callable[[], float] = time.monotonic) -> Timing:
    """POST the prompt and time the first streamed token (``data:`` line with content) and the end."""
    if kube.transport is None:
        raise KubeError("no HTTP transport to the router")
    start = clock()
    response = kube.transport.post(OPERATOR_NAMESPACE, router_service(spec), ROUTER_PORT,
                                   spec.invocation_path, request_body(spec, prompt.text), timeout=timeout)
    first: float | None = None
    received = bytearray()
    for chunk in response.chunks():
        received += chunk
        if first is None and response.status < 400 and _has_token(bytes(received)):
            first = clock() - start
    total = clock() - start
    text = received.decode("utf-8", "replace")
    streamed = "data:" in text
    if response.status >= 400:
        return Timing(response.status, None, total, streamed, _error_text(text))
    return Timing(response.status, first, total, streamed)


def _has_token(received: bytes) -> bool:
    for line in received.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content") or choice.get("text"):
                return True
    return False


def _error_text(text: str) -> str:
    try:
        parsed = json.loads(text)
        message = parsed.get("message") or (parsed.get("error") or {}).get("message") or text
        return str(message)[:200]
    except (ValueError, AttributeError):
        return text.strip()[:200]


@dataclass(frozen=True)
class RoutingDecision:
    estimated_tokens: int
    threshold: int
    disaggregate: bool


def routing_decision(kube: KubeApi, spec: DpdSpec, since_seconds: int,
                     expected_tokens: int) -> RoutingDecision | str:
    """The router's ``Conditional routing`` line for our request, or why there is none.

    Reads every router pod's log for the last ``since_seconds`` and picks the line whose
    ``estimated_tokens`` is closest to ``expected_tokens`` (the latest on a tie), so a second router
    replica or a little other traffic does not confuse a short prompt with a long one.
    """
    logs = router_logs(kube, router_deployment(spec), since_seconds)
    if not logs:
        return f"no router pod {router_deployment(spec)}-* in {OPERATOR_NAMESPACE}"
    found = [RoutingDecision(int(m["tokens"]), int(m["threshold"]), m["disaggregate"] == "True")
             for log in logs.values() for m in ROUTING_LINE.finditer(log)]
    if not found:
        return "no 'Conditional routing' line in the router log"

    def distance(decision: RoutingDecision) -> float:
        return abs(math.log1p(decision.estimated_tokens) - math.log1p(expected_tokens))

    best = min(distance(d) for d in found)
    return [d for d in found if distance(d) == best][-1]


def run_smoke(kube: KubeApi, spec: DpdSpec, *, timeout: float = 300.0,
              clock: Callable[[], float] = time.monotonic,
              announce: Callable[[str], None] | None = None, nonce: str | None = None) -> list[Check]:
    """The short prompt, then the long one; ``announce`` is told before each request is sent."""
    rows: list[Check] = []
    for planned in prompts(spec):
        prompt = (unique(planned, nonce or secrets.token_hex(4))
                  if not isinstance(planned, str) and planned.expect_disaggregate else planned)
        if isinstance(prompt, str):
            rows.append(skipped(LONG, prompt))
            continue
        if announce is not None:
            announce(f"sending the {prompt.name.removeprefix('smoke: ')} ({prompt.size(0)}) "
                     f"through {router_service(spec)}...")
        rows.append(smoke_one(kube, spec, prompt, timeout=timeout, clock=clock))
    if spec.metrics.enabled:
        rows.append(alert_inputs(kube, spec))
    return rows


def _exported(text: str, metric: m.Metric) -> bool:
    name = metric.bucket() if metric.kind is m.Kind.HISTOGRAM else metric.name
    return re.search(rf"^{re.escape(name)}[{{ ]", text, re.MULTILINE) is not None


def alert_inputs(kube: KubeApi, spec: DpdSpec) -> Check:
    """Does each role's ``/metrics`` carry the series its alerts read? A missing vLLM series fails.

    LMCache's store histogram reaches vLLM's ``/metrics`` only through the multiprocess directory
    the chart renders, which no cluster has confirmed yet; its absence is reported, not failed, since
    DpdKvStoreMetricsAbsent and the KvTransferBelow1GBps log alarm cover it.
    """
    names = EndpointNames.of(spec)
    missing: list[str] = []
    notes: list[str] = []
    for role, inputs in ROLE_INPUTS.items():
        try:
            texts = role_metrics(kube, names, role)
        except KubeError as err:
            return failed(INPUTS, f"cannot read the {role} pods' metrics: {err}")
        if not texts:
            return failed(INPUTS, f"no {role} pod to read metrics from")
        for metric in inputs:
            absent = sorted(pod for pod, text in texts.items() if not _exported(text, metric))
            if not absent:
                continue
            where = f"{metric.name} on {', '.join(absent)}"
            (notes if metric.exporter is m.Exporter.LMCACHE else missing).append(where)
    note = ("; not exported (DpdKvTransferSlow cannot fire; DpdKvStoreMetricsAbsent and the KvTransferBelow1GBps "
            f"log alarm stand in): {'; '.join(notes)}") if notes else ""
    if missing:
        return failed(INPUTS, f"the alerts cannot see: {'; '.join(missing)} (check --disable-log-stats and "
                              f"metrics.model_metrics_port/path){note}")
    return passed(INPUTS, f"every vLLM series the alerts read is on prefill and decode /metrics{note}")


def smoke_one(kube: KubeApi, spec: DpdSpec, prompt: Prompt, *, timeout: float,
              clock: Callable[[], float] = time.monotonic) -> Check:
    """Send one prompt; PASS when it answered and the router took the expected path.

    A prompt meant to disaggregate also needs the decoders' external KV tokens to rise, and an unknown
    path is a failure for it: nothing proves it was disaggregated.
    """
    size = prompt.size(spec.routing.threshold)
    names = EndpointNames.of(spec)
    before: float | None = None
    if prompt.expect_disaggregate:
        try:
            before, _ = external_kv_tokens(kube, names)
        except (KubeError, ValueError) as err:
            return failed(prompt.name, f"{size}: cannot read the decoders' KV transfer counter: {err}")
    try:
        timing = send(kube, spec, prompt, timeout=timeout, clock=clock)
    except KubeError as err:
        return failed(prompt.name, f"{size}: {err}")
    if timing.status >= 400:
        hint = " (the model may still be loading: wait for DeploymentComplete)" if timing.status == 503 else ""
        return failed(prompt.name, f"{size}: HTTP {timing.status}{hint}: {timing.error_body}")
    if timing.first_token_s is not None:
        latency = f"time to first token {timing.first_token_s:.2f}s, total {timing.total_s:.2f}s"
    else:
        latency = f"total {timing.total_s:.2f}s (no streamed token seen: time to first token unknown)"
    try:
        decision = routing_decision(kube, spec, since_seconds=math.ceil(timing.total_s) + 30,
                                    expected_tokens=prompt.estimated_tokens)
    except KubeError as err:
        decision = f"router log unreadable: {err}"
    expected = "prefill -> decode" if prompt.expect_disaggregate else "decode only"
    head = f"{size}: HTTP {timing.status}, {latency}"
    if isinstance(decision, str):
        if prompt.expect_disaggregate:
            return failed(prompt.name, f"{head}\npath unknown ({decision}); expected {expected}, which only the "
                                       "router's log can confirm")
        return passed(prompt.name, f"{head}\npath unknown ({decision}); expected {expected}")
    path = "prefill -> decode" if decision.disaggregate else "decode only"
    routing = (f"path {path} (router: estimated_tokens={decision.estimated_tokens}, "
               f"threshold={decision.threshold}, disaggregate={decision.disaggregate})")
    if decision.disaggregate != prompt.expect_disaggregate:
        fix = ("the router's tokenizer may count fewer tokens: lower routing.threshold"
               if prompt.expect_disaggregate else "routing.threshold may be too low")
        return failed(prompt.name, f"{head}\n{routing}; expected {expected}: {fix}")
    if before is None:
        return passed(prompt.name, f"{head}\n{routing}")
    try:
        after, pods = external_kv_tokens(kube, names)
    except (KubeError, ValueError) as err:
        return failed(prompt.name, f"{head}\n{routing}; cannot read the decoders' KV transfer counter: {err}")
    moved = after - before
    if moved <= 0:
        causes = NOT_TRANSFERRED_CAUSES.replace("<name>", spec.name)
        return failed(prompt.name, f"{head}\n{routing}; but the decoders received no KV cache "
                                   f"(external_kv_transfer prompt tokens unchanged on {pods} pod(s)): {causes}")
    return passed(prompt.name, f"{head}\n{routing}; decoders received {moved:g} prompt tokens of KV cache")
