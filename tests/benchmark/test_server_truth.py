"""The servers' counters as the truth: the twin's TTFT bounded by its own clock, other clients' traffic on a shared
endpoint, and the router's own length estimate behind a level that stayed local.

Each test runs the real ``bench`` CLI against a recorded cluster whose Jobs replay a run of the rendered
benchmark container against the stub (tests/benchmark/fake_openai.py), which records the truth: every TTFT by
its own clock, every request it served, every estimate its router made. Each asserts bench's number next to it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from types import ModuleType
from typing import Any

import pytest
from kubernetes.client import ApiClient
from support import FakeClock, write_spec

from hyperpod_dpd.benchmark.disaggregation import LevelDisaggregation
from hyperpod_dpd.benchmark.levels import LevelResult, Percentiles
from hyperpod_dpd.benchmark.results import collect
from hyperpod_dpd.benchmark.route import isl_for_model
from hyperpod_dpd.benchmark.session import Seams
from hyperpod_dpd.benchmark.traffic import other_traffic_warnings
from hyperpod_dpd.benchmark.trust import Trust
from hyperpod_dpd.cli import main
from hyperpod_dpd.contracts.router import clears
from hyperpod_dpd.load_point import Load

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
               no_selector: tuple[str, ...] = ()) -> Any:
    """A recorded cluster where the DPD Job replays ``dpd`` and the twin's Job ``twin``: each endpoint's router and
    engine pods answer /metrics with their own run's counters of the window their Job's log is in (the twin's
    router through ``twin_router``, by default one without a TTFT histogram, its engine through ``twin_engine``), and
    the DPD router's log holds the stub router's routing lines."""
    names = {"dpd": f"bench-dpd-test-{RUN}", "agg": f"bench-dpd-test-agg-{RUN}"}
    runs = {"dpd": dpd, "agg": twin if twin is not None else dpd}
    replays = {key: fakes.replay(runs[key], names[key]) for key in names}
    job_pods = {f"default|job-name={name}": [fakes.pod(f"{name}-x", init=[fakes.container("benchmark", "terminated")],
                                                       main=[fakes.container("publish", "terminated")])]
                for name in names.values()}
    endpoints = fakes.router_and_decoder()
    twin_pods = fakes.twin_pods()
    other = {**endpoints, **job_pods, f"default|{fakes.twin_selector()}": twin_pods[f"default|{fakes.twin_selector()}"],
             f"{ROUTERS}|": endpoints[f"{ROUTERS}|"] + twin_pods[f"{ROUTERS}|"]}

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
    return fakes.benchmark_kube(batch, core, custom=fakes.FakeCustom(no_selector=no_selector))  # type: ignore[arg-type]


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
    traffic = [*TRAFFIC]
    traffic[traffic.index("--concurrency") + 1] = "2"
    code, out, _ = bench(capsys, ab_cluster(fakes, short_estimate_run), spec, *traffic, "--json")
    run = json.loads(out)["runs"]["dpd"]
    local = [w for w in run["warnings"] if w["code"] == "not-disaggregated"]
    assert code == 1 and [w["concurrency"] for w in local] == [2]
    low, high = min(short_estimate_run.estimates), max(short_estimate_run.estimates)
    message = local[0]["message"]
    print(message)
    assert f"The router's own estimate of these prompts is {low:,}-{high:,} tokens" in message
    assert f"{len(short_estimate_run.estimates)} requests kept local" in message and "threshold 32" in message
    fix = int(re.search(r"use --isl (\d+) or more", message)[1])  # type: ignore[index]
    assert fix == isl_for_model(isl=64, prompt_tokens=low, threshold=32)
    assert clears(low * fix // 64, 32) and not clears(low, 32)  # the router's estimate scales with the prompt
    assert "Check the deployed routingThreshold" not in message


def test_an_ab_of_results_folders_names_both_sides_unchecked(capsys: pytest.CaptureFixture[str], healthy_run: Any,
                                                             short_run: Any, spec: str) -> None:
    """Folders hold no counters: neither side's TTFT was set against a server clock, and the A/B says so per level."""
    code, out, _ = bench(capsys, None, spec, "--results-dir", str(healthy_run.folder), "--aggregated-results-dir",
                         str(short_run.folder), "--json")
    levels = json.loads(out)["ab_buyer"]["levels"]
    assert code == 1 and [level["unverified"] for level in levels] == [
        {"dpd": ["unchecked"], "aggregated": ["output-length", "unchecked"]}] * 2


def _level(load: Load, *, answered: int, failed: int = 0) -> LevelResult:
    empty = Percentiles(None, None, None)
    return LevelResult(load=load, scenario="D(64,16)", ttft=empty, tpot=empty, e2e=empty, output_tokens_per_s=0.0,
                       completed=answered, failed=failed, duration_s=1.0, mean_input_tokens=None,
                       mean_output_tokens=None, answered=((0.02, 0.005),) * answered)


@pytest.mark.parametrize(("load", "routed", "finished", "flagged"), [
    (Load(rate=8.0), 24, 24, 0),  # an open-loop client waits for every request it sent: all its own
    (Load(rate=8.0), 25, 24, 1),  # one routed request it never sent
    (Load(rate=8.0), 24, 26, 2),  # the engines finished two more than it sent
    (Load(concurrency=4), 28, 27, 0),  # a closed-loop level may cut one request per user at its end
    (Load(concurrency=4), 29, 24, 1),
])
def test_other_traffic_is_what_the_servers_counted_beyond_this_clients_requests(
        load: Load, routed: int, finished: int, flagged: int) -> None:
    """22 answered and 2 failed: the client's 24 requests, against the router's and the engines' counts."""
    level = _level(load, answered=22, failed=2)
    seen = LevelDisaggregation(load=load, disaggregated=routed, local=0, fallback=0, external_kv_tokens=0,
                               finished_requests=finished)
    warnings = other_traffic_warnings([level], {load: seen})
    assert [w.message.split(".")[0] for w in warnings] == (
        [f"other traffic: {flagged} requests not ours"] if flagged else [])
    assert all(w.code is Trust.OTHER_TRAFFIC for w in warnings)
