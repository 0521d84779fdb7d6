"""The path a user takes, offline: spec -> `cdk deploy --outputs-file` -> `bench` and `verify` with the outputs.

Every name `bench --render` and `verify --dry-run` use (bucket, prefix, instance groups,
ServiceAccount, role, router Service, namespace, HyperPod cluster) must be the one the stack
deployed. Before, `bench` copied the tokenizer from the bucket the spec file named while the stack
had pointed the endpoint at its own bucket (bench audit D1), and `verify` guessed the cluster.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from cdk.cdk_support import Synthesized, synthesize
from cdk.cdk_template_queries import by_type, outputs_file, stand_in

from hyperpod_dpd.cli import main
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL, SYSTEM_POOL_LABEL
from hyperpod_dpd.spec.defaults import default_spec_text

IEC = "InferenceEndpointConfig"


@dataclass
class Journey:
    stack_name: str
    specs: list[Path]
    synthesized: Synthesized
    outputs: Path


def _deploy(app_module: ModuleType, cdk_context: dict[str, Any], folder: Path, specs: list[Path],
            **options: str) -> Journey:
    """`cdk deploy -c spec=... --outputs-file outputs.json`, with stand-ins for what only a deploy knows."""
    context = {**cdk_context, "spec": ",".join(map(str, specs)), **options}
    app, stack = app_module.build(context, outdir=str(folder / "cdk.out"))
    synthesized = synthesize(app, stack)
    outputs = folder / "outputs.json"
    outputs.write_text(json.dumps(outputs_file(synthesized.template, stack.stack_name), indent=1))
    return Journey(stack_name=stack.stack_name, specs=specs, synthesized=synthesized, outputs=outputs)


@pytest.fixture(scope="session")
def default_journey(app_module: ModuleType, cdk_context: dict[str, Any],
                    tmp_path_factory: pytest.TempPathFactory) -> Journey:
    """The README's first step: a spec from the advisor's search when it is installed, else from `example`."""
    folder = tmp_path_factory.mktemp("journey-default")
    spec = folder / "my-spec.yaml"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        if importlib.util.find_spec("aiconfigurator") is not None:
            assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "16", "--tpot-ms", "40",
                         "--search", "--write-spec", str(spec)]) == 0
        else:
            assert main(["example"]) == 0
            spec.write_text(printed.getvalue())
    return _deploy(app_module, cdk_context, folder, [spec])


@pytest.fixture(scope="session")
def two_endpoint_journey(app_module: ModuleType, cdk_context: dict[str, Any],
                         tmp_path_factory: pytest.TempPathFactory) -> Journey:
    """A non-default namespace, TP 4, two endpoints sharing the bucket, and the aggregated twins."""
    folder = tmp_path_factory.mktemp("journey-two")
    base = (default_spec_text().replace("namespace: default", "namespace: inference")
            .replace("tensor_parallel_size: 8", "tensor_parallel_size: 4"))
    first, second = folder / "first.yaml", folder / "second.yaml"
    first.write_text(base.replace("name: dpd-test\n", "name: llama-a\n", 1)
                     .replace("endpoint_name: dpd-test", "endpoint_name: llama-a"))
    second.write_text(base.replace("name: dpd-test\n", "name: llama-b\n", 1)
                      .replace("endpoint_name: dpd-test", "endpoint_name: llama-b")
                      .replace("prefix: Llama-3.3-70B-Instruct", "prefix: team-b/Llama-3.3-70B-Instruct"))
    return _deploy(app_module, cdk_context, folder, [first, second], stack_name="DpdJourney",
                   aggregated_baseline="true")


# --- what the template says was deployed ------------------------------------------------------------


def _applied(s: Synthesized) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack applies, tokens replaced by their deploy-time stand-ins."""
    objects = []
    for resource in by_type(s.template, "Custom::AWSCDK-EKS-KubernetesResource").values():
        objects += json.loads(str(stand_in(s.template, resource["Properties"]["Manifest"])))
    return objects


def _deployed_endpoint(s: Synthesized, name: str) -> dict[str, Any]:
    (found,) = [o for o in _applied(s) if o["kind"] == IEC and o["metadata"]["name"] == name]
    return found


def _deployed_groups(s: Synthesized) -> set[str]:
    (cluster,) = by_type(s.template, "AWS::SageMaker::Cluster").values()
    return {group["InstanceGroupName"] for group in cluster["Properties"]["InstanceGroups"]}


def _benchmark_account(s: Synthesized, namespace: str) -> dict[str, Any]:
    (account,) = [o for o in _applied(s) if o["kind"] == "ServiceAccount" and o["metadata"]["namespace"] == namespace]
    return account


# --- the commands -------------------------------------------------------------------------------------


def _bench_render(journey: Journey, spec: Path, folder: Path, *extra: str) -> list[list[dict[str, Any]]]:
    out = folder / "bench"
    assert main(["bench", str(spec), "--render", str(out), "--outputs-file", str(journey.outputs),
                 "--run-id", "journey", *extra]) == 0
    return [list(yaml.safe_load_all(path.read_text())) for path in sorted(out.glob("*.yaml"))]


def _verify_names(journey: Journey, spec: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    capsys.readouterr()
    assert main(["verify", str(spec), "--outputs-file", str(journey.outputs), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"names used (stack outputs: {journey.outputs}):"
    names = {}
    for line in lines[1:]:
        what, value = line.strip().split("  ", 1)
        value, _, origin = value.strip().rpartition("  ")
        assert origin == "(from the stack)", line
        names[what] = value
    return names


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _check_bench(journey: Journey, spec: Path, name: str, folder: Path, *, aggregated: bool = False) -> None:
    s = journey.synthesized
    deployed = _deployed_endpoint(s, name)
    namespace = deployed["metadata"]["namespace"]
    storage = deployed["spec"]["modelSourceConfig"]
    account = _benchmark_account(s, namespace)
    rendered = _bench_render(journey, spec, folder, *(["--aggregated"] if aggregated else []))
    jobs = {}
    for documents in rendered:
        sa, job = (next(d for d in documents if d["kind"] == kind) for kind in ("ServiceAccount", "Job"))
        jobs[job["metadata"]["labels"]["hyperpod-dpd/endpoint"]] = sa, job
    assert sorted(jobs) == ([name, f"{name}-agg"] if aggregated else [name])
    for endpoint, (sa, job) in jobs.items():
        texts = _strings(job)
        # The tokenizer comes from the bucket and prefix the endpoint reads.
        tokenizer = f"s3://{storage['s3Storage']['bucketName']}/{storage['modelLocation']}/"
        assert tokenizer in texts
        # The stack's ServiceAccount, with the stack's role, in the endpoint's namespace.
        assert (sa["metadata"]["name"], sa["metadata"]["namespace"]) == (
            account["metadata"]["name"], account["metadata"]["namespace"])
        assert sa["metadata"]["annotations"] == account["metadata"]["annotations"]
        assert job["metadata"]["namespace"] == namespace
        assert job["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
        # The router Service of the endpoint the operator created from the deployed config.
        router = f"http://{endpoint}-{namespace}-routing-service.hyperpod-inference-system.svc.cluster.local.:443"
        assert router in texts
        # On the system nodes the stack created.
        assert SYSTEM_POOL_LABEL in texts


def _check_verify(journey: Journey, spec: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    s = journey.synthesized
    deployed = _deployed_endpoint(s, name)
    namespace = deployed["metadata"]["namespace"]
    names = _verify_names(journey, spec, capsys)
    (cluster,) = by_type(s.template, "AWS::SageMaker::Cluster").values()
    assert names["hyperpod cluster"] == cluster["Properties"]["ClusterName"]
    assert names["region"] == "us-west-2"
    assert names["endpoint"] == f"{namespace}/{name}"
    assert names["router"] == f"hyperpod-inference-system/{name}-{namespace}-routing-service"
    selectors = {role: deployed["spec"]["pdSpec"][key]["nodeSelector"][INSTANCE_GROUP_LABEL]
                 for role, key in (("prefill", "prefillSpec"), ("decode", "decodingSpec"))}
    assert names["instance groups"] == f"prefill {selectors['prefill']}, decode {selectors['decode']}"
    assert set(selectors.values()) <= _deployed_groups(s)


def test_the_default_journey(default_journey: Journey, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_text = default_journey.specs[0].read_text()
    assert "bucket: dpd-models-example" in spec_text  # the spec means what it says: the endpoint reads it
    assert _deployed_endpoint(default_journey.synthesized, "dpd-test")["spec"]["modelSourceConfig"][
        "s3Storage"]["bucketName"] == "dpd-models-example"
    _check_bench(default_journey, default_journey.specs[0], "dpd-test", tmp_path)
    _check_verify(default_journey, default_journey.specs[0], "dpd-test", capsys)


@pytest.mark.parametrize(("index", "name"), [(0, "llama-a"), (1, "llama-b")])
def test_two_endpoints_in_another_namespace_with_tp4(two_endpoint_journey: Journey, index: int, name: str,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = two_endpoint_journey.specs[index]
    assert _deployed_endpoint(two_endpoint_journey.synthesized, name)["metadata"]["namespace"] == "inference"
    _check_bench(two_endpoint_journey, spec, name, tmp_path, aggregated=True)
    _check_verify(two_endpoint_journey, spec, name, capsys)


def test_bench_without_the_outputs_says_what_it_guessed(default_journey: Journey, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(default_journey.specs[0]), "--render", str(tmp_path), "--run-id", "guess"]) == 0
    err = capsys.readouterr().err
    assert "tokenizer        s3://dpd-models-example/Llama-3.3-70B-Instruct/  (guessed from the spec)" in err
    assert "pass --stack NAME or --outputs-file FILE" in err


def test_a_spec_the_stack_does_not_host_is_refused(two_endpoint_journey: Journey, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(default_spec_text())
    for command in (["bench", "--render", str(tmp_path / "out")], ["verify", "--dry-run"]):
        assert main([command[0], str(other), *command[1:], "--outputs-file", str(two_endpoint_journey.outputs)]) == 2
        err = capsys.readouterr().err
        assert "'dpd-test'" in err and "it hosts: llama-a, llama-b" in err and "Traceback" not in err


def test_the_deploy_page_quotes_verify_dry_run(default_journey: Journey, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/deploy.md shows `verify --dry-run` for the default spec; this keeps the quote true."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    quoted = page.split("<!-- verify-dry-run -->\n```text\n", 1)[1].split("```", 1)[0]
    capsys.readouterr()
    assert main(["verify", str(default_journey.specs[0]), "--outputs-file", str(default_journey.outputs),
                 "--dry-run"]) == 0
    assert capsys.readouterr().out.replace(str(default_journey.outputs), "outputs.json") == quoted
