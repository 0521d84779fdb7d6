"""The stack's part of ``hyperpod-dpd bench``: the benchmark role (IRSA) and the aggregated twins."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk.cdk_support import REGION, Synthesized, logical_id, policy_statements, synthesize
from cdk.cdk_template_queries import cfn_json_value, rendered

from hyperpod_dpd import S3Source, SpecError
from hyperpod_dpd.contracts.tokenizer import TOKENIZER_FILES
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.instances import InstanceType
from hyperpod_dpd.spec.units import parse_quantity
from hyperpod_dpd_cdk import HyperPodDpdStack

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


@pytest.fixture(scope="module")
def twin_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default endpoint with its aggregated twin, and no benchmark role."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("twin")))
    stack = HyperPodDpdStack(app, "WithTwin", env=cdk.Environment(region=REGION), endpoints=[default_spec()],
                             aggregated_baseline=True, benchmark=False, observability=False)
    return synthesize(app, stack)


def _subjects(s: Synthesized, role_id: str) -> dict[str, Any]:
    (statement,) = s.template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert list(statement["Condition"]) == ["StringEquals"]
    values: dict[str, Any] = cfn_json_value(s.template, statement["Condition"]["StringEquals"])
    return values


def _arn_text(value: Any) -> str:
    return json.dumps(value).replace('"', "")


def test_the_role_trusts_only_the_benchmark_service_account(default_app: Synthesized) -> None:
    (access,) = default_app.stack.benchmark_access
    values = _subjects(default_app, logical_id(access.role))
    assert {k.rsplit(":", 1)[1]: v for k, v in values.items()} == {
        "sub": "system:serviceaccount:default:hyperpod-dpd-bench", "aud": "sts.amazonaws.com"}


def test_the_role_reads_tokenizer_files_and_writes_results_only(default_app: Synthesized) -> None:
    (access,) = default_app.stack.benchmark_access
    statements = {tuple(sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"])): s
                  for s in policy_statements(default_app, access.role)}
    assert set(statements) == {("s3:GetObject",), ("s3:ListBucket",), ("s3:PutObject",)}
    reads = {_arn_text(r) for r in statements[("s3:GetObject",)]["Resource"]}
    assert reads == {f"{{Fn::Join: [, [{{Fn::GetAtt: [{logical_id(default_app.stack.model_bucket.bucket)}, Arn]}}, "
                     f"/Llama-3.3-70B-Instruct/{name}]]}}" for name in TOKENIZER_FILES}
    assert statements[("s3:ListBucket",)]["Condition"] == {
        "StringEquals": {"s3:prefix": ["Llama-3.3-70B-Instruct/"]}}
    write = _arn_text(statements[("s3:PutObject",)]["Resource"])
    assert write.endswith("/benchmarks/*]]}")


def test_the_service_account_carries_the_role(default_app: Synthesized) -> None:
    (access,) = default_app.stack.benchmark_access
    assert access.manifest is not None
    resource = default_app.template["Resources"][logical_id(access.manifest.node.default_child)]
    (account,) = rendered(resource["Properties"]["Manifest"], placeholder="ROLE")
    assert account["kind"] == "ServiceAccount" and account["metadata"]["name"] == "hyperpod-dpd-bench"
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "ROLE"}
    outputs = default_app.template["Outputs"]
    (output,) = [v for k, v in outputs.items() if k.startswith("BenchmarkRoleArn")]
    assert output["Value"] == {"Fn::GetAtt": [logical_id(access.role), "Arn"]}


def test_one_role_per_namespace_reading_its_own_models(multi_app: Synthesized) -> None:
    accesses = {a.namespace: a for a in multi_app.stack.benchmark_access}
    assert len(accesses) == len({s.namespace for s in multi_app.stack.endpoint_specs}) == 2
    for namespace, access in accesses.items():
        sub = next(v for k, v in _subjects(multi_app, logical_id(access.role)).items() if k.endswith(":sub"))
        assert sub == f"system:serviceaccount:{namespace}:hyperpod-dpd-bench"
        prefixes = {s.model.source.prefix for s in multi_app.stack.endpoint_specs
                    if s.namespace == namespace and isinstance(s.model.source, S3Source)}
        listed = next(s for s in policy_statements(multi_app, access.role) if s["Action"] == "s3:ListBucket")
        assert listed["Condition"]["StringEquals"]["s3:prefix"] == sorted(f"{p}/" for p in prefixes)


def test_no_twin_unless_asked(default_app: Synthesized) -> None:
    groups = default_app.one("AWS::SageMaker::Cluster")[1]["Properties"]["InstanceGroups"]
    assert not any(g["InstanceGroupName"].endswith("-aggregated") for g in groups)
    assert default_app.stack.aggregated_twins == []


def test_the_twin_gets_one_node_and_its_manifest(twin_app: Synthesized,
                                                 crd_errors: Callable[[Any], list[str]]) -> None:
    cluster = twin_app.one("AWS::SageMaker::Cluster")[1]
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    twin, prefill = groups["dpd-test-aggregated"], groups["dpd-test-prefill"]
    assert twin["InstanceCount"] == 1
    assert {k: v for k, v in twin.items() if k not in ("InstanceGroupName", "InstanceCount")} == {
        k: v for k, v in prefill.items() if k not in ("InstanceGroupName", "InstanceCount")}
    (aggregated,) = twin_app.stack.aggregated_twins
    resource = twin_app.template["Resources"][logical_id(aggregated.manifest.node.default_child)]
    (document,) = rendered(resource["Properties"]["Manifest"])
    assert crd_errors(document) == []
    assert document["metadata"]["name"] == "dpd-test-agg" and "pdSpec" not in document["spec"]
    # The twin reads the bucket the spec names, as the endpoint does (the stack creates that bucket).
    assert document["spec"]["modelSourceConfig"]["s3Storage"]["bucketName"] == "dpd-models-example"
    terms = document["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "sagemaker.amazonaws.com/instance-group-name", "operator": "In",
                                            "values": ["dpd-test-aggregated"]}]}]
    operator_addon = logical_id(twin_app.stack.operator.addon)
    assert operator_addon in resource.get("DependsOn", [])
    assert twin_app.stack.benchmark_access == []


@pytest.mark.parametrize(("key", "value"), [("aggregated_baseline", "yes"), ("benchmark", "off")])
def test_app_context_flags_must_be_true_or_false(app_module: ModuleType, key: str, value: str) -> None:
    with pytest.raises(SpecError) as caught:
        app_module.build({key: value})
    (problem,) = caught.value.problems
    assert problem.field == key and problem.value == value and "-c " in problem.fix


def test_an_empty_results_prefix_is_refused() -> None:
    from aws_cdk import aws_s3 as s3

    from hyperpod_dpd_cdk import BenchmarkAccess
    from hyperpod_dpd_cdk.inference_operator import IrsaTrust

    stack = cdk.Stack(cdk.App(), "Plain", env=cdk.Environment(region=REGION))
    trust = IrsaTrust(stack, "Trust", issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE",
                      provider_arn="arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/EXAMPLE")
    bucket = s3.Bucket(stack, "Weights")
    with pytest.raises(SpecError) as caught:
        BenchmarkAccess(stack, "Bench", trust=trust, namespace="default", model_bucket=bucket,
                        model_prefixes=["m"], results_prefix="/")
    (problem,) = caught.value.problems
    assert problem.field == "results_prefix" and "anywhere in the bucket" in problem.message


def test_the_app_writes_the_twin_manifest(app_module: ModuleType, twin_app: Synthesized, tmp_path: Any) -> None:
    written = app_module.write_manifests(twin_app.stack, tmp_path)
    assert [p.name for p in written] == ["default-dpd-test.yaml", "default-dpd-test-agg.yaml"]
    (twin,) = list(yaml.safe_load_all(written[1].read_text()))
    assert twin["kind"] == "InferenceEndpointConfig" and "pdSpec" not in twin["spec"]


def test_every_worker_fits_the_node_its_instance_group_builds(twin_app: Synthesized) -> None:
    """Audit N1: with ThreadsPerCore 1 a p5.48xlarge shows 96 CPUs; the twin asked for all 96 and never
    scheduled. Every manifest's CPU request must fit the group's CPUs (vCPUs / 2 x threads per core)
    less the kubelet's reservation (EKS AMI formula: 6% of one core, 1% of the next, 0.5% of two, 0.25%
    of the rest) and a share for the DaemonSets."""
    cluster = twin_app.one("AWS::SageMaker::Cluster")[1]
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    documents = [rendered(twin_app.template["Resources"][logical_id(t.manifest.node.default_child)]["Properties"]
                          ["Manifest"], placeholder="bucket")[0] for t in twin_app.stack.aggregated_twins]
    documents += [twin_app.stack.resolve(o) for e in twin_app.stack.endpoints for o in e.manifests()
                  if o["kind"] == "InferenceEndpointConfig"]
    assert len(documents) == 2
    for document in documents:
        terms = document["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"] if "nodeAffinity" in document["spec"] else []
        names = [v for t in terms for e in t["matchExpressions"] for v in e["values"]] or ["dpd-test-prefill"]
        group = groups[names[0]]
        cores = InstanceType.from_name(group["InstanceType"]).facts.vcpus // 2 * group["ThreadsPerCore"]
        kube_reserved = 0.06 + 0.01 + 2 * 0.005 + (cores - 4) * 0.0025
        daemonsets = 2.0  # generous: aws-node, kube-proxy, device plugins, CSI node pods, agents
        request = parse_quantity(document["spec"]["worker"]["resources"]["requests"]["cpu"])
        assert request <= cores - kube_reserved - daemonsets, (document["metadata"]["name"], request, cores)


def test_the_benchmark_nodes_are_an_output(default_app: Synthesized, existing_cluster_app: Synthesized) -> None:
    """bench audit D2: on an existing cluster no node carries the system pool label, so the stack says none."""
    assert default_app.template["Outputs"]["SystemNodeSelector"]["Value"] == "hyperpod-dpd/pool=system"
    assert existing_cluster_app.template["Outputs"]["SystemNodeSelector"]["Value"] == "none"
