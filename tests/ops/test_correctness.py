"""verify --smoke --correctness: the DPD path's greedy answers against an engine that computes the prefill itself.

The endpoints are real HTTP servers on 127.0.0.1 (stdlib ``http.server`` threads) answering as vLLM's
OpenAI-compatible server does, so the requests and the answers' parsing are exercised end to end.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.clients.kube import KubeApi, KubeError
from hyperpod_dpd.ops.smoke import CORRECTNESS, QUESTIONS, answer_of, run_correctness
from hyperpod_dpd.spec import DpdSpec

MakeKube = Callable[..., tuple[KubeApi, Any]]
ROUTER = "dpd-test-default-routing-service"
TWIN = "dpd-test-agg-default-routing-service"
DECODER = "decode-dpd-test-5c4b-fghij"
COUNTING = "1 2 3 4 5 6 7 8 9 10 11 12 13"


class Engine:
    """One OpenAI-style endpoint: ``answer(body)`` gives the generated text; every body is recorded."""

    def __init__(self, answer: Callable[[Mapping[str, Any]], str], *, stream: bool = False,
                 status: int = 200, finish: str = "length", tokens: int = 16) -> None:
        self.answer, self.stream, self.status = answer, stream, status
        self.finish, self.tokens = finish, tokens
        self.bodies: list[dict[str, Any]] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                engine.bodies.append(body)
                if engine.status >= 400:
                    payload = json.dumps({"object": "error", "message": "no healthy upstream"}).encode()
                elif engine.stream:  # vLLM streams the finish_reason in the last chunk
                    words = engine.answer(body).split(" ")
                    payload = b"".join(b"data: " + json.dumps({"choices": [{"index": 0, "delta": {
                        "content": (" " if i else "") + w}, "finish_reason": engine.finish if i == len(words) - 1
                        else None}]}).encode() + b"\n\n" for i, w in enumerate(words))
                    payload += b"data: [DONE]\n\n"
                else:
                    payload = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": engine.answer(body)},
                         "finish_reason": engine.finish}], "usage": {"completion_tokens": engine.tokens}}).encode()
                self.send_response(engine.status)
                self.send_header("Content-Type", "text/event-stream" if engine.stream else "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status, self._body = status, body

    def chunks(self) -> Iterator[bytes]:
        yield self._body


class LocalTransport:
    """The API server's service and pod proxies, as plain HTTP to the local engines."""

    def __init__(self, services: Mapping[str, Engine], pods: Mapping[str, Engine], *,
                 disaggregate: bool = True) -> None:
        self.services, self.pods, self.disaggregate = services, pods, disaggregate
        self.calls: list[tuple[str, str, int, str]] = []
        self.log: list[str] = []  # the endpoint's router's 'Conditional routing' lines

    def post(self, namespace: str, service: str, port: int, path: str, body: Mapping[str, Any],
             *, timeout: float) -> _Response:
        self.calls.append(("service", f"{namespace}/{service}", port, path))
        if service == ROUTER:
            tokens = len(json.dumps(body["messages"])) // 4
            self.log.append(f"[INFO] Conditional routing: estimated_tokens={tokens}, threshold=4096, "
                            f"disaggregate={self.disaggregate}")
        return self._post(self.services[service], path, body, timeout)

    def pod_post(self, namespace: str, pod: str, port: int, path: str, body: Mapping[str, Any],
                 *, timeout: float) -> _Response:
        self.calls.append(("pod", f"{namespace}/{pod}", port, path))
        if pod not in self.pods:
            raise KubeError(f"POST {namespace}/{pod}:{port}/{path}: HTTP 404 Not Found")
        return self._post(self.pods[pod], path, body, timeout)

    @staticmethod
    def _post(engine: Engine, path: str, body: Mapping[str, Any], timeout: float) -> _Response:
        request = urllib.request.Request(f"{engine.url}/{path.lstrip('/')}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=min(timeout, 10.0)) as answer:
                return _Response(answer.status, answer.read())
        except urllib.error.HTTPError as err:
            return _Response(err.code, err.read())


@pytest.fixture
def engines() -> Iterator[Callable[..., Engine]]:
    made: list[Engine] = []

    def make(answer: Callable[[Mapping[str, Any]], str], **options: Any) -> Engine:
        made.append(Engine(answer, **options))
        return made[-1]

    yield make
    for engine in made:
        engine.close()


def _question(body: Mapping[str, Any]) -> int:
    content = str(body["messages"][0]["content"])
    return next(i for i, question in enumerate(QUESTIONS) if content.endswith(question))


def healthy(body: Mapping[str, Any]) -> str:
    """What two healthy engines agree on for each question."""
    return [COUNTING, "A B C D E F G H I J K L M N O P", "decode, decode, decode, decode, decode"][_question(body)]


def corrupted(body: Mapping[str, Any]) -> str:
    """A decoder that read another prompt's KV cache: fluent, HTTP 200, wrong (vllm-project/vllm#52617)."""
    return "The quick brown fox jumps over the lazy dog. The quick"


ROUTER_POD = "dpd-test-default-router-6f8d-klmno"


def _kube(make_kube: MakeKube, transport: LocalTransport) -> KubeApi:
    kube, _ = make_kube(transport=transport, logs={ROUTER_POD: transport.log})
    return kube


def test_the_twins_router_is_the_reference_when_the_stack_has_one(make_kube: MakeKube, spec: DpdSpec,
                                                                  engines: Callable[..., Engine]) -> None:
    router, twin = engines(healthy, stream=True), engines(healthy)
    transport = LocalTransport({ROUTER: router, TWIN: twin}, {})
    check = run_correctness(_kube(make_kube, transport), spec, twin_service=TWIN, nonce="feed")
    assert (check.name, check.status) == (CORRECTNESS, Status.PASS)
    assert check.detail.splitlines()[0] == (
        "3 greedy prompts (~4180-4703 tokens, temperature 0, seed 27, 16 tokens), each disaggregated by the router: "
        f"the DPD path answers as the aggregated twin ({TWIN}) does")
    assert check.detail.splitlines()[1].startswith(f"  prompt 1: {COUNTING!r} from both (16 tokens, finish_reason "
                                                   "'length'); path prefill -> decode (router: estimated_tokens=")
    assert [call[0] for call in transport.calls] == ["service"] * 6
    assert router.bodies == twin.bodies, "the same prompts, byte for byte"
    body = router.bodies[0]
    assert (body["temperature"], body["seed"], body["max_tokens"], body["stream"]) == (0, 27, 16, False)
    assert body["messages"][0]["content"].startswith("[feed-c0] The quick brown fox")
    assert body["messages"][0]["content"].count("lazy dog") == 418, "above the routing threshold"


def test_a_decoder_computing_the_prefill_itself_is_the_reference_otherwise(make_kube: MakeKube, spec: DpdSpec,
                                                                          engines: Callable[..., Engine]) -> None:
    router, decoder = engines(healthy), engines(healthy)
    transport = LocalTransport({ROUTER: router}, {DECODER: decoder})
    check = run_correctness(_kube(make_kube, transport), spec)
    assert check.status is Status.PASS
    assert check.detail.splitlines()[0].endswith("the DPD path answers as a decode pod computing the prefill "
                                                 "itself does")
    assert ("pod", f"default/{DECODER}", 8000, "v1/chat/completions") in transport.calls
    for sent in decoder.bodies:
        assert "kv_transfer_params" not in sent, "no transferred KV: the decoder computes the prefill itself"
        assert len(sent["cache_salt"]) >= 40, "its prefix cache holds the transferred blocks; the salt skips them"
    assert len({sent["cache_salt"] for sent in decoder.bodies}) == 3
    assert all("cache_salt" not in sent for sent in router.bodies)


def test_diverging_answers_fail_with_the_likely_causes(make_kube: MakeKube, spec: DpdSpec,
                                                       engines: Callable[..., Engine]) -> None:
    router, decoder = engines(corrupted), engines(healthy)
    check = run_correctness(_kube(make_kube, LocalTransport({ROUTER: router}, {DECODER: decoder})), spec)
    assert check.status is Status.FAIL
    lines = check.detail.splitlines()
    assert lines[0] == ("prompt 1 (~4180-4703 tokens, greedy, seed 27, 16 tokens): the DPD path and a decode pod "
                        "computing the prefill itself answer differently from character 0:")
    assert lines[1] == "  router: 'The quick brown fox jumps over the lazy dog. The quick'"
    assert lines[2] == f"  {DECODER}: {COUNTING!r}"
    assert "--kv-cache-dtype" in lines[3] and "--block-size" in lines[3] and "PYTHONHASHSEED" in lines[3]
    assert "kubectl rollout restart deployment/prefill-dpd-test" in lines[3]
    assert len(router.bodies) == 1, "the first wrong answer is enough"


def test_a_late_divergence_names_where(make_kube: MakeKube, spec: DpdSpec, engines: Callable[..., Engine]) -> None:
    router = engines(lambda body: healthy(body).replace("13", "14"))
    check = run_correctness(_kube(make_kube, LocalTransport({ROUTER: router, TWIN: engines(healthy)}, {})), spec,
                            twin_service=TWIN)
    assert check.status is Status.FAIL
    assert check.detail.splitlines()[0].endswith("answer differently from character 28:")


def test_an_error_from_the_reference_fails_naming_it(make_kube: MakeKube, spec: DpdSpec,
                                                     engines: Callable[..., Engine]) -> None:
    transport = LocalTransport({ROUTER: engines(healthy)}, {DECODER: engines(healthy, status=503)})
    check = run_correctness(_kube(make_kube, transport), spec)
    assert (check.status, check.detail) == (Status.FAIL, f"prompt 1: {DECODER} answered HTTP 503: no healthy "
                                                         "upstream")


def test_an_unreachable_decoder_is_a_failure_not_a_traceback(make_kube: MakeKube, spec: DpdSpec,
                                                             engines: Callable[..., Engine]) -> None:
    check = run_correctness(_kube(make_kube, LocalTransport({ROUTER: engines(healthy)}, {})), spec)
    assert (check.status, check.detail) == (
        Status.FAIL, f"prompt 1: POST default/{DECODER}:8000/v1/chat/completions: HTTP 404 Not Found")


def test_answers_are_read_unstreamed_streamed_or_not_at_all() -> None:
    assert answer_of(200, json.dumps({"choices": [{"text": "1 2 3"}]}).encode()).text == "1 2 3"
    streamed = b'data: {"choices":[{"delta":{"content":"1"}}]}\n\ndata: {"choices":[{"delta":{"content":" 2"}}]}\n\n'
    assert answer_of(200, streamed + b"data: [DONE]\n\n").text == "1 2"
    assert answer_of(200, b"<html>bad gateway</html>").error == "not an OpenAI-style answer: <html>bad gateway</html>"
    assert answer_of(200, b'{"object": "list"}').error.startswith("no choices in the answer")


def test_the_requests_share_one_time_budget(make_kube: MakeKube, spec: DpdSpec,
                                            engines: Callable[..., Engine]) -> None:
    """Each request may take what is left of the timeout, and none is sent once it is spent."""
    now = [0.0]

    def clock() -> float:
        now[0] += 4.0
        return now[0]

    router = engines(healthy)
    check = run_correctness(_kube(make_kube, LocalTransport({ROUTER: router, TWIN: engines(healthy)}, {})), spec,
                            twin_service=TWIN, timeout=10.0, clock=clock)
    assert (check.status, check.detail) == (Status.FAIL, "prompt 2: no answer within the 10s timeout")
    assert len(router.bodies) == 1


@pytest.mark.parametrize("case", [
    ("router", {"answer": lambda body: ""}, "HTTP 200 with no content"),
    ("twin", {"answer": lambda body: ""}, "HTTP 200 with no content"),
    ("router", {"finish": "error"}, "finish_reason 'error'"),
    ("twin", {"finish": "stop", "tokens": 1, "answer": lambda body: "1"}, "stopped after 1 of the 16 tokens"),
])
def test_empty_one_token_and_error_answers_are_refused_on_either_side(
        make_kube: MakeKube, spec: DpdSpec, engines: Callable[..., Engine],
        case: tuple[str, dict[str, Any], str]) -> None:
    """O7 and peers' 'HTTP 200 with finish_reason error': two empty or two one-token answers agree on nothing."""
    side, options, why = case
    both = dict(options) if side == "twin" else {}
    router_options = dict(options) if side == "router" else {}
    if side == "router" and "answer" not in router_options and "answer" not in both:
        router_options.setdefault("answer", healthy)
    router = engines(router_options.pop("answer", healthy), **router_options)
    twin = engines(both.pop("answer", healthy), **both)
    check = run_correctness(_kube(make_kube, LocalTransport({ROUTER: router, TWIN: twin}, {})), spec,
                            twin_service=TWIN)
    assert check.status is Status.FAIL
    assert why in check.detail and ("the router answered" if side == "router" else f"{TWIN} answered") in check.detail


def test_both_empty_is_not_the_same_answer(make_kube: MakeKube, spec: DpdSpec,
                                           engines: Callable[..., Engine]) -> None:
    """The audit's C4: both paths answer ''. Before, the gate passed with "'' from both"."""
    router, twin = engines(lambda body: ""), engines(lambda body: "")
    check = run_correctness(_kube(make_kube, LocalTransport({ROUTER: router, TWIN: twin}, {})), spec,
                            twin_service=TWIN)
    assert (check.status, check.detail) == (Status.FAIL, "prompt 1: the router answered HTTP 200 with no content "
                                                         "(finish_reason 'length')")


def test_a_router_that_never_disaggregates_fails_the_correctness_gate(make_kube: MakeKube, spec: DpdSpec,
                                                                      engines: Callable[..., Engine]) -> None:
    """O9: the same answers prove nothing about DPD when the router sent the prompts straight to the decoder."""
    transport = LocalTransport({ROUTER: engines(healthy), TWIN: engines(healthy)}, {}, disaggregate=False)
    check = run_correctness(_kube(make_kube, transport), spec, twin_service=TWIN)
    assert check.status is Status.FAIL
    assert check.detail.startswith("prompt 1: the DPD path's answer proves nothing about DPD: path decode only")
