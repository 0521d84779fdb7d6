"""verify --smoke: prompts sized from the threshold, time to first token, and the router's path."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.contracts.router import MARGIN, sentence_length
from hyperpod_dpd.ops.smoke import FOX, INPUTS, LONG, SHORT, prompts, request_body, run_smoke
from hyperpod_dpd.spec import DpdSpec, RoutingSpec
from hyperpod_dpd.spec.defaults import default_spec

MakeKube = Callable[..., tuple[KubeApi, Any]]
ROUTER_POD = "dpd-test-default-router-6f8d-klmno"
_DEFAULT = default_spec()


def _with_threshold(spec: DpdSpec, threshold: int) -> DpdSpec:
    return dataclasses.replace(spec, routing=RoutingSpec(threshold=threshold))


def _router_counts(text: str) -> tuple[int, int]:
    """What the router may estimate for ``text``: its Llama 3 token count (10 per sentence, measured) or
    characters / 4."""
    return text.count(FOX) * 10, len(text) // 4


def test_long_prompt_clears_the_threshold_under_both_counting_rules(spec: DpdSpec) -> None:
    short, long = prompts(spec)
    assert not isinstance(long, str)
    assert long.text.startswith(FOX) and long.expect_disaggregate
    assert all(count >= 4096 * (1 + MARGIN) for count in _router_counts(long.text))
    assert long.estimate == (4180, 4703) and long.text.count(FOX) == 418  # the fewest sentences that clear it
    assert long.size(4096) == ("~4180-4703 tokens by the router's count (tokens or characters / 4), at least 84 "
                               "(2.1%) above routing.threshold 4096")
    # The short prompt stays below it either way: 14 Llama 3 tokens, 51 characters.
    assert short.estimate == (12, 14) and max(short.estimate) < 4096 and not short.expect_disaggregate


def test_smoke_and_bench_size_prompts_with_one_rule(spec: DpdSpec) -> None:
    from hyperpod_dpd.benchmark.run.route import default_isl, prompt_length

    _, long = prompts(spec)
    assert not isinstance(long, str)
    assert long.text.count(FOX) == sentence_length().units_to_clear(4096)
    assert default_isl(4096) >= prompt_length().units_to_clear(4096)
    assert sentence_length().estimates(600) == (6000, 6750)  # AWS's 600-sentence prompt was logged at 6750


def test_threshold_zero_expects_every_prompt_disaggregated(spec: DpdSpec) -> None:
    short, long = prompts(_with_threshold(spec, 0))
    assert short.expect_disaggregate
    assert not isinstance(long, str) and long.text.count(FOX) == 20 and long.estimate[0] >= 200


def test_a_threshold_near_max_model_len_fits_or_skips_the_long_prompt(spec: DpdSpec) -> None:
    _, fits = prompts(_with_threshold(spec, 13000))
    assert not isinstance(fits, str) and fits.text.count(FOX) * 12 <= 16384 - 80
    _, none = prompts(_with_threshold(spec, 14000))
    assert none == ("routing.threshold 14000 needs a prompt of about 14280 tokens to clear it by 2%, more than "
                    "max_model_len 16384 leaves room for")


def test_request_body_is_a_streamed_chat_completion_for_the_mounted_model(spec: DpdSpec) -> None:
    body = request_body(spec, "hi")
    assert body == {"model": "/opt/ml/model", "max_tokens": 16, "stream": True, "temperature": 0,
                    "messages": [{"role": "user", "content": "hi"}]}
    completions = request_body(dataclasses.replace(spec, invocation_path="v1/completions"), "hi")
    assert completions["prompt"] == "hi" and "messages" not in completions


class Ticking:
    """A clock that moves one second per chunk the router streams."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def stream(self, pieces: list[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            self.now += 1.0
            yield piece


@dataclasses.dataclass
class _Ticked:
    status: int
    pieces: list[bytes]
    ticking: Ticking

    def chunks(self) -> Iterator[bytes]:
        return self.ticking.stream(self.pieces)


@pytest.fixture
def ticking() -> Ticking:
    return Ticking()


def _router(fakes: Any, ticking: Ticking, *, status: int = 200, body: bytes | None = None,
            threshold: int = 4096) -> Any:
    def respond(request: Mapping[str, Any]) -> Any:
        pieces = [body] if body is not None else fakes.sse("Blue", ".").pieces
        return _Ticked(status, pieces, ticking)

    return fakes.FakeTransport(respond=respond, log=["[INFO] router started"], threshold=threshold)


def test_short_goes_to_the_decoder_and_long_is_disaggregated(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                             ticking: Ticking) -> None:
    transport = _router(fakes, ticking)
    kube, core = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    short, long, _ = run_smoke(kube, spec, clock=ticking)
    assert (short.name, short.status) == (SHORT, Status.PASS)
    assert short.detail.splitlines()[0] == "~12-14 tokens: HTTP 200, time to first token 2.00s, total 4.00s"
    assert long.detail.splitlines()[0].startswith(
        "~4180-4703 tokens by the router's count (tokens or characters / 4), at least 84 (2.1%) above "
        "routing.threshold 4096: HTTP 200")
    assert short.detail.splitlines()[1].startswith("path decode only (router: estimated_tokens=")
    assert short.detail.endswith("threshold=4096, disaggregate=False)")
    assert (long.name, long.status) == (LONG, Status.PASS)
    assert long.detail.splitlines()[1].startswith("path prefill -> decode (router: estimated_tokens=")
    assert long.detail.splitlines()[1].endswith(
        "disaggregate=True); 1 long prompt(s) sent, every decoder received its KV cache (at least 90% of its prompt "
        "tokens):")
    assert long.detail.splitlines()[2] == ("  decode-dpd-test-5c4b-fghij: 6,120 of 6,121 prompt tokens from the KV "
                                           "connector (100.0%)")
    assert ("proxy", "default", "decode-dpd-test-5c4b-fghij:8000", "metrics") in core.calls
    namespace, service, port, path, body = transport.requests[1]
    assert (namespace, service, port, path) == ("hyperpod-inference-system", "dpd-test-default-routing-service",
                                                443, "v1/chat/completions")
    assert body["messages"][0]["content"].count("lazy dog") == 418
    assert ("log", "hyperpod-inference-system", ROUTER_POD, "router-container") in core.calls


def test_http_error_fails_with_the_status_and_message(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                      ticking: Ticking) -> None:
    transport = _router(fakes, ticking, status=503, body=json.dumps({"message": "no healthy upstream"}).encode())
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    short, long, _ = run_smoke(kube, spec, clock=ticking)
    assert (short.status, short.detail) == (
        Status.FAIL, "~12-14 tokens: HTTP 503 (the model may still be loading: wait for DeploymentComplete): "
                     "no healthy upstream")
    assert long.status is Status.FAIL


def test_long_prompt_not_disaggregated_fails_with_the_fix(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                          ticking: Ticking) -> None:
    transport = _router(fakes, ticking, threshold=100_000)  # the router counts far fewer tokens than we do
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    short, long, _ = run_smoke(kube, spec, clock=ticking)
    assert short.status is Status.PASS
    assert long.status is Status.FAIL
    assert long.detail.endswith("expected prefill -> decode: the router's tokenizer may count fewer tokens: "
                                "lower routing.threshold")


def test_unstreamed_answer_reports_total_latency_only(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                      ticking: Ticking) -> None:
    answer = json.dumps({"choices": [{"message": {"content": "Blue"}}]}).encode()
    transport = _router(fakes, ticking, body=answer)
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    short, _, _ = run_smoke(kube, spec, clock=ticking)
    assert short.detail.splitlines()[0] == ("~12-14 tokens: HTTP 200, total 1.00s (no streamed token seen: time to "
                                            "first token unknown)")


def test_unreadable_router_log_leaves_the_path_unknown(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                       ticking: Ticking) -> None:
    transport = _router(fakes, ticking)
    kube, _ = make_kube(transport=transport, logs={})
    short, _, _ = run_smoke(kube, spec, clock=ticking)
    assert short.status is Status.PASS
    assert short.detail.splitlines()[1].startswith(
        "path unknown (router log unreadable: logs hyperpod-inference-system/dpd-test-default-router-6f8d-klmno "
        "-c router-container: HTTP 404 Not Found")
    assert short.detail.endswith("expected decode only")


def test_proxy_failure_is_a_failed_prompt(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    from hyperpod_dpd.clients.kube import KubeError

    def refuse(request: Mapping[str, Any]) -> Any:
        raise KubeError("POST dpd-test-default-routing-service:443/v1/chat/completions: forbidden (403)")

    kube, _ = make_kube(transport=fakes.FakeTransport(respond=refuse, log=[]))
    short, _, _ = run_smoke(kube, spec)
    assert (short.status, short.detail) == (
        Status.FAIL, "~12-14 tokens: POST dpd-test-default-routing-service:443/v1/chat/completions: forbidden (403)")


@given(threshold=st.integers(min_value=0, max_value=20_000),
       max_model_len=st.integers(min_value=1024, max_value=131_072))
@settings(max_examples=200, deadline=None)
def test_the_long_prompt_always_crosses_the_threshold_and_fits(threshold: int, max_model_len: int) -> None:
    spec = dataclasses.replace(_DEFAULT, routing=RoutingSpec(threshold=threshold), max_model_len=max_model_len)
    short, long = prompts(spec)
    assert short.expect_disaggregate == (threshold == 0)
    if threshold:
        assert max(short.estimate) < threshold or threshold <= 14
    if isinstance(long, str):
        needed = max(sentence_length().units_to_clear(threshold), 20)
        assert needed * 12 > max_model_len - 16 - 64 and "needs a prompt of about" in long
    else:
        repeats = long.text.count(FOX)
        assert all(count >= threshold * (1 + MARGIN) for count in _router_counts(long.text))
        assert repeats * 12 <= max_model_len - 16
        assert min(_router_counts(long.text)) <= long.estimated_tokens <= max(_router_counts(long.text)) + 1


def test_the_routing_line_is_matched_by_size_across_router_replicas(make_kube: MakeKube, spec: DpdSpec,
                                                                    fakes: Any) -> None:
    from hyperpod_dpd.ops.smoke import RoutingDecision, routing_decision

    line = "[INFO] Conditional routing: estimated_tokens={}, threshold=4096, disaggregate={}"
    answers = fakes.healthy_cluster() | {("pods", "hyperpod-inference-system", ""): fakes.pod_list(
        fakes.pod("dpd-test-default-router-a", "hyperpod-inference-system", None, 2, total=2),
        fakes.pod("dpd-test-default-router-b", "hyperpod-inference-system", None, 2, total=2))}
    logs = {"dpd-test-default-router-a": [line.format(6750, True), line.format(12, False)],
            "dpd-test-default-router-b": [line.format(6400, True)]}
    kube, _ = make_kube(answers, logs=logs)
    assert routing_decision(kube, spec, 60, expected_tokens=14) == RoutingDecision(12, 4096, False)
    assert routing_decision(kube, spec, 60, expected_tokens=6149) == RoutingDecision(6400, 4096, True)
    kube, _ = make_kube(answers, logs={"dpd-test-default-router-a": ["[INFO] started"],
                                       "dpd-test-default-router-b": []})
    assert routing_decision(kube, spec, 60, expected_tokens=14) == "no 'Conditional routing' line in the router log"


def test_disaggregated_without_kv_transfer_fails_with_the_causes(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                                 ticking: Ticking) -> None:
    """The router disaggregated, but the decoder's external_kv_transfer counter did not move: a FAIL."""
    transport = _router(fakes, ticking)
    stuck = {fakes.DECODE_METRICS: [fakes.vllm_metrics(5000.0, local_compute=14), fakes.vllm_metrics(
        5000.0, local_compute=6300)], fakes.PREFILL_METRICS: [fakes.prefill_metrics()]}
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log}, metrics=stuck)
    short, long, _ = run_smoke(kube, spec, clock=ticking)
    assert short.status is Status.PASS
    assert long.status is Status.FAIL
    assert "disaggregate=True); 4 long prompt(s) sent, but not every decoder received its KV cache:\n" \
           "  decode-dpd-test-5c4b-fghij received no KV cache: it computed all 6,286 prompt tokens itself " \
           "(external_kv_transfer unchanged)\n  likely: kv_cache.hash_seed" in long.detail
    assert "kubectl rollout restart deployment/decode-dpd-test" in long.detail


def test_long_prompt_with_unknown_path_fails(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                             ticking: Ticking) -> None:
    """Nothing proves the long prompt was disaggregated when the router's log is unreadable."""
    kube, _ = make_kube(transport=_router(fakes, ticking), logs={})
    _, long, _ = run_smoke(kube, spec, clock=ticking)
    assert long.status is Status.FAIL
    assert long.detail.endswith("expected prefill -> decode, which only the router's log can confirm")


def test_a_decoder_without_the_counter_fails_before_sending(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                           ticking: Ticking) -> None:
    transport = _router(fakes, ticking)
    no_stats = {fakes.DECODE_METRICS: ["# vLLM started with --disable-log-stats\n"],
                fakes.PREFILL_METRICS: [fakes.prefill_metrics()]}
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log}, metrics=no_stats)
    _, long, inputs = run_smoke(kube, spec, clock=ticking)
    assert long.status is Status.FAIL
    assert "exports no vllm:prompt_tokens_by_source_total" in long.detail and "--disable-log-stats" in long.detail
    assert inputs.status is Status.FAIL and inputs.detail.startswith(
        "the alerts cannot see: vllm:num_requests_running on decode-dpd-test-5c4b-fghij; ")
    assert len(transport.requests) == 1, "the long prompt is not sent when its result cannot be judged"


def test_the_long_prompt_carries_a_fresh_nonce(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                               ticking: Ticking) -> None:
    transport = _router(fakes, ticking)
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    run_smoke(kube, spec, clock=ticking, nonce="c0ffee42")
    assert transport.requests[1][4]["messages"][0]["content"].startswith("[c0ffee42] " + FOX)


def test_counters_read_through_the_api_server(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    from hyperpod_dpd.ops.dpd_counters import EndpointNames, read_counters, sample_value

    line = "[INFO] Conditional routing: estimated_tokens={}, threshold=4096, disaggregate={}"
    kube, _ = make_kube(logs={ROUTER_POD: [line.format(6750, True), line.format(12, False), line.format(9000, True)]},
                        metrics={fakes.DECODE_METRICS: [fakes.vllm_metrics(100.0)]})
    counters = read_counters(kube, EndpointNames.of(spec), since_seconds=60)
    assert (counters.disaggregated_requests, counters.external_kv_tokens, counters.decode_pods) == (2, 100.0, 1)
    (pod,) = counters.external_kv_by_pod
    later = dataclasses.replace(counters, disaggregated_requests=3, external_kv_by_pod={pod: 6850.0})
    assert later.since(counters).disaggregated_requests == 1 and later.since(counters).external_kv_tokens == 6750
    assert sample_value(fakes.vllm_metrics(1.0), "vllm:prompt_tokens_by_source_total", {"source": "nope"}) is None


def test_counters_change_is_taken_per_pod_so_a_restart_hides_no_growth() -> None:
    from hyperpod_dpd.ops.dpd_counters import DpdCounters

    before = DpdCounters(disaggregated_requests=0, external_kv_by_pod={"decode-a": 50_000.0, "decode-b": 1_000.0})
    # decode-a restarted (its counter is back near zero) while decode-b received a 4,180-token prompt; a new
    # decode-c took 300. Summed first, 4,180 + 300 + 200 - 51,000 would be a drop and read as nothing.
    after = DpdCounters(disaggregated_requests=2,
                        external_kv_by_pod={"decode-a": 200.0, "decode-b": 5_180.0, "decode-c": 300.0})
    change = after.since(before)
    assert dict(change.external_kv_by_pod) == {"decode-a": 200.0, "decode-b": 4_180.0, "decode-c": 300.0}
    assert change.external_kv_tokens == 4_680.0 and change.decode_pods == 3


def test_alert_inputs_pass_when_every_series_is_served(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                       ticking: Ticking) -> None:
    transport = _router(fakes, ticking)
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    *_, inputs = run_smoke(kube, spec, clock=ticking)
    assert (inputs.name, inputs.status) == (INPUTS, Status.PASS)
    assert inputs.detail == "every vLLM series the alerts read is on prefill and decode /metrics"


def test_lmcache_metrics_not_exported_is_reported_not_failed(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                             ticking: Ticking) -> None:
    """Audit O1: whether the image shares LMCache's registry is unverified; verify says what is blind."""
    transport = _router(fakes, ticking)
    metrics = {**fakes.transferring_decoder(), fakes.PREFILL_METRICS: [fakes.prefill_metrics(lmcache=False)]}
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log}, metrics=metrics)
    *_, inputs = run_smoke(kube, spec, clock=ticking)
    assert inputs.status is Status.PASS
    assert inputs.detail.endswith("not exported (DpdKvTransferSlow cannot fire; DpdKvStoreMetricsAbsent and the "
                                  "KvTransferBelow1GBps log alarm stand in): lmcache:store_put_time on "
                                  "prefill-dpd-test-7d9f-abcde")


def test_the_shared_rule_refuses_a_prompt_one_sentence_short_and_the_data_is_consistent() -> None:
    import json
    from importlib import resources

    from hyperpod_dpd.contracts.router import clears, stays_below

    length = sentence_length()
    needed = length.units_to_clear(4096)
    assert clears(length.estimates(needed)[0], 4096) and not clears(length.estimates(needed - 1)[0], 4096)
    below = length.most_units_below(4096)
    assert stays_below(length.estimates(below)[1], 4096) and not stays_below(length.estimates(below + 1)[1], 4096)
    data = json.loads(resources.files("hyperpod_dpd.data").joinpath("smoke_sentence_length.json").read_text())
    assert data["sentence"] == FOX
    measured = {int(k): v for k, v in data["measured_tokens"].items()}
    assert measured[600] - measured[1] == 599 * data["tokens_per_repetition"]


def test_the_alerts_page_quotes_the_gates_sizing_as_it_is(spec: DpdSpec) -> None:
    from pathlib import Path

    page = " ".join((Path(__file__).parents[2] / "docs" / "alerts.md").read_text(encoding="utf-8").split())
    _, long = prompts(spec)
    assert not isinstance(long, str)
    assert f"`{long.size(4096)}`" in page
    low, high = long.estimate
    assert f"it is {long.text.count(FOX)} sentences, estimated at {low:,}-{high:,} tokens" in page


# --- the gate per decoder (audit T4-10) ------------------------------------------------------------

DECODER_B = "decode-dpd-test-5c4b-vwxyz"


def _two_decoders(fakes: Any) -> dict[tuple[str, ...], Any]:
    return fakes.healthy_cluster() | {("pods", "default", fakes.DECODE_SELECTOR): fakes.pod_list(
        fakes.pod("decode-dpd-test-5c4b-fghij", "default", "decode", 3),
        fakes.pod(DECODER_B, "default", "decode", 3))}


def _gate(make_kube: MakeKube, spec: DpdSpec, fakes: Any, ticking: Ticking, decoders: dict[str, list[str]], *,
          answers: dict[tuple[str, ...], Any] | None = None) -> tuple[Any, Any]:
    transport = _router(fakes, ticking)
    kube, _ = make_kube(answers, transport=transport, logs={ROUTER_POD: transport.log},
                        metrics={**decoders, fakes.PREFILL_METRICS: [fakes.prefill_metrics()]})
    _, long, _ = run_smoke(kube, spec, clock=ticking)
    return long, transport


def test_two_decoders_both_receiving_pass_with_each_ones_share(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                              ticking: Ticking) -> None:
    """The router sends the first long prompt to one decoder and the second to the other: two prompts suffice."""
    a, b = fakes.vllm_metrics, fakes.vllm_metrics
    decoders = {fakes.DECODE_METRICS: [a(0.0), a(4179.0, local_compute=15.0)],
                f"{DECODER_B}:8000": [b(0.0), b(0.0), b(4179.0, local_compute=15.0)]}
    long, transport = _gate(make_kube, spec, fakes, ticking, decoders, answers=_two_decoders(fakes))
    assert long.status is Status.PASS
    assert long.detail.splitlines()[1].endswith("; 2 long prompt(s) sent, every decoder received its KV cache "
                                                "(at least 90% of its prompt tokens):")
    assert long.detail.splitlines()[2:] == [
        "  decode-dpd-test-5c4b-fghij: 4,179 of 4,180 prompt tokens from the KV connector (100.0%)",
        "  decode-dpd-test-5c4b-vwxyz: 4,179 of 4,180 prompt tokens from the KV connector (100.0%)"]
    first, second = (body["messages"][0]["content"] for *_, body in transport.requests[1:])
    assert first.startswith("[") and first != second, "each long prompt has its own nonce"


def test_one_of_two_decoders_not_receiving_fails_naming_it(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                          ticking: Ticking) -> None:
    """Audit probe P1: the sum over decoders rose, but decoder B computed its prompts itself."""
    a, b = fakes.vllm_metrics, fakes.vllm_metrics
    decoders = {fakes.DECODE_METRICS: [a(0.0), a(4179.0, local_compute=15.0)],
                f"{DECODER_B}:8000": [b(0.0), b(0.0), b(0.0, local_compute=4194.0)]}
    long, transport = _gate(make_kube, spec, fakes, ticking, decoders, answers=_two_decoders(fakes))
    assert long.status is Status.FAIL
    assert len(transport.requests) == 1 + 6, "at most 2 x decoders + 2 long prompts"
    lines = long.detail.splitlines()
    assert lines[1].endswith("; 6 long prompt(s) sent, but not every decoder received its KV cache:")
    assert lines[2] == ("  decode-dpd-test-5c4b-vwxyz received no KV cache: it computed all 4,180 prompt tokens "
                        "itself (external_kv_transfer unchanged)")
    assert lines[3].startswith("  ok decode-dpd-test-5c4b-fghij: 4,179 of 4,180")
    assert lines[4].startswith("  likely: kv_cache.hash_seed (PYTHONHASHSEED)")


def test_a_decoder_the_router_never_used_fails(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                              ticking: Ticking) -> None:
    a = fakes.vllm_metrics
    decoders = {fakes.DECODE_METRICS: [a(0.0), a(4179.0, local_compute=15.0)], f"{DECODER_B}:8000": [a(0.0)]}
    long, _ = _gate(make_kube, spec, fakes, ticking, decoders, answers=_two_decoders(fakes))
    assert long.status is Status.FAIL
    assert "  decode-dpd-test-5c4b-vwxyz served none of the 6 long prompt(s)\n" in long.detail
    assert "the router sent it none of the long prompts" in long.detail


def test_a_fraction_of_the_prompt_transferred_fails_with_the_numbers(make_kube: MakeKube, spec: DpdSpec,
                                                                     fakes: Any, ticking: Ticking) -> None:
    """Audit probe P3: 255 of about 4,180 prompt tokens arrive; the counter rose, but that is no transfer."""
    a = fakes.vllm_metrics
    decoders = {fakes.DECODE_METRICS: [a(0.0), a(255.0, local_compute=14.0 + 3925.0)]}
    long, _ = _gate(make_kube, spec, fakes, ticking, decoders)
    assert long.status is Status.FAIL
    assert ("  decode-dpd-test-5c4b-fghij received 255 of 4,180 prompt tokens from the KV connector (6.1%, below "
            "90%)") in long.detail.splitlines()
    assert "'Retrieved N out of M required tokens'" in long.detail


def test_a_decoder_restart_between_the_reads_passes_with_a_note(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                               ticking: Ticking) -> None:
    """Audit probe P2: the counters reset; the values since the restart are the delta, not a drop."""
    a = fakes.vllm_metrics
    decoders = {fakes.DECODE_METRICS: [a(90_000.0, local_compute=500.0), a(4179.0, local_compute=1.0)]}
    long, _ = _gate(make_kube, spec, fakes, ticking, decoders)
    assert long.status is Status.PASS
    assert long.detail.splitlines()[2] == (
        "  decode-dpd-test-5c4b-fghij: 4,179 of 4,180 prompt tokens from the KV connector (100.0%) (its counters "
        "went down: vLLM restarted between the readings, so the values since the restart are used)")


def test_a_decoder_replaced_between_the_reads_counts_from_zero(fakes: Any) -> None:
    from hyperpod_dpd.ops.dpd_counters import DecoderCounts, PodDelta, pod_deltas

    old = {"decode-a": DecoderCounts(external_kv_tokens=10.0, prompt_tokens=20.0)}
    new = {"decode-b": DecoderCounts(external_kv_tokens=4179.0, prompt_tokens=4180.0)}
    assert pod_deltas(old, new) == {"decode-b": PodDelta(pod="decode-b", external_kv_tokens=4179.0,
                                                         prompt_tokens=4180.0, note="new since the first reading")}


def test_the_long_prompts_stop_at_the_time_budget(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                                  ticking: Ticking) -> None:
    """Each send takes 4 s on the ticking clock; a 9 s budget stops the loop long before 6 prompts."""
    a = fakes.vllm_metrics
    decoders = {fakes.DECODE_METRICS: [a(0.0), a(4179.0, local_compute=15.0)], f"{DECODER_B}:8000": [a(0.0)]}
    transport = _router(fakes, ticking)
    kube, _ = make_kube(_two_decoders(fakes), transport=transport, logs={ROUTER_POD: transport.log},
                        metrics={**decoders, fakes.PREFILL_METRICS: [fakes.prefill_metrics()]})
    _, long, _ = run_smoke(kube, spec, clock=ticking, timeout=9.0)
    assert long.status is Status.FAIL
    assert len(transport.requests) == 1 + 3


@pytest.mark.parametrize("answer", ["error", "empty"])
def test_http_200_carrying_an_error_or_nothing_fails_the_smoke_prompts(make_kube: MakeKube, spec: DpdSpec,
                                                                       fakes: Any, ticking: Ticking,
                                                                       answer: str) -> None:
    """Peers' autumn reports: HTTP 200 with finish_reason "error" and no content is a failure, not an answer."""
    def respond(body: Any) -> Any:
        return fakes.sse("", finish="error") if answer == "error" else fakes.sse("", finish="stop")

    transport = fakes.FakeTransport(respond=respond, log=[])
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    short, long, *_ = run_smoke(kube, spec, clock=ticking)
    why = "finish_reason 'error'" if answer == "error" else "HTTP 200 with no content"
    for row in (short, long):
        assert row.status is Status.FAIL and why in row.detail, row.detail


def _with_prompt_lengths(text: str, *, long: int, short: int) -> str:
    """vLLM 0.19.0's prompt-length histogram (1-2-5 buckets) beside the counters: ``long`` requests above 2,000."""
    labels = 'engine="0",model_name="/opt/ml/model"'
    return text + "\n".join([
        "# TYPE vllm:request_prompt_tokens histogram",
        f'vllm:request_prompt_tokens_bucket{{{labels},le="2000.0"}} {short}.0',
        f'vllm:request_prompt_tokens_bucket{{{labels},le="5000.0"}} {short + long}.0',
        f'vllm:request_prompt_tokens_bucket{{{labels},le="+Inf"}} {short + long}.0',
        f"vllm:request_prompt_tokens_count{{{labels}}} {short + long}.0", ""])


@pytest.mark.parametrize("case", [(4179.0, Status.PASS), (2000.0, Status.FAIL)])
def test_the_kv_gate_judges_its_own_prompts_not_the_pods_other_traffic(
        make_kube: MakeKube, spec: DpdSpec, fakes: Any, ticking: Ticking, case: tuple[float, Status]) -> None:
    """O8 (the audit's G5): while the gate's long prompt (4,180 tokens) is served, 30 short prompts of other clients
    add 6,000 locally computed tokens on the decoder. Before, the gate judged 4,179 of 10,194 prompt tokens (41%)
    and failed a healthy endpoint; it now judges what its own long prompt needed. The failing twin: half arrives."""
    received, status = case
    before = _with_prompt_lengths(fakes.vllm_metrics(0.0), long=0, short=0)
    after = _with_prompt_lengths(fakes.vllm_metrics(received, local_compute=14.0 + 4180 - received + 6000),
                                 long=1, short=30)
    transport = _router(fakes, ticking)
    metrics = {fakes.DECODE_METRICS: [before, after], fakes.PREFILL_METRICS: [fakes.prefill_metrics()]}
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log}, metrics=metrics)
    _, long, *_ = run_smoke(kube, spec, clock=ticking)
    assert long.status is status, long.detail
    assert f"{received:,.0f} of 4,180 prompt tokens" in long.detail
