"""The benchmark Job and ServiceAccount: strict Kubernetes schemas, the pod's shape, snapshots, bad options."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

from hyperpod_dpd import FsxSource, SpecError
from hyperpod_dpd.benchmark import BenchmarkTarget, S3Location, Scenario
from hyperpod_dpd.benchmark.run.client import Client
from hyperpod_dpd.benchmark.run.job import (
    JobOptions,
    deadline_seconds,
    render_benchmark_job,
)
from hyperpod_dpd.benchmark.run.scenario import arrival_seed
from hyperpod_dpd.contracts.bench_job import DEFAULT_IMAGE
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL
from hyperpod_dpd.contracts.tokenizer import TOKENIZER_FILES
from hyperpod_dpd.spec import DpdSpec

RUN = "20261201-0300"
KubeErrors = Callable[[str, Any], list[str]]


def objects(spec: DpdSpec, scenario: Scenario | None = None, **options: Any) -> dict[str, dict[str, Any]]:
    rendered = render_benchmark_job(BenchmarkTarget.for_spec(spec), scenario or Scenario(),
                                    JobOptions(run_id=RUN, **options))
    return {o["kind"]: o for o in rendered}


def test_job_and_service_account_are_valid_kubernetes(spec: DpdSpec, kubernetes_errors: KubeErrors) -> None:
    rendered = objects(spec, role_arn="arn:aws:iam::111122223333:role/bench",
                       results=S3Location(bucket="results", prefix="bench"))
    assert set(rendered) == {"Job", "ServiceAccount"}
    assert kubernetes_errors("io.k8s.api.batch.v1.Job", rendered["Job"]) == []
    assert kubernetes_errors("io.k8s.api.core.v1.ServiceAccount", rendered["ServiceAccount"]) == []


def test_the_pod_is_bounded_non_root_and_kept_off_gpu_nodes(spec: DpdSpec) -> None:
    job = objects(spec)["Job"]
    body, pod = job["spec"], job["spec"]["template"]["spec"]
    assert body["backoffLimit"] == 0 and body["ttlSecondsAfterFinished"] == 3600
    # setup, three levels at their bound, and a quiet window before the first level and after each
    assert body["activeDeadlineSeconds"] == deadline_seconds(Scenario()) == 900 + 3 * (1800 + 60) + 4 * 40
    assert pod["restartPolicy"] == "Never" and pod["securityContext"]["runAsNonRoot"] is True
    assert pod["serviceAccountName"] == "hyperpod-dpd-bench"
    containers = [*pod["initContainers"], *pod["containers"]]
    assert [c["name"] for c in containers] == ["fetch-tokenizer", "benchmark", "publish"]
    for container in containers:
        assert container["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
        assert "nvidia.com/gpu" not in container["resources"]["limits"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": INSTANCE_GROUP_LABEL, "operator": "DoesNotExist"} in term["matchExpressions"]
    # any node but a HyperPod one: an existing cluster's nodes carry none of the stack's labels
    assert term["matchExpressions"] == [{"key": INSTANCE_GROUP_LABEL, "operator": "DoesNotExist"}]
    pinned = objects(spec, node_selector={"hyperpod-dpd/pool": "system"})["Job"]["spec"]["template"]["spec"]
    (term,) = pinned["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "hyperpod-dpd/pool", "operator": "In", "values": ["system"]} in term["matchExpressions"]


GENAI_BENCH = Scenario(client=Client.GENAI_BENCH)


def test_genai_bench_runs_the_blog_scenario_against_the_router(spec: DpdSpec) -> None:
    pod = objects(spec, GENAI_BENCH)["Job"]["spec"]["template"]["spec"]
    fetch, bench = pod["initContainers"]
    assert fetch["args"][:4] == ["s3", "cp", "s3://dpd-models-example/Llama-3.3-70B-Instruct/", "/tokenizer/"]
    assert {"name": "AWS_REGION", "value": "us-west-2"} in fetch["env"]
    args = bench["args"]

    def flag(name: str) -> list[str]:
        return [args[i + 1] for i, arg in enumerate(args) if arg == name]

    # absolute (trailing dot): no walk of the pod's DNS search path on each new connection
    assert flag("--api-base") == ["http://dpd-test-default-routing-service.hyperpod-inference-system.svc"
                                  ".cluster.local.:443"]
    # the spec's hardware for genai-bench's metadata: ml.p5.48xlarge, one prefill and one decode pod of TP 8
    assert flag("--server-gpu-type") == ["H100"] and flag("--server-gpu-count") == ["16"]
    assert flag("--api-backend") == ["vllm"]  # sends ignore_eos
    # above the default routing threshold of 4096; one genai-bench run per level, users started over 5 s
    assert flag("--traffic-scenario") == ["D(4352,256)"] and flag("--num-concurrency") == []
    assert {"name": "LEVELS", "value": "8:2 16:4 32:7"} in bench["env"]
    assert flag("--max-requests-per-run") == ["320"] and flag("--max-time-per-run") == ["30"]
    assert flag("--warmup-ratio") == ["0.1"] and {"name": "ENABLE_UI", "value": "false"} in bench["env"]
    assert flag("--api-model-name") == ["/opt/ml/model"] and flag("--model-tokenizer") == ["/tokenizer"]
    assert bench["image"] == DEFAULT_IMAGE
    assert re.fullmatch(r"[^@]+@sha256:[0-9a-f]{64}", DEFAULT_IMAGE), "the default image is pinned by digest"
    assert {"name": "CLIENT_VERSION", "value": "0.0.5"} in bench["env"]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in bench["env"]


def test_genai_bench_is_told_only_a_gpu_type_it_accepts(spec: DpdSpec) -> None:
    """genai-bench 0.0.5's --server-gpu-type is a click.Choice without B300: the type is left out, the count kept;
    the aggregated twin is one pod of the spec's TP."""
    from hyperpod_dpd.benchmark.run.job import server_gpu_args
    from hyperpod_dpd.charts.aggregated import aggregated_spec
    from hyperpod_dpd.spec.instances import InstanceType

    b300 = BenchmarkTarget.for_spec(dataclasses.replace(spec, instance_type=InstanceType.P6_B300_48XLARGE))
    assert server_gpu_args(b300) == ["--server-gpu-count", "16"]
    assert server_gpu_args(BenchmarkTarget.for_spec(aggregated_spec(spec), twin=True)) == [
        "--server-gpu-type", "H100", "--server-gpu-count", "8"]


def test_aiperf_runs_each_request_rate_against_the_router(spec: DpdSpec,
                                                         kubernetes_errors: KubeErrors) -> None:
    """The open-loop Job: aiperf per rate with Poisson arrivals from a fixed seed, the lengths held fixed,
    ``max_tokens`` as genai-bench sends it, no readiness probe, and no Hub offline mode (aiperf 0.13 then
    refuses a local tokenizer folder)."""
    rendered = objects(spec, Scenario(request_rates=(1.0, 2.5)), results=S3Location(bucket="results", prefix="r"))
    assert kubernetes_errors("io.k8s.api.batch.v1.Job", rendered["Job"]) == []
    pod = rendered["Job"]["spec"]["template"]["spec"]
    bench, publish = pod["initContainers"][1], pod["containers"][0]
    args = bench["args"]

    def flag(name: str) -> list[str]:
        return [args[i + 1] for i, arg in enumerate(args) if arg == name]

    assert args[0] == "profile" and bench["command"][3] == "aiperf" and "aiperf" in bench["command"][2]
    assert flag("--url") == ["http://dpd-test-default-routing-service.hyperpod-inference-system.svc"
                             ".cluster.local.:443"]
    assert flag("--isl") == ["4352"] and flag("--osl") == ["256"] and flag("--isl-stddev") == ["0"]
    assert flag("--extra-inputs") == ["ignore_eos:true"] and "--use-legacy-max-tokens" in args
    assert flag("--arrival-pattern") == ["poisson"] and flag("--random-seed") == []  # per level
    assert flag("--wait-for-model-timeout") == ["0"] and flag("--benchmark-duration") == ["1800"]
    assert flag("--workers-max") == ["3"] and flag("--request-rate") == []  # per level, from LEVELS
    env = {e["name"]: e["value"] for e in bench["env"]}
    seeds = [arrival_seed(RUN, level) for level in (0, 1)]
    assert env["LEVELS"] == f"1:155:16:{seeds[0]} 2.5:300:30:{seeds[1]}"
    assert env["LEVELS_JSON"] == '{"request_rate": [1.0, 2.5]}'
    assert env["CLIENT_VERSION"] == "0.13.0" and "aiperf==0.13.0 --hash=sha256:" in env["CLIENT_LOCK"]
    assert "HF_HUB_OFFLINE" not in env and "TRANSFORMERS_OFFLINE" not in env
    # the records go to S3 and the log with the summaries; a failed run's tail is aiperf's log
    script = publish["command"][2]
    assert '--include "*.jsonl"' in script and '"$dir"/*.jsonl' in script and "/results/logs/aiperf.log" in script
    assert rendered["Job"]["spec"]["activeDeadlineSeconds"] == deadline_seconds(Scenario(request_rates=(1.0, 2.5)))


def test_aiperf_runs_each_concurrency_level_by_default(spec: DpdSpec, kubernetes_errors: KubeErrors) -> None:
    """The default closed-loop Job runs aiperf (genai-bench cannot keep up at the default load): one
    ``--concurrency`` run per level with a seed of its own, the warm-up users started over 5 s, no Poisson
    arrivals, and its files named by the level."""
    rendered = objects(spec)
    assert kubernetes_errors("io.k8s.api.batch.v1.Job", rendered["Job"]) == []
    bench = rendered["Job"]["spec"]["template"]["spec"]["initContainers"][1]
    args, script = bench["args"], bench["command"][2]

    def flag(name: str) -> list[str]:
        return [args[i + 1] for i, arg in enumerate(args) if arg == name]

    assert args[0] == "profile" and bench["command"][3] == "aiperf"
    assert flag("--isl") == ["4352"] and flag("--osl") == ["256"] and flag("--arrival-pattern") == []
    assert flag("--warmup-concurrency-ramp-duration") == ["5"] and flag("--concurrency") == []  # per level
    assert '--concurrency "$level"' in script and "--request-rate" not in script
    assert '"/results/$RUN_ID/aiperf_concurrency_$level.json"' in script
    env = {e["name"]: e["value"] for e in bench["env"]}
    seeds = [arrival_seed(RUN, level) for level in (0, 1, 2)]
    assert env["LEVELS"] == f"8:320:32:{seeds[0]} 16:320:32:{seeds[1]} 32:320:32:{seeds[2]}"
    assert env["LEVELS_JSON"] == '{"num_concurrency": [8, 16, 32]}'
    assert env["CLIENT_VERSION"] == "0.13.0" and "aiperf==0.13.0 --hash=sha256:" in env["CLIENT_LOCK"]


def test_a_shared_prefix_is_aiperfs_prefix_pool_of_one(spec: DpdSpec) -> None:
    """--prefix-share 0.25 of 4,352 tokens: a 1,088-token prefix shared by every prompt, and a body of 3,264
    (aiperf joins the two at the token level, so each prompt is still 4,352 tokens)."""
    args = objects(spec, Scenario(prefix_share=0.25))["Job"]["spec"]["template"]["spec"]["initContainers"][1]["args"]

    def flag(name: str) -> list[str]:
        return [args[i + 1] for i, arg in enumerate(args) if arg == name]

    assert flag("--num-prefix-prompts") == ["1"] and flag("--prefix-prompt-length") == ["1088"]
    assert flag("--isl") == ["3264"]
    plain = objects(spec)["Job"]["spec"]["template"]["spec"]["initContainers"][1]["args"]
    assert "--num-prefix-prompts" not in plain and "--prefix-prompt-length" not in plain


def test_overrides_reach_the_manifest(spec: DpdSpec) -> None:
    rendered = objects(spec, Scenario(isl=2000, osl=128, concurrency=(1, 4), requests=40, max_seconds=300,
                                      client=Client.GENAI_BENCH),
                       image="ghcr.io/moirai-internal/genai-bench:0.0.5", role_arn="arn:aws:iam::1:role/r",
                       results=S3Location(bucket="results", prefix="runs"), node_selector={})
    account, pod = rendered["ServiceAccount"], rendered["Job"]["spec"]["template"]["spec"]
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}
    assert pod["initContainers"][1]["image"] == "ghcr.io/moirai-internal/genai-bench:0.0.5"
    assert "D(2000,128)" in pod["initContainers"][1]["args"]
    assert 's3://results/runs/dpd-test/$RUN_ID/' in pod["containers"][0]["command"][2]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": INSTANCE_GROUP_LABEL, "operator": "DoesNotExist"}]
    assert rendered["Job"]["spec"]["activeDeadlineSeconds"] == 900 + 2 * 360 + 3 * 40


@pytest.mark.parametrize("scenario", [GENAI_BENCH, Scenario(request_rates=(1.0, 2.0, 4.0)), Scenario()],
                         ids=["concurrency", "request-rate", "aiperf-concurrency"])
def test_rendering_is_deterministic_and_snapshotted(spec: DpdSpec, scenario: Scenario,
                                                    snapshot: SnapshotAssertion) -> None:
    first = yaml.safe_dump_all(list(objects(spec, scenario).values()), sort_keys=False)
    assert first == yaml.safe_dump_all(list(objects(spec, scenario).values()), sort_keys=False)
    assert first == snapshot


@pytest.mark.parametrize(("options", "field"), [
    ({"run_id": "Run_1"}, "run_id"),
    ({"run_id": "x" * 60}, "run_id"),
    ({"service_account": "Bench"}, "service_account"),
    ({"cpu": 0}, "resources"),
])
def test_bad_options_name_the_field(spec: DpdSpec, options: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        render_benchmark_job(BenchmarkTarget.for_spec(spec), Scenario(), JobOptions(**{"run_id": RUN, **options}))
    assert [p.field for p in caught.value.problems] == [field]
    assert "Fix:" in str(caught.value)


@pytest.mark.parametrize(("scenario", "field"), [
    ({"isl": 0}, "isl"), ({"osl": 1}, "osl"), ({"concurrency": ()}, "concurrency"),
    ({"concurrency": (8, 8)}, "concurrency"), ({"concurrency": (0,)}, "concurrency"),
    ({"requests": 4}, "requests"), ({"max_seconds": 90}, "max_seconds"),
    ({"client": Client.GENAI_BENCH, "request_rates": (1.0,)}, "client"),
    ({"client": Client.GENAI_BENCH, "prefix_share": 0.5}, "prefix_share"),
    ({"prefix_share": 1.0}, "prefix_share"), ({"prefix_share": -0.1}, "prefix_share"),
    ({"prefix_share": float("nan")}, "prefix_share"), ({"isl": 64, "prefix_share": 0.001}, "prefix_share"),
])
def test_bad_scenarios_name_the_field(scenario: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as caught:
        Scenario(**scenario)
    assert field in {p.field for p in caught.value.problems}


def test_the_pod_copies_every_form_of_tokenizer(spec: DpdSpec) -> None:
    """Checkpoints without tokenizer.json (SentencePiece, GPT-2-style BPE) are copied too, by the plain names the
    stack's role may read (tests/cdk/test_benchmark.py checks the role against the same list)."""
    fetch = objects(spec)["Job"]["spec"]["template"]["spec"]["initContainers"][0]
    included = [fetch["args"][i + 1] for i, arg in enumerate(fetch["args"]) if arg == "--include"]
    assert included == list(TOKENIZER_FILES) and len(set(included)) == len(included)
    assert {"tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "tokenizer_config.json"} <= set(included)
    assert not [name for name in included if set(name) & set("*?[/")]  # literal names, as the role's ARNs take them


def test_a_model_not_in_s3_needs_a_tokenizer_location(spec: DpdSpec) -> None:
    fsx = dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=FsxSource(
        file_system_id="fs-0123456789abcdef0", path="/models/llama")))
    with pytest.raises(SpecError, match="--tokenizer-s3") as error:
        BenchmarkTarget.for_spec(fsx)
    fix = error.value.problems[0].fix
    assert "tokenizer.model" in fix and "vocab.json with merges.txt" in fix
    target = BenchmarkTarget.for_spec(fsx, tokenizer=S3Location.parse("s3://tok/llama", field="--tokenizer-s3"))
    assert target.tokenizer.uri == "s3://tok/llama/"
    with pytest.raises(SpecError, match="--tokenizer-s3"):
        S3Location.parse("tok/llama", field="--tokenizer-s3")
