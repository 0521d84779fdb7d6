"""``verify --smoke``: a short and a long prompt through the router, with the path each one took.

Requests go through the API server's service proxy to ``<name>-<namespace>-routing-service:443`` (see
:class:`~hyperpod_dpd.clients.kube.ServiceProxyTransport`), streamed, so the time to the first token is
measured from a laptop (it includes the API server hop). The path comes from the router's own log
line ``Conditional routing: estimated_tokens=..., threshold=..., disaggregate=True|False``.

The long prompt is the disaggregation gate, judged per decode pod. It is sent (each time behind a fresh
nonce, so no prefix cache can serve it) until every decoder has received KV cache, at most
``2 x decoders + 2`` times and within the timeout, since the router spreads requests over the decoders.
It passes only when the router logged ``disaggregate=True`` for each one *and* every decode pod took at
least :data:`MIN_TRANSFERRED_SHARE` of the prompt tokens it was given from the KV connector
(``external_kv_transfer`` against ``vllm:prompt_tokens_total``, per pod, restart-safe:
:func:`~hyperpod_dpd.ops.dpd_counters.pod_deltas`). Its length comes from
:mod:`hyperpod_dpd.contracts.router`, the rule ``bench`` sizes its prompts with.
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
    ROLE_LABEL,
    ROUTER_PORT,
    router_deployment,
    router_service,
)
from hyperpod_dpd.contracts.router import MARGIN, router_estimates, sentence_length, smoke_sentence
from hyperpod_dpd.observability import evidence as ev
from hyperpod_dpd.observability import metrics as m
from hyperpod_dpd.ops.dpd_counters import (
    ROUTING_LINE,
    EndpointNames,
    PodDelta,
    decoder_counts,
    pod_deltas,
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
# A healthy transfer moves all of a prompt's tokens but the last: LMCache's PD mode forces
# save_unfull_chunk=True, so the last partial chunk is sent too (lmcache@0.4.3:lmcache/v1/config.py
# l.563-573), and on a full hit the decoder recomputes the last token (lmcache@0.4.3:
# lmcache/integration/vllm/vllm_v1_adapter.py l.1304-1306). vLLM adds those tokens to
# external_kv_transfer and the whole prompt to vllm:prompt_tokens_total (vllm@0.19.0:
# vllm/v1/metrics/stats.py l.282-283 and l.297, vllm/v1/metrics/loggers.py l.1117-1123). So a healthy
# decoder shows over 99% for any prompt the gate sends (20 sentences or more); 90% leaves room for a few
# blocks its own prefix cache held (the chat template) and light other traffic during the gate, and
# fails a transfer that lost more than a tenth of the prompt (255 of 4,180 tokens is 6%).
MIN_TRANSFERRED_SHARE = ev.MIN_ARRIVED_SHARE
PARTIAL_CAUSES = (
    "part of the KV cache did not arrive and the decoder computed the rest itself: look for 'Retrieved N out of "
    "M required tokens' with N < M and for KvNotRetrieved lines in the decoder's log; the prefiller's PD buffer "
    "may be too small (LMCache pd_buffer_size) or a transfer failed; or other traffic reached this decoder during "
    "the gate (rerun when it is idle)")
NOT_SERVED_CAUSES = (
    "the router sent it none of the long prompts, so nothing proves it receives KV cache: check that it is Ready "
    "and that the router's log names its address ('Routing request ... to decoder http://<pod IP>'), then rerun")
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
    finish_reason: str | None = None
    content: bool = True

    def empty_success(self) -> str | None:
        """Why an HTTP 2xx answer is no answer (peers report errors disguised as success), or None."""
        if self.status >= 400:
            return None
        if self.finish_reason == "error":
            return f"HTTP {self.status} with finish_reason 'error': an error disguised as an answer"
        if not self.content:
            return f"HTTP {self.status} with no content (finish_reason {self.finish_reason!r})"
        return None


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
    answer = answer_of(response.status, bytes(received))
    return Timing(response.status, first, total, streamed, finish_reason=answer.finish_reason,
                  content=bool(answer.text.strip()))


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
    """The short prompt, then the long one; ``announce`` is told before each request is sent.

    ``timeout`` bounds each request, and all the long prompts together.
    """
    rows: list[Check] = []
    short, long = prompts(spec)
    if announce is not None:
        announce(f"sending the {short.name.removeprefix('smoke: ')} ({short.size(0)}) through "
                 f"{router_service(spec)}...")
    if short.expect_disaggregate:  # routing.threshold 0: every prompt is disaggregated
        rows.append(smoke_one(kube, spec, unique(short, nonce or secrets.token_hex(4)), timeout=timeout,
                              clock=clock))
    else:
        rows.append(smoke_one(kube, spec, short, timeout=timeout, clock=clock))
    if isinstance(long, str):
        rows.append(skipped(LONG, long))
    else:
        if announce is not None:
            announce(f"sending the {long.name.removeprefix('smoke: ')} ({long.size(0)}) through "
                     f"{router_service(spec)}...")
        rows.append(smoke_disaggregated(kube, spec, long, nonce=nonce or secrets.token_hex(4), timeout=timeout,
                                        clock=clock))
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


def _latency(timing: Timing) -> str:
    if timing.first_token_s is not None:
        return f"time to first token {timing.first_token_s:.2f}s, total {timing.total_s:.2f}s"
    return f"total {timing.total_s:.2f}s (no streamed token seen: time to first token unknown)"


def _http_failure(timing: Timing) -> str:
    hint = " (the model may still be loading: wait for DeploymentComplete)" if timing.status == 503 else ""
    return f"HTTP {timing.status}{hint}: {timing.error_body}"


def _routed(kube: KubeApi, spec: DpdSpec, prompt: Prompt, timing: Timing) -> tuple[str, str | None]:
    """The routing text for the row, and a failure when the path is not the expected one (or unknown for
    a prompt meant to disaggregate: nothing else proves it was)."""
    try:
        decision = routing_decision(kube, spec, since_seconds=math.ceil(timing.total_s) + 30,
                                    expected_tokens=prompt.estimated_tokens)
    except KubeError as err:
        decision = f"router log unreadable: {err}"
    expected = "prefill -> decode" if prompt.expect_disaggregate else "decode only"
    if isinstance(decision, str):
        if prompt.expect_disaggregate:
            return "", (f"path unknown ({decision}); expected {expected}, which only the router's log can "
                        "confirm")
        return f"path unknown ({decision}); expected {expected}", None
    path = "prefill -> decode" if decision.disaggregate else "decode only"
    routing = (f"path {path} (router: estimated_tokens={decision.estimated_tokens}, "
               f"threshold={decision.threshold}, disaggregate={decision.disaggregate})")
    if decision.disaggregate != prompt.expect_disaggregate:
        fix = ("the router's tokenizer may count fewer tokens: lower routing.threshold"
               if prompt.expect_disaggregate else "routing.threshold may be too low")
        return routing, f"{routing}; expected {expected}: {fix}"
    return routing, None


def smoke_one(kube: KubeApi, spec: DpdSpec, prompt: Prompt, *, timeout: float,
              clock: Callable[[], float] = time.monotonic) -> Check:
    """Send one prompt; PASS when it answered and the router took the expected path."""
    size = prompt.size(spec.routing.threshold)
    try:
        timing = send(kube, spec, prompt, timeout=timeout, clock=clock)
    except KubeError as err:
        return failed(prompt.name, f"{size}: {err}")
    if timing.status >= 400:
        return failed(prompt.name, f"{size}: {_http_failure(timing)}")
    if (empty := timing.empty_success()) is not None:
        return failed(prompt.name, f"{size}: {empty}")
    head = f"{size}: HTTP {timing.status}, {_latency(timing)}"
    routing, problem = _routed(kube, spec, prompt, timing)
    if problem is not None:
        return failed(prompt.name, f"{head}\n{problem}")
    return passed(prompt.name, f"{head}\n{routing}")


def long_prompt_limit(decoders: int) -> int:
    """How many long prompts the gate sends at most: enough for a router that spreads them to reach each decoder."""
    return 2 * decoders + 2


def smoke_disaggregated(kube: KubeApi, spec: DpdSpec, planned: Prompt, *, nonce: str, timeout: float,
                        clock: Callable[[], float] = time.monotonic) -> Check:
    """Send the long prompt until every decode pod has received KV cache (at most :func:`long_prompt_limit`
    times, within ``timeout`` in all), then judge each pod by its own counters.

    Each send must answer and be logged ``disaggregate=True``. Each decode pod must then have taken at
    least :data:`MIN_TRANSFERRED_SHARE` of the prompt tokens it was given from the KV connector; a pod
    that restarted, or is new, counts from zero and is named.
    """
    size = planned.size(spec.routing.threshold)
    names = EndpointNames.of(spec)
    bound = ev.bucket_bound_below(planned.estimate[0])
    try:
        before = decoder_counts(kube, names, long_bound=bound)
    except (KubeError, ValueError) as err:
        return failed(planned.name, f"{size}: cannot read the decoders' KV transfer counters: {err}")
    if not before:
        return failed(planned.name, f"{size}: no decode pod to read the KV transfer counters from")
    limit = long_prompt_limit(len(before))
    deadline = clock() + timeout
    head, routing = "", ""
    deltas: dict[str, PodDelta] = {}
    sent = 0
    while sent < limit and (sent == 0 or clock() < deadline):
        prompt = unique(planned, nonce if sent == 0 else f"{nonce}-{sent}")
        try:
            timing = send(kube, spec, prompt, timeout=max(1.0, min(timeout, deadline - clock())), clock=clock)
        except KubeError as err:
            return failed(planned.name, f"{size}: {err}")
        sent += 1
        if timing.status >= 400:
            return failed(planned.name, f"{size}: {_http_failure(timing)}")
        if (empty := timing.empty_success()) is not None:
            return failed(planned.name, f"{size}: {empty}")
        if not head:
            head = f"{size}: HTTP {timing.status}, {_latency(timing)}"
        routing, problem = _routed(kube, spec, prompt, timing)
        if problem is not None:
            return failed(planned.name, f"{head}\n{problem}" + (f" (long prompt {sent})" if sent > 1 else ""))
        try:
            deltas = pod_deltas(before, decoder_counts(kube, names, long_bound=bound))
        except (KubeError, ValueError) as err:
            return failed(planned.name, f"{head}\n{routing}; cannot read the decoders' KV transfer counters: {err}")
        if deltas and all(delta.external_kv_tokens > 0 for delta in deltas.values()):
            break
    return _judge_transfers(spec, planned, f"{head}\n{routing}", deltas, sent)


def gate_window(delta: PodDelta, planned: Prompt) -> ev.DecoderWindow[ev.Number]:
    """One decoder's growth during the gate as the evidence model's window, over the gate's own prompts: the
    requests it served above the bucket bound under the prompt's length, each at the prompt's smallest
    estimate, so other clients' short prompts on the pod do not count (O8). Without vLLM's prompt-length
    histogram, every prompt token the pod was given."""
    long = delta.long_prompts
    tokens = delta.prompt_tokens if long is None else long * planned.estimate[0]
    return ev.DecoderWindow(long_prompts=long, long_prompt_tokens=tokens, external_tokens=delta.external_kv_tokens,
                            cache_hit_tokens=delta.cache_hit_tokens,
                            computed_tokens=delta.prompt_tokens - delta.external_kv_tokens - delta.cache_hit_tokens,
                            chunk_tokens=float(0))


def _judge_transfers(spec: DpdSpec, planned: Prompt, head: str, deltas: dict[str, PodDelta], sent: int) -> Check:
    name = planned.name
    received: list[str] = []
    problems: list[str] = []
    causes: list[str] = []
    for pod, delta in sorted(deltas.items()):
        note = f" ({delta.note})" if delta.note else ""
        window = gate_window(delta, planned)
        needed = ev.needed_tokens(ev.NUMBERS, window) or 0.0
        share = ev.arrived_share(ev.NUMBERS, window) or 0.0
        tokens = f"{delta.external_kv_tokens:,.0f} of {needed:,.0f} prompt tokens"
        if delta.prompt_tokens <= 0 or delta.long_prompts == 0:
            problems.append(f"{pod} served none of the {sent} long prompt(s){note}")
            causes.append(NOT_SERVED_CAUSES)
        elif delta.external_kv_tokens <= 0:
            problems.append(f"{pod} received no KV cache: it computed all {delta.prompt_tokens:,.0f} prompt tokens "
                            f"itself (external_kv_transfer unchanged){note}")
            causes.append(NOT_TRANSFERRED_CAUSES.replace("<name>", spec.name))
        elif share < MIN_TRANSFERRED_SHARE:
            problems.append(f"{pod} received {tokens} from the KV connector ({share:.1%}, below "
                            f"{MIN_TRANSFERRED_SHARE:.0%}){note}")
            causes.append(PARTIAL_CAUSES)
        else:
            received.append(f"{pod}: {tokens} from the KV connector ({share:.1%}){note}")
    counted = f"{sent} long prompt(s) sent"
    if problems:
        lines = [f"{head}; {counted}, but not every decoder received its KV cache:",
                 *(f"  {line}" for line in problems), *(f"  ok {line}" for line in received),
                 f"  likely: {'; or '.join(dict.fromkeys(causes))}"]
        return failed(name, "\n".join(lines))
    lines = [f"{head}; {counted}, every decoder received its KV cache (at least {MIN_TRANSFERRED_SHARE:.0%} of "
             "its prompt tokens):", *(f"  {line}" for line in received)]
    return passed(name, "\n".join(lines))


# --- the correctness gate ------------------------------------------------------------------------

CORRECTNESS = "smoke: same answers"
CORRECTNESS_TOKENS = 16
CORRECTNESS_SEED = 27
# Questions with one obvious greedy continuation, behind the long prompt's sentences: a corrupted or
# mis-keyed KV cache changes the answer from the first token (vllm-project/vllm#52617), while two
# healthy engines agree on it.
QUESTIONS = ("Now count from 1 to 20, separated by spaces.",
             "Now write the English alphabet in capital letters, separated by spaces.",
             "Now repeat the word 'decode' five times, separated by commas.")
WRONG_ANSWER_CAUSES = (
    "the decoder read KV cache that is not this prompt's: the KV layout or dtype differs between the roles "
    "(--kv-cache-dtype, tensor parallel size, the model revision or the image: render both roles from one spec, "
    "`hyperpod-dpd validate` checks the KV-shape flags); --block-size or LMCache's chunk_size differs between the "
    "roles (set them once for both); the prefix-hash seed differs (PYTHONHASHSEED and kv_cache.hash_seed must be "
    "the same on both roles); or a decode container restarted in place and the prefillers write to its old NIXL "
    "agent (kubectl rollout restart deployment/prefill-<name>). One prompt diverging after several equal tokens "
    "can be a near-tie between two GPUs' kernels: rerun before acting on it")


@dataclass(frozen=True)
class Answer:
    """One answer: its HTTP status and text, why it is no answer (``error``), and how it ended: the
    ``finish_reason`` and ``usage.completion_tokens`` when the server says (None when it does not)."""

    status: int
    text: str
    error: str = ""
    finish_reason: str | None = None
    completion_tokens: int | None = None

    def refused(self, wanted: int) -> str | None:
        """Why this answer cannot be compared with another, or None: an error, HTTP 200 carrying
        ``finish_reason: "error"`` (peers report it, smg#2382), no text, or fewer tokens than ``wanted``
        without the server saying it stopped at the length limit (one token, or an early stop, agrees with
        anything)."""
        if self.status >= 400 or self.error:
            return f"{f'HTTP {self.status}: ' if self.status >= 400 else ''}{self.error}"
        if self.finish_reason == "error":
            return f"HTTP {self.status} with finish_reason 'error' (an error disguised as an answer)"
        if not self.text.strip():
            return f"HTTP {self.status} with no content (finish_reason {self.finish_reason!r})"
        if self.finish_reason != "length" and self.completion_tokens != wanted:
            return (f"stopped after {self.completion_tokens if self.completion_tokens is not None else 'an unknown'}"
                    f" of the {wanted} tokens asked for (finish_reason {self.finish_reason!r}): too short to compare")
        return None


def correctness_body(spec: DpdSpec, text: str, *, cache_salt: str | None = None) -> dict[str, Any]:
    """A greedy, seeded, unstreamed request for :data:`CORRECTNESS_TOKENS` tokens; ``cache_salt`` keeps
    vLLM's prefix cache from serving it (``vllm/v1/core/kv_cache_utils.py`` l.518-526 adds the salt to
    the first block's hash)."""
    body: dict[str, Any] = {"model": spec.model.mount_path, "max_tokens": CORRECTNESS_TOKENS, "stream": False,
                            "temperature": 0, "seed": CORRECTNESS_SEED}
    if "chat" in spec.invocation_path:
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = text
    if cache_salt is not None:
        body["cache_salt"] = cache_salt
    return body


def answer_of(status: int, raw: bytes) -> Answer:
    """The generated text of an OpenAI-style answer, unstreamed or streamed (``data:`` events)."""
    text = raw.decode("utf-8", "replace")
    if status >= 400:
        return Answer(status, "", _error_text(text))
    events: list[Any] = []
    if text.lstrip().startswith("data:"):
        for line in text.splitlines():
            if line.startswith("data:") and line.strip() != "data: [DONE]":
                try:
                    events.append(json.loads(line[5:]))
                except ValueError:
                    continue
    else:
        try:
            events.append(json.loads(text))
        except ValueError:
            return Answer(status, "", f"not an OpenAI-style answer: {text.strip()[:200]}")
    pieces: list[str] = []
    finish: str | None = None
    tokens: int | None = None
    for event in events:
        usage = event.get("usage") if isinstance(event, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            tokens = usage["completion_tokens"]
        choices = event.get("choices") if isinstance(event, dict) else None
        if not choices or not isinstance(choices[0], dict):
            continue
        choice = choices[0]
        piece = ((choice.get("message") or {}).get("content") or (choice.get("delta") or {}).get("content")
                 or choice.get("text") or "")
        pieces.append(str(piece))
        finish = choice.get("finish_reason") or finish
    if not events or not any(isinstance(e, dict) and e.get("choices") for e in events):
        return Answer(status, "", f"no choices in the answer: {text.strip()[:200]}")
    return Answer(status, "".join(pieces), finish_reason=finish, completion_tokens=tokens)


def _read(response: Any) -> bytes:
    received = bytearray()
    for chunk in response.chunks():
        received += chunk
    return bytes(received)


def _decode_pods(kube: KubeApi, spec: DpdSpec) -> list[str]:
    names = EndpointNames.of(spec)
    prefix = f"{names.decode_deployment}-"
    return [str(p["metadata"]["name"]) for p in kube.pods(names.namespace, f"{ROLE_LABEL}=decode")
            if str((p.get("metadata") or {}).get("name", "")).startswith(prefix)]


def _first_difference(left: str, right: str) -> int:
    for index, (a, b) in enumerate(zip(left, right, strict=False)):
        if a != b:
            return index
    return min(len(left), len(right))


def run_correctness(kube: KubeApi, spec: DpdSpec, *, twin_service: str | None = None, timeout: float = 300.0,
                    nonce: str | None = None, clock: Callable[[], float] = time.monotonic) -> Check:
    """The same greedy prompts through the DPD path (the router) and through an engine that computes the
    prefill itself; the answers must be the same text.

    The reference is the aggregated twin's router when the stack has one (``twin_service``), else a
    decode pod straight through the pod proxy on vLLM's port: without ``kv_transfer_params`` and with a
    fresh ``cache_salt`` it finds no KV cache (LMCache's receiver drops what it loaded,
    ``lmcache@0.4.3:lmcache/v1/cache_engine.py`` l.181 and l.859-863, and its PD lookup is a plain
    dictionary, ``lmcache/v1/storage_backend/pd_backend.py`` l.309-316, so the connector reports 0 hit
    tokens) and computes the whole prefill itself, as an aggregated engine does. The prompts are the
    long smoke prompt's sentences with a question after them, so the router disaggregates them.
    ``timeout`` bounds all the requests together.
    """
    transport = kube.transport
    if transport is None:
        return failed(CORRECTNESS, "no HTTP transport to the router")
    _, long = prompts(spec)
    if isinstance(long, str):
        return skipped(CORRECTNESS, long)
    try:
        pods = [] if twin_service is not None else _decode_pods(kube, spec)
    except KubeError as err:
        return failed(CORRECTNESS, f"cannot list the decode pods: {err}")
    if twin_service is None and not pods:
        return failed(CORRECTNESS, "no decode pod to compute the reference answers on")
    reference = (f"the aggregated twin ({twin_service})" if twin_service is not None
                 else "a decode pod computing the prefill itself")
    seed = nonce or secrets.token_hex(4)
    lines: list[str] = []
    deadline = clock() + timeout

    def left() -> float:
        remaining = deadline - clock()
        if remaining <= 0:
            raise KubeError(f"no answer within the {timeout:.0f}s timeout")
        return remaining

    for index, question in enumerate(QUESTIONS):
        text = f"[{seed}-c{index}] {long.text}{question}"
        try:
            dpd = answer_of(*_status_and_body(transport.post(
                OPERATOR_NAMESPACE, router_service(spec), ROUTER_PORT, spec.invocation_path,
                correctness_body(spec, text), timeout=left())))
            if twin_service is not None:
                where = twin_service
                ref = answer_of(*_status_and_body(transport.post(
                    OPERATOR_NAMESPACE, twin_service, ROUTER_PORT, spec.invocation_path,
                    correctness_body(spec, text), timeout=left())))
            else:
                where = pods[index % len(pods)]
                ref = answer_of(*_status_and_body(transport.pod_post(
                    spec.namespace, where, spec.port, spec.invocation_path,
                    correctness_body(spec, text, cache_salt=secrets.token_urlsafe(32)), timeout=left())))
        except KubeError as err:
            return failed(CORRECTNESS, f"prompt {index + 1}: {err}")
        for label, answer in (("the router", dpd), (where, ref)):
            refused = answer.refused(CORRECTNESS_TOKENS)
            if refused is not None:
                return failed(CORRECTNESS, f"prompt {index + 1}: {label} answered {refused}")
        ended = [(a.finish_reason, a.completion_tokens) for a in (dpd, ref)]
        counted = None not in (dpd.completion_tokens, ref.completion_tokens)
        if dpd.text == ref.text and (ended[0][0] != ended[1][0] or (counted and ended[0][1] != ended[1][1])):
            return failed(CORRECTNESS, (
                f"prompt {index + 1}: the same text, but the DPD path ended with finish_reason "
                f"{ended[0][0]!r} after {ended[0][1]} tokens and {where} with {ended[1][0]!r} after {ended[1][1]}"))
        # The router's line for this prompt, within the whole gate's time.
        path, problem = _routed(kube, spec, Prompt(CORRECTNESS, text, True, long.estimate), Timing(
            200, None, timeout, streamed=False))
        if problem is not None:
            return failed(CORRECTNESS, f"prompt {index + 1}: the DPD path's answer proves nothing about DPD: {problem}")
        if dpd.text != ref.text:
            at = _first_difference(dpd.text, ref.text)
            return failed(CORRECTNESS, "\n".join([
                f"prompt {index + 1} ({long.size(0)}, greedy, seed {CORRECTNESS_SEED}, {CORRECTNESS_TOKENS} "
                f"tokens): the DPD path and {reference} answer differently from character {at}:",
                f"  router: {dpd.text[:120]!r}", f"  {where}: {ref.text[:120]!r}",
                f"  likely: {WRONG_ANSWER_CAUSES.replace('<name>', spec.name)}"]))
        count = next((a.completion_tokens for a in (dpd, ref) if a.completion_tokens is not None), None)
        tokens = "" if count is None else f"{count} tokens, "
        lines.append(f"  prompt {index + 1}: {dpd.text[:60]!r} from both ({tokens}finish_reason "
                     f"{dpd.finish_reason!r}); {path}")
    return passed(CORRECTNESS, "\n".join([
        f"{len(QUESTIONS)} greedy prompts ({long.size(0)}, temperature 0, seed {CORRECTNESS_SEED}, "
        f"{CORRECTNESS_TOKENS} tokens), each disaggregated by the router: the DPD path answers as {reference} does",
        *lines]))


def _status_and_body(response: Any) -> tuple[int, bytes]:
    return int(response.status), _read(response)
