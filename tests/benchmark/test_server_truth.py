"""The servers' counters as the truth: the twin's TTFT bounded by its own clock, other clients' traffic on a shared
endpoint, and the router's own length estimate behind a level that stayed local.

Each test runs the real ``bench`` CLI against a recorded cluster whose Jobs replay a run of the rendered
benchmark container against the stub (tests/benchmark/fake_openai.py), which records the truth: every TTFT by
its own clock, every request it served, every estimate its router made. Each asserts bench's number next to it.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import fmean, median_low
from types import ModuleType
from typing import Any

import pytest
from kubernetes.client import ApiClient
from support import FakeClock, write_spec

from hyperpod_dpd.benchmark.proof.disaggregation import LevelDisaggregation, RouterEstimates, disaggregation_warnings
from hyperpod_dpd.benchmark.proof.overhead import overhead_warnings, twin_ttft
from hyperpod_dpd.benchmark.proof.traffic import other_traffic_warnings
from hyperpod_dpd.benchmark.proof.trust import Trust
from hyperpod_dpd.benchmark.run.aiperf_results import parse_aiperf
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.run.results import collect
from hyperpod_dpd.benchmark.run.route import RoutePath, isl_for_model
from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.contracts.router import clears
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.observability.metrics import TTFT

RUN = "20261201-0300"
TRAFFIC = ("--run-id", RUN, "--concurrency", "2,4", "--isl", "64", "--osl", "16", "--requests", "8",
           "--max-seconds", "60", "--client", "genai-bench", "--no-upload")
ROUTERS = "hyperpod-inference-system"


@pytest.fixture
def spec(tmp_path: Path) -> str:
    """The default spec with the stub router's threshold (32), so D(64,16) is a DPD scenario."""
    return write_spec(tmp_path, ("threshold: 4096", "threshold: 32"))


@dataclass
class Jobs:
    """FakeBatch for several Jobs at once: each Job's reads walk its own states (the last one repeats)."""

    states: Mapping[str, list[dict[str, Any]]]
    created: list[tuple[str, Any]] = field(default_factory=list)
    deleted: list[tuple[str, str, str]] = field(default_factory=list)
    reads: dict[str, int] = field(default_factory=dict)

    def create_namespaced_job(self, namespace: str, body: Any) -> Any:
        self.created.append((namespace, body))
        return body

    def read_namespaced_job(self, name: str, namespace: str) -> Any:
        states = self.states[name]
        answer = states[min(self.reads.get(name, 0), len(states) - 1)]
        self.reads[name] = self.reads.get(name, 0) + 1
        return ApiClient().deserialize(json.dumps(answer), "V1Job", "application/json")

    def delete_namespaced_job(self, name: str, namespace: str, *, propagation_policy: str) -> Any:
        self.deleted.append((namespace, name, propagation_policy))


def _no_router_ttft(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith(("dpd_e2e_ttft", "# TYPE dpd_e2e")))


def _no_engine_ttft(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if "time_to_first_token" not in line)


def ab_cluster(fakes: ModuleType, dpd: Any, twin: Any | None = None, *,
               twin_router: Callable[[str], str] = _no_router_ttft, twin_engine: Callable[[str], str] = str,
               no_selector: tuple[str, ...] = (), twin_router_pod: bool = True, twin_restarting: bool = False,
               custom: Any = None) -> Any:
    """A recorded cluster where the DPD Job replays ``dpd`` and the twin's Job ``twin``: each endpoint's router and
    engine pods answer /metrics with their own run's counters of the window their Job's log is in (the twin's
    router through ``twin_router``, by default one without a TTFT histogram, its engine through ``twin_engine``), and
    the DPD router's log holds the stub router's routing lines. ``twin_router_pod`` False: the twin has no router
    pod (the operator makes one only with a pdSpec); ``twin_restarting``: its engine container restarts between
    every two reads of its pods."""
    names = {"dpd": f"bench-dpd-test-{RUN}", "agg": f"bench-dpd-test-agg-{RUN}"}
    runs = {"dpd": dpd, "agg": twin if twin is not None else dpd}
    replays = {key: fakes.replay(runs[key], names[key]) for key in names}
    job_pods = {f"default|job-name={name}": [fakes.pod(f"{name}-x", init=[fakes.container("benchmark", "terminated")],
                                                       main=[fakes.container("publish", "terminated")])]
                for name in names.values()}
    endpoints = fakes.router_and_decoder()
    twin_pods = fakes.twin_pods()
    engines = f"default|{fakes.twin_selector()}"
    other = {**endpoints, **job_pods, engines: twin_pods[engines],
             f"{ROUTERS}|": endpoints[f"{ROUTERS}|"] + (twin_pods[f"{ROUTERS}|"] if twin_router_pod else [])}
    if twin_restarting:
        other = Restarting(other, key=engines, pod=lambda n: fakes.deployment_pod("dpd-test-agg-6b8-eng", "default",
                                                                                  container="vllm", restarts=n))

    class Core(fakes.FakeCore):  # type: ignore[misc,name-defined]
        def read_namespaced_pod_log(self, name: str, namespace: str, *, container: str,
                                    since_seconds: int | None = None, limit_bytes: int | None = None) -> Any:
            self.log_reads.append(container)
            if container == "router-container":
                return dpd.router_log if name.startswith("dpd-test-default-") else runs["agg"].router_log
            job = replays["agg" if name.startswith(names["agg"]) else "dpd"]
            return job.benchmark_log() if container == "benchmark" else job.publish

    def metrics(namespace: str, pod_port: str) -> str:
        key = "agg" if pod_port.startswith("dpd-test-agg-") else "dpd"
        router, engine = runs[key].metrics[replays[key].current]
        if key == "agg":
            return str(twin_router(router) if namespace == ROUTERS else twin_engine(engine))
        return str(router if namespace == ROUTERS else engine)

    core = Core(pods=[[]], other_pods=other, metrics=metrics)
    batch = Jobs(states={names[key]: replays[key].states for key in names})
    return fakes.benchmark_kube(batch, core,  # type: ignore[arg-type]
                                custom=custom or fakes.FakeCustom(no_selector=no_selector))


class Restarting(dict[str, list[dict[str, Any]]]):
    """Pods by ``namespace|selector``, where ``key``'s one pod has restarted once more at every read."""

    def __init__(self, pods: Mapping[str, list[dict[str, Any]]], *, key: str,
                 pod: Callable[[int], dict[str, Any]]) -> None:
        super().__init__(pods)
        self.key, self.pod, self.reads = key, pod, 0

    def __getitem__(self, key: str) -> list[dict[str, Any]]:
        if key != self.key:
            return super().__getitem__(key)
        self.reads += 1
        return [self.pod(self.reads)]


def bench(capsys: pytest.CaptureFixture[str], kube: Any, *argv: str) -> tuple[int, str, str]:
    clock = FakeClock()
    code = main(["bench", *argv], seams=Seams(benchmark_kube=lambda context, config: kube, clock=clock,
                                                sleep=clock.sleep))
    out, err = capsys.readouterr()
    return code, out, err


def _client_means(run: Any) -> list[float]:
    """The client's mean TTFT per level (every answered request, warm-up included), from its own files."""
    return [level.client_ttft_mean for level in collect(run.files()).levels]


def test_the_twins_ttft_is_bounded_against_its_engines_own_histogram(capsys: pytest.CaptureFixture[str],
                                                                     fakes: ModuleType, healthy_run: Any,
                                                                     shared_run: Any, spec: str) -> None:
    """Before, the twin's levels had no server figure at all: the A/B set a checked DPD TTFT against an unchecked
    one. Now each twin level's client mean stands beside its engine's own vllm:time_to_first_token_seconds, and
    their difference is the stub's truth (its own clock, the same window). The twin's first level also carried a
    second client's requests: the other-traffic check holds on the twin too."""
    code, out, err = bench(capsys, ab_cluster(fakes, healthy_run, shared_run), spec, *TRAFFIC, "--aggregated", "--json")
    twin = json.loads(out)["runs"]["aggregated"]
    rows = twin["server_clock"]
    truth = [fmean(ttfts) for ttfts in shared_run.server_ttfts_by_level()]
    for row, server, client in zip(rows, truth, _client_means(shared_run), strict=True):
        print(f"C={row['concurrency']}: bench server TTFT {row['server_ttft']['mean_s'] * 1e3:.2f} ms (stub "
              f"{server * 1e3:.2f}), overhead {row['client_overhead_s'] * 1e3:+.2f} ms (truth "
              f"{(client - server) * 1e3:+.2f})")
        assert row["server_ttft"] == {"clock": "engine", "series": "vllm:time_to_first_token_seconds",
                                      "mean_s": pytest.approx(server, rel=1e-9)}
        assert row["client_overhead_s"] == pytest.approx(client - server, rel=1e-9)
    finished = [row["server_requests"]["the engines finished"] - row["client_requests"] for row in rows]
    # the second level is ours alone, but for up to one request per user (4) the client cut after the engine finished
    assert 0 <= finished[1] <= 4 and shared_run.intruded <= finished[0] <= shared_run.intruded + 2
    assert [w["concurrency"] for w in twin["warnings"] if w["code"] == "other-traffic"] == [2]
    # measured and bounded: besides, at most the client's own overhead is flagged (a loaded machine may pass it)
    assert {w["code"] for w in twin["warnings"]} <= {"client-overhead", "other-traffic"}, twin["warnings"]
    assert code == (1 if twin["warnings"] or json.loads(out)["runs"]["dpd"]["warnings"] else 0), err
    code, text, _ = bench(capsys, ab_cluster(fakes, healthy_run, shared_run), spec, *TRAFFIC, "--aggregated")
    block = text[text.index("aggregated: the client's TTFT against the server's own clock"):].splitlines()
    assert block[1].split()[:4] == ["CONC", "SERVER", "CLOCK", "SRV"]
    assert [line.split()[:2] for line in block[2:4]] == [["2", "vllm:time_to_first_token_seconds"],
                                                         ["4", "vllm:time_to_first_token_seconds"]]


def test_a_twin_whose_router_has_the_histogram_is_bounded_by_the_router(capsys: pytest.CaptureFixture[str],
                                                                        fakes: ModuleType, healthy_run: Any,
                                                                        shared_run: Any, spec: str) -> None:
    """The router's clock wins when the twin's router serves it: the same clock as the DPD side's."""
    kube = ab_cluster(fakes, healthy_run, shared_run, twin_router=str)
    _, out, _ = bench(capsys, kube, spec, *TRAFFIC, "--aggregated", "--json")
    rows = json.loads(out)["runs"]["aggregated"]["server_clock"]
    truth = [fmean(ttfts) for ttfts in shared_run.server_ttfts_by_level()]
    assert [row["server_ttft"]["series"] for row in rows] == ["dpd_e2e_ttft_seconds"] * 2
    assert [row["server_ttft"]["mean_s"] for row in rows] == pytest.approx(truth, rel=1e-9)


def test_a_twin_without_a_server_clock_is_unverified_and_the_ab_says_so(capsys: pytest.CaptureFixture[str],
                                                                         fakes: ModuleType, healthy_run: Any,
                                                                         shared_run: Any, spec: str) -> None:
    """No TTFT histogram on the twin's router or engine: every twin level is client-overhead-unknown (exit 1), never
    silently passed, and the A/B names the unverified side at each level."""
    kube = ab_cluster(fakes, healthy_run, shared_run, twin_engine=_no_engine_ttft)
    code, out, _ = bench(capsys, kube, spec, *TRAFFIC, "--aggregated", "--json")
    document = json.loads(out)
    twin = document["runs"]["aggregated"]
    unknown = [w for w in twin["warnings"] if w["code"] == "client-overhead-unknown"]
    assert code == 1 and [w["concurrency"] for w in unknown] == [2, 4]
    assert "neither the twin's router (dpd_e2e_ttft_seconds) nor its engine pods" in unknown[0]["message"]
    assert all(row["server_ttft"]["mean_s"] is None and row["client_overhead_s"] is None
               for row in twin["server_clock"])
    for level in document["ab_buyer"]["levels"]:
        assert "client-overhead-unknown" in level["unverified"]["aggregated"]
    assert all("client-overhead-unknown" in row["unverified"]["aggregated"] for row in document["ab"])
    _, text, _ = bench(capsys, ab_cluster(fakes, healthy_run, shared_run, twin_engine=_no_engine_ttft), spec, *TRAFFIC,
                       "--aggregated")
    notes = [line for line in text.splitlines() if ": unverified on " in line]
    assert [line.split(":")[0].strip() for line in notes] == ["concurrency 2", "concurrency 4"]
    assert all("aggregated (" in line and "client-overhead-unknown" in line for line in notes)


def test_a_twin_whose_pods_cannot_be_found_is_unverified_with_why(capsys: pytest.CaptureFixture[str],
                                                                  fakes: ModuleType, healthy_run: Any,
                                                                  shared_run: Any, spec: str) -> None:
    kube = ab_cluster(fakes, healthy_run, shared_run, no_selector=("dpd-test-agg",))
    code, out, _ = bench(capsys, kube, spec, *TRAFFIC, "--aggregated", "--json")
    twin = json.loads(out)["runs"]["aggregated"]
    unknown = [w for w in twin["warnings"] if w["code"] == "client-overhead-unknown"]
    assert code == 1 and [w["concurrency"] for w in unknown] == [2, 4]
    assert "InferenceEndpointConfig default/dpd-test-agg has no status.selector" in unknown[0]["message"]
    assert [row["server_ttft"] for row in twin["server_clock"]] == [None, None]


def test_a_twin_without_a_router_pod_is_still_bounded_by_its_engines(capsys: pytest.CaptureFixture[str],
                                                                     fakes: ModuleType, healthy_run: Any,
                                                                     shared_run: Any, spec: str) -> None:
    """The operator makes a router only for an endpoint with a pdSpec: before, no twin router pod failed the whole
    read, and every twin level was client-overhead-unknown though its engines served their TTFT and counts."""
    _, out, _ = bench(capsys, ab_cluster(fakes, healthy_run, shared_run, twin_router_pod=False), spec, *TRAFFIC,
                      "--aggregated", "--json")
    twin = json.loads(out)["runs"]["aggregated"]
    assert "client-overhead-unknown" not in {w["code"] for w in twin["warnings"]}, twin["warnings"]
    assert [row["server_ttft"]["clock"] for row in twin["server_clock"]] == ["engine", "engine"]
    assert all(list(row["server_requests"]) == ["the engines finished"] for row in twin["server_clock"])


def test_a_twin_engine_that_restarted_is_reported(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                                  healthy_run: Any, spec: str) -> None:
    """Before, only the DPD side reported a restart: the twin's counts of a restarted engine passed as whole."""
    _, out, _ = bench(capsys, ab_cluster(fakes, healthy_run, twin_restarting=True), spec, *TRAFFIC, "--aggregated",
                      "--json")
    twin = json.loads(out)["runs"]["aggregated"]
    restarted = [w for w in twin["warnings"] if w["code"] == "pod-restarted"]
    assert [w["concurrency"] for w in restarted] == [2, 4], twin["warnings"]
    assert "decoder/dpd-test-agg-6b8-eng restarted" in restarted[0]["message"]


def test_another_clients_requests_on_a_shared_endpoint_are_reported(capsys: pytest.CaptureFixture[str],
                                                                    fakes: ModuleType, shared_run: Any,
                                                                    spec: str) -> None:
    """A second client sent requests to the stub during the first level: the router's and the engine's counts of
    that level exceed what bench's client sent, by the second client's requests (less the one-per-user allowance
    for requests the client cut at the level's end); the second level is bench's own alone. Before: not a word."""
    code, out, _ = bench(capsys, ab_cluster(fakes, shared_run), spec, *TRAFFIC, "--json")
    run = json.loads(out)["runs"]["dpd"]
    other = [w for w in run["warnings"] if w["code"] == "other-traffic"]
    assert code == 1 and [w["concurrency"] for w in other] == [2], run["warnings"]
    reported = int(re.search(r"other traffic: (\d+) requests not ours", other[0]["message"])[1])  # type: ignore[index]
    print(f"bench: {reported} requests not ours; the stub: {shared_run.intruded} from the second client")
    assert shared_run.intruded - 2 <= reported <= shared_run.intruded  # 2: the level's users, cut requests allowed
    routed = run["routing"][0]["disaggregated"] + run["routing"][0]["local"] + run["routing"][0]["fallback"]
    assert f"the router routed {routed}" in other[0]["message"]
    assert len(shared_run.prompts_by_level()[0]) == routed  # the stub's own count of the level's requests


def test_a_healthy_run_has_no_other_traffic(capsys: pytest.CaptureFixture[str], fakes: ModuleType,
                                            healthy_run: Any, spec: str) -> None:
    _, out, _ = bench(capsys, ab_cluster(fakes, healthy_run), spec, *TRAFFIC, "--json")
    assert "other-traffic" not in {w["code"] for w in json.loads(out)["runs"]["dpd"]["warnings"]}


def test_a_level_kept_local_by_the_routers_own_estimate_names_it_and_the_isl_that_clears(
        capsys: pytest.CaptureFixture[str], fakes: ModuleType, short_estimate_run: Any, spec: str) -> None:
    """The server counts every prompt clear of the threshold, but the router's own estimate (its log line) is below
    it: bench quotes the router's numbers, not the model's token count, and the --isl it gives clears the threshold
    by the margin under the router's rule. Before: "Check the deployed routingThreshold against --isl"."""
    code, out, _ = bench(capsys, ab_cluster(fakes, short_estimate_run), spec, *TRAFFIC, "--json")
    run = json.loads(out)["runs"]["dpd"]
    local = [w for w in run["warnings"] if w["code"] == "not-disaggregated"]
    assert code == 1 and [w["concurrency"] for w in local] == [2, 4]
    estimates = short_estimate_run.estimates
    low, high, typical = min(estimates), max(estimates), median_low(estimates)
    message = local[0]["message"]
    print(message)
    assert f"The router's own estimate of these prompts is {low:,}-{high:,} tokens, {typical:,} typically" in message
    assert f"{len(estimates)} requests kept local" in message and "threshold 32" in message
    fix = int(re.search(r"use --isl (\d+) or more", message)[1])  # type: ignore[index]
    assert fix == isl_for_model(isl=64, prompt_tokens=typical, threshold=32)
    assert clears(typical * fix // 64, 32) and not clears(typical, 32)  # the router's estimate scales with the prompt
    assert "Check the deployed routingThreshold" not in message


def test_an_ab_of_results_folders_names_both_sides_unchecked(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                             short_run: Any, spec: str) -> None:
    """Folders hold no counters: neither side's TTFT was set against a server clock, and the A/B says so per level."""
    code, out, _ = bench(capsys, None, spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                         str(short_run.folder), "--json")
    levels = json.loads(out)["ab_buyer"]["levels"]
    assert code == 1 and [level["unverified"] for level in levels] == [
        {"dpd": ["unchecked"], "aggregated": ["output-length", "unchecked"]}] * 2


def _level(load: Load, *, answered: int, failed: int = 0, client: Client = Client.AIPERF) -> LevelResult:
    empty = Percentiles(None, None, None)
    return LevelResult(load=load, scenario="D(64,16)", ttft=empty, tpot=empty, e2e=empty, output_tokens_per_s=0.0,
                       completed=answered, failed=failed, duration_s=1.0, mean_input_tokens=None,
                       mean_output_tokens=None, answered=((0.02, 0.005),) * answered, sent=answered + failed,
                       client=client.value)


def _seen(load: Load, routed: int | None, finished: int | None) -> LevelDisaggregation:
    return LevelDisaggregation(load=load, disaggregated=routed or 0, local=0, fallback=0, external_kv_tokens=0,
                               finished_requests=finished)


@pytest.mark.parametrize(("load", "client", "routed", "finished", "flagged"), [
    (Load(rate=8.0), Client.AIPERF, 24, 24, 0),  # an open-loop client waits for every request it sent: all its own
    (Load(rate=8.0), Client.AIPERF, 26, 26, 2),  # two requests both servers counted that it never sent
    (Load(rate=8.0), Client.AIPERF, 25, 24, 0),  # one counter alone over: ambiguous (a double count), not flagged
    (Load(rate=8.0), Client.AIPERF, 27, 26, 2),  # the smaller excess is what is surely not ours
    (Load(rate=8.0), Client.AIPERF, 26, None, 2),  # only the router's count read: it alone decides
    (Load(concurrency=4), Client.GENAI_BENCH, 28, 28, 0),  # genai-bench may cut one request per user at the end
    (Load(concurrency=4), Client.GENAI_BENCH, 29, 29, 1),
    (Load(concurrency=4), Client.AIPERF, 28, 28, 4),  # aiperf waits for its --request-count: no cut to allow
])
def test_other_traffic_is_what_the_servers_counted_beyond_this_clients_requests(
        load: Load, client: Client, routed: int, finished: int | None, flagged: int) -> None:
    """22 answered and 2 failed: the client's 24 requests, against the router's and the engines' counts."""
    warnings = other_traffic_warnings([_level(load, answered=22, failed=2, client=client)],
                                      {load: _seen(load, routed, finished)})
    assert [w.message.split(".")[0] for w in warnings] == (
        [f"other traffic: {flagged} requests not ours"] if flagged else [])
    assert all(w.code is Trust.OTHER_TRAFFIC for w in warnings)


def test_a_level_neither_server_counted_is_unchecked_not_passed() -> None:
    """The twin's router is optional and its engines may export no vllm:request_success_total: with neither count,
    the check passed silently before."""
    load = Load(concurrency=4)
    (warning,) = other_traffic_warnings([_level(load, answered=24)], {load: _seen(load, None, None)})
    assert warning.code is Trust.OTHER_TRAFFIC_UNKNOWN
    assert warning.message.startswith("neither server counted this level's requests")


def _aiperf_records(*, warmup_failed: int, answered: int) -> str:
    """aiperf 0.13 records: failed warm-up requests (an error, no TTFT), then answered measured ones."""
    failed = {"metadata": {"benchmark_phase": "warmup"}, "metrics": {}, "error": {"code": 503, "message": "busy"}}
    ok = {"metadata": {"benchmark_phase": "profiling"},
          "metrics": {"time_to_first_token": {"value": 20.0, "unit": "ms"},
                      "inter_token_latency": {"value": 5.0, "unit": "ms"}}}
    return "".join(json.dumps(record) + "\n" for record in [failed] * warmup_failed + [ok] * answered)


AIPERF_SUMMARY = {"aiperf_version": "0.13.0", "request_count": {"avg": 8}, "benchmark_duration": {"avg": 1.0}}


def test_an_aiperf_warm_up_error_is_a_request_this_client_sent() -> None:
    """A failed warm-up request is in neither aiperf's answered records nor its summary's error count, but the
    servers counted it: an open-loop level (no allowance) was flagged by its own warm-up error."""
    level = parse_aiperf(AIPERF_SUMMARY, _aiperf_records(warmup_failed=1, answered=8), rate=2.0)
    load = Load(rate=2.0)
    assert level.sent == 9 and level.failed == 0 and len(level.answered) == 8
    assert other_traffic_warnings([level], {load: _seen(load, 9, 9)}) == []
    assert [w.code for w in other_traffic_warnings([level], {load: _seen(load, 10, 10)})] == [Trust.OTHER_TRAFFIC]


def test_a_level_whose_client_files_do_not_count_its_requests_is_unchecked_not_flagged() -> None:
    """Without aiperf's records file the client's count was its failures alone (0 here): every level was flagged
    other-traffic. Now the level says the check could not run."""
    level = parse_aiperf(AIPERF_SUMMARY, None, rate=2.0)
    load = Load(rate=2.0)
    warnings = other_traffic_warnings([level], {load: _seen(load, 9, 9)})
    assert level.sent is None and [w.code for w in warnings] == [Trust.OTHER_TRAFFIC_UNKNOWN]
    assert "profile_export.jsonl" in warnings[0].message and "could not" in warnings[0].message


def _kept_local(estimates: RouterEstimates, *, local: int = 8, max_model_len: int | None = None) -> str:
    load = Load(concurrency=2)
    seen = LevelDisaggregation(load=load, disaggregated=0, local=local, fallback=0, external_kv_tokens=0)
    warnings = disaggregation_warnings(RoutePath.DPD, [load], {load: seen}, isl=64, threshold=32,
                                       estimates=estimates, osl=16, max_model_len=max_model_len)
    assert [w.code for w in warnings] == [Trust.NOT_DISAGGREGATED]
    return warnings[0].message


def test_the_isl_fix_scales_by_the_routers_typical_estimate_not_one_short_prompt() -> None:
    """The log since before the Job held one 2-token prompt from someone else: the lowest estimate advised --isl
    in the thousands; the median of the level's own estimates advises what the run's prompts need."""
    message = _kept_local(RouterEstimates(low=2, high=20, threshold=32, count=8, typical=19))
    fix = int(re.search(r"use --isl (\d+) or more", message)[1])  # type: ignore[index]
    assert fix == isl_for_model(isl=64, prompt_tokens=19, threshold=32) < isl_for_model(isl=64, prompt_tokens=2,
                                                                                         threshold=32)
    assert "2-20 tokens, 19 typically" in message


@pytest.mark.parametrize(("estimates", "local"), [
    (RouterEstimates(low=0, high=0, threshold=32, count=8, typical=0), 8),  # before: "use --isl None or more"
    (RouterEstimates(low=19, high=19, threshold=32, count=40, typical=19), 8),  # 40 lines for 8 local requests
])
def test_router_estimates_that_cannot_be_this_runs_are_not_scaled_by(estimates: RouterEstimates, local: int) -> None:
    message = _kept_local(estimates, local=local)
    assert "router's own estimate" not in message and "None" not in message


def test_an_isl_fix_past_the_models_context_says_so() -> None:
    message = _kept_local(RouterEstimates(low=19, high=19, threshold=32, count=8, typical=19), max_model_len=80)
    fix = isl_for_model(isl=64, prompt_tokens=19, threshold=32)
    assert f"but --isl {fix} plus --osl 16 is {fix + 16} tokens, above the spec's max_model_len 80" in message


def test_the_stub_counts_a_request_its_client_left_under_no_finished_reason() -> None:
    """vLLM 0.19 counts a client disconnect under no finished_reason (OutputProcessor.abort_requests reaches no
    stats); the stub counted it as ``abort``, which the engines' count then subtracted as if vLLM did."""
    from benchmark import fake_openai as stub
    with stub.serving(stub.Behaviour(first_token_s=0.0, per_token_s=0.001)) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        body = json.dumps({"model": "/opt/ml/model", "max_tokens": 3000, "ignore_eos": True, "stream": True,
                           "messages": [{"role": "user", "content": "a b c"}]})
        connection.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.fp.readline()  # the first chunk's size line: the stream started
        connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()
        streamed = -1
        for _ in range(60):  # until the handler stops streaming (3000 tokens at 1 ms would take 3 s whole)
            time.sleep(0.05)
            if server.counters["generated"] == streamed:
                break
            streamed = server.counters["generated"]
        assert 0 < streamed < 3000 and server.finish_reasons == {}


def test_a_twin_over_the_bound_on_its_engines_clock_names_the_twins_frontend() -> None:
    """The engine's clock starts after the twin's HTTP handling and tokenization: a level over the bound on it says
    that part of the difference may be the twin's own, not only the client's."""
    load = Load(concurrency=4)
    level = replace(_level(load, answered=8), answered=((0.2, 0.005),) * 8)
    engine = replace(_seen(load, None, 8), engine_ttft_buckets={0.05: 8.0, float("inf"): 8.0},
                     stage_totals={f"decode:{TTFT.name}_sum": 0.4, f"decode:{TTFT.name}_count": 8.0})
    router = replace(engine, router_ttft_mean_s=0.05)
    on_engine = overhead_warnings([level], {load: engine}, clock=twin_ttft)
    on_router = overhead_warnings([level], {load: router}, clock=twin_ttft)
    assert [w.code for w in on_engine] == [w.code for w in on_router] == [Trust.CLIENT_OVERHEAD]
    assert "the twin's own frontend" in on_engine[0].message and "frontend" not in on_router[0].message
