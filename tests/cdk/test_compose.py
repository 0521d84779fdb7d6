"""HyperPodDpd in a stack of your own, as docs/stack.md shows; endpoints added later; the stack's logical ids."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import cdk_nag
import pytest
import yaml
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from cdk.cdk_support import REPO, Synthesized, hf_source, second_spec, with_bucket
from support import slo_autoscaled

from hyperpod_dpd import DpdSpec, SpecError, dump_spec_yaml
from hyperpod_dpd.cli import main
from hyperpod_dpd.contracts import stack_outputs
from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ClusterOptions, HyperPodDpd, HyperPodDpdStack, HyperPodOptions, ObservabilityOptions
from hyperpod_dpd_cdk.hyperpod_dpd import Composition

KUBERNETES_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"


def _own_stack_snippet() -> str:
    """The first Python block of docs/stack.md's "Using the constructs in your own stack"."""
    page = (REPO / "docs" / "stack.md").read_text(encoding="utf-8")
    section = page.split("## Using the constructs in your own stack\n", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def _endpoint_manifests(template: dict[str, Any]) -> list[str]:
    """The manifests the template applies that hold an InferenceEndpointConfig, as text."""
    manifests = [json.dumps(r["Properties"]["Manifest"]) for r in template["Resources"].values()
                 if r["Type"] == KUBERNETES_RESOURCE]
    return [m for m in manifests if "InferenceEndpointConfig" in m]


def test_the_docs_snippet_synthesizes_two_endpoints_beside_your_own_resource(
        cdk_context: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As `cdk synth` runs it: cdk.json's context and the output folder come through the environment.
    monkeypatch.setenv("CDK_CONTEXT_JSON", json.dumps(cdk_context))
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path))
    namespace: dict[str, Any] = {}
    exec(compile(_own_stack_snippet(), "docs/stack.md", "exec"), namespace)  # the page's own code, as written
    app, stack = namespace["app"], namespace["stack"]
    template = app.synth().get_stack_artifact(stack.artifact_id).template

    buckets = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::S3::Bucket"]
    assert any(k.startswith("Reports") for k in buckets), buckets
    manifests = _endpoint_manifests(template)
    assert len(manifests) == 2
    outputs = template["Outputs"]
    for name in ("dpd-test", "dpd-small"):
        assert any(f'\\"name\\":\\"{name}\\"' in manifest for manifest in manifests), name
        assert outputs[stack_outputs.endpoint_output_key(name)]["Value"]
    assert {stack_outputs.REGION, stack_outputs.EKS_CLUSTER, stack_outputs.HYPERPOD_CLUSTER} <= set(outputs)
    groups = next(v for v in template["Resources"].values() if v["Type"] == "AWS::SageMaker::Cluster")
    assert [g["InstanceGroupName"] for g in groups["Properties"]["InstanceGroups"]] == [
        "dpd-test-prefill", "dpd-test-decode", "dpd-small-prefill", "dpd-small-decode"]


def _platform(cdk_context: dict[str, Any], initial: list[DpdSpec], later: list[DpdSpec],
              **props: Any) -> tuple[cdk.App, dict[str, Any]]:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region="us-west-2"))
    platform = HyperPodDpd(stack, "Inference", endpoints=initial, **props)
    for spec in later:
        platform.add_endpoint(spec)
    template: dict[str, Any] = app.synth().get_stack_artifact(stack.artifact_id).template
    return app, template


def _statements_sorted(template: dict[str, Any]) -> dict[str, Any]:
    """The template with each IAM policy's statements in a fixed order (their order grants nothing)."""
    copy = json.loads(json.dumps(template))
    for resource in copy["Resources"].values():
        document = resource.get("Properties", {}).get("PolicyDocument")
        if resource["Type"] == "AWS::IAM::Policy" and document:
            document["Statement"] = sorted(document["Statement"], key=lambda s: json.dumps(s, sort_keys=True))
    return copy


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_an_endpoint_added_later_gives_the_same_template(cdk_context: dict[str, Any]) -> None:
    """Instance groups, the roles' prefixes, the teardown's names, rule groups, dashboards, benchmark roles, twins,
    outputs: all the same whether the endpoint came at construction or through add_endpoint."""
    first = with_bucket(default_spec(), "my-weights")
    first = dataclasses.replace(first, model=dataclasses.replace(first.model, source=dataclasses.replace(
        first.model.source, prefix="zz/Llama-3.3-70B-Instruct")))  # sorts after the next one's prefix
    same_namespace = dataclasses.replace(second_spec(), namespace=first.namespace)
    staged = hf_source(dataclasses.replace(default_spec(), name="hf-small", endpoint_name="hf-small"),
                       "meta-llama/Llama-3.1-8B-Instruct", revision="0" * 40)
    props = {"aggregated_baseline": True, "cluster": ClusterOptions(network_policies=True),
             "observability": ObservabilityOptions(grafana_workspace_id="g-0123456789")}
    app, together = _platform(cdk_context, [first, same_namespace, staged], [], **props)
    assert together == _platform(cdk_context, [first], [same_namespace, staged], **props)[1]
    # Created empty (the cluster now, the endpoints later), as eks.Cluster is filled with add_* calls: the same
    # resources, and the same policies with their statements in another order (the first endpoint places them).
    empty_first = _platform(cdk_context, [], [first, same_namespace, staged], **props)[1]
    assert _statements_sorted(together) == _statements_sorted(empty_first)
    assert cdk_nag.AwsSolutionsChecks().validate_scope(app).violations == []  # nested in a stack of yours


def test_a_platform_left_empty_fails_at_synthesis_naming_add_endpoint(cdk_context: dict[str, Any]) -> None:
    with pytest.raises(RuntimeError) as error:
        _platform(cdk_context, [], [], benchmark=False, observability=None)
    assert ("endpoints: is still empty at synthesis: a HyperPod cluster needs at least one instance group"
            in str(error.value))
    assert "Fix: call add_endpoint(spec) before the app synthesizes" in str(error.value)


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_an_s3_endpoint_added_after_a_staged_one_names_the_created_bucket(cdk_context: dict[str, Any]) -> None:
    staged = hf_source(default_spec(), "meta-llama/Llama-3.1-8B-Instruct", revision="0" * 40)
    reads_s3 = with_bucket(second_spec(), "my-weights")
    _, together = _platform(cdk_context, [staged, reads_s3], [], benchmark=False, observability=None)
    assert together == _platform(cdk_context, [staged], [reads_s3], benchmark=False, observability=None)[1]
    (bucket,) = [v for k, v in together["Resources"].items()
                 if k.startswith("InferenceModelBucket") and v["Type"] == "AWS::S3::Bucket"]
    assert bucket["Properties"]["BucketName"] == "my-weights"


def _endpoint_config(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [d for d in documents if d and d["kind"] == "InferenceEndpointConfig"]
    return found


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_an_added_slo_autoscaled_endpoint_is_the_one_the_cli_synthesizes(cdk_context: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    # Unpinned: add_endpoint computes one replica's capacity at the SLO with the advisor, as synth does.
    spec = slo_autoscaled()
    path = tmp_path / "spec.yaml"
    path.write_text(dump_spec_yaml(spec), encoding="utf-8")
    assert main(["synth", str(path), "--output-dir", str(tmp_path / "out")]) == 0
    (written,) = (tmp_path / "out").iterdir()
    synthesized = _endpoint_config(list(yaml.safe_load_all(written.read_text(encoding="utf-8"))))

    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region="us-west-2"))
    first = dataclasses.replace(second_spec(), model=spec.model)  # one stack, one model bucket
    platform = HyperPodDpd(stack, "Inference", endpoints=[first], observability=None, benchmark=False)
    endpoint = platform.add_endpoint(spec)
    added = _endpoint_config(stack.resolve(endpoint.manifests()))
    # The stack places each role on its instance group; the rest, the compiled triggers included, is synth's.
    for key, role in (("prefillSpec", "prefill"), ("decodingSpec", "decode")):
        assert added["spec"]["pdSpec"][key].pop("nodeSelector") == {INSTANCE_GROUP_LABEL: f"dpd-test-{role}"}
    assert added == synthesized
    assert added["spec"]["pdSpec"]["autoScalingSpec"]["decodingAutoScaling"]["prometheusTriggerList"]
    assert endpoint.spec.decode.autoscaling.slo.capacity_tokens_per_s is not None  # type: ignore[union-attr]


def test_an_added_endpoint_is_checked_with_the_others_before_anything_is_added(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region="us-west-2"))
    platform = HyperPodDpd(stack, "Inference", endpoints=[default_spec()], observability=None)
    children = len(platform.node.children)
    again = dataclasses.replace(default_spec(), prefill=dataclasses.replace(default_spec().prefill, replicas=0))
    with pytest.raises(SpecError) as error:
        platform.add_endpoint(again)
    fields = {p.field: p for p in error.value.problems}
    assert {"endpoints[1].name", "endpoints[1].endpoint_name", "endpoints[1].prefill.replicas"} <= set(fields)
    assert fields["endpoints[1].name"].value == "dpd-test" and fields["endpoints[1].name"].fix
    assert len(platform.node.children) == children and len(platform.endpoints) == 1


def test_your_roles_and_bucket_objects(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region="us-west-2"))
    weights = s3.Bucket(stack, "Weights", bucket_name="my-weights", enforce_ssl=True)
    admin = iam.Role(stack, "Admin", assumed_by=iam.AccountRootPrincipal())
    platform = HyperPodDpd(stack, "Inference", endpoints=[with_bucket(default_spec(), "my-weights")],
                           model_bucket=weights, observability=None, benchmark=False,
                           hyperpod=HyperPodOptions(cluster_name="platform-hp"),
                           cluster=ClusterOptions(admins=[admin, "arn:aws:iam::111122223333:role/PlatformAdmin"]))
    assert platform.model_bucket.bucket is weights and not platform.model_bucket.created
    template = app.synth().get_stack_artifact(stack.artifact_id).template
    buckets = [k for k, v in template["Resources"].items() if v["Type"] == "AWS::S3::Bucket"]
    assert not any(k.startswith("InferenceModelBucket") for k in buckets), buckets
    principals = [v["Properties"]["PrincipalArn"] for v in template["Resources"].values()
                  if v["Type"] == "AWS::EKS::AccessEntry"]
    assert {"Fn::GetAtt": [stack.get_logical_id(admin.node.default_child), "Arn"]} in principals
    assert "arn:aws:iam::111122223333:role/PlatformAdmin" in principals
    with pytest.raises(SpecError) as error:  # a name known only at deploy time cannot be checked against the spec
        HyperPodDpd(cdk.Stack(app, "Other", env=cdk.Environment(region="us-west-2")), "Inference",
                    endpoints=[default_spec()], model_bucket=s3.Bucket(stack, "Unnamed"))
    assert [p.field for p in error.value.problems] == ["model_bucket"]


# The stateful resources of HyperPodDpdStack, by logical id: a rename replaces the cluster, the bucket or the
# workspace of every deployed stack. These are the ids the stack had before HyperPodDpd existed; they must stay.
STATEFUL = ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::S3::Bucket", "AWS::KMS::Key", "AWS::EKS::Cluster",
            "AWS::SageMaker::Cluster", "AWS::APS::Workspace", "AWS::Logs::LogGroup", "AWS::SecretsManager::Secret")
NEW_VPC = {
    "AWS::EC2::VPC": ["NetworkVpc7FB7348F"],
    "AWS::EC2::Subnet": ["NetworkHyperPodSubnetA76FCEC8", "NetworkVpcPrivateSubnet1Subnet6DD86AE6",
                         "NetworkVpcPrivateSubnet2Subnet1BDBE877", "NetworkVpcPublicSubnet1Subnet36933139",
                         "NetworkVpcPublicSubnet2SubnetC427CCE0"],
}
BUCKETS = ["AccessLogs247031D9", "InferenceOperatorTlsBucket9EED7E0D", "LifecycleScriptsBucketBB67840B",
           "ModelBucket220C70D9"]
DEPLOYMENT_LOGS = "CustomCDKBucketDeployment8693BB64968944B69AAFB0CC9EB8756CLogGroup817B64E9"
LOGICAL_IDS = {
    "default": {
        **NEW_VPC, "AWS::S3::Bucket": BUCKETS,
        "AWS::KMS::Key": ["EksSecretsKey89C78FFD", "ObservabilityTopicKey41264573"],
        "AWS::EKS::Cluster": ["EksBC5472D2"], "AWS::SageMaker::Cluster": ["HyperPodED6AB1C4"],
        "AWS::APS::Workspace": ["ObservabilityWorkspace168A9E8F"],
        "AWS::Logs::LogGroup": [DEPLOYMENT_LOGS, "EksKubectlProviderHandlerLogGroup469A3006",
                                "EksKubectlProviderframeworkonEventLogGroup6C228DAD", "NetworkFlowLogs2BEC3212",
                                "ObservabilityContainerLogsF78DB9C9", "TeardownLogsC474B3B6"],
        "AWS::SecretsManager::Secret": [],
    },
    "existing-cluster": {
        "AWS::EC2::VPC": [], "AWS::EC2::Subnet": [], "AWS::S3::Bucket": BUCKETS,
        "AWS::KMS::Key": ["ObservabilityTopicKey41264573"], "AWS::EKS::Cluster": [],
        "AWS::SageMaker::Cluster": ["HyperPodED6AB1C4"], "AWS::APS::Workspace": ["ObservabilityWorkspace168A9E8F"],
        "AWS::Logs::LogGroup": [DEPLOYMENT_LOGS, "EksKubectlProviderHandlerLogGroup66A40A22",
                                "EksKubectlProviderframeworkonEventLogGroupEAFA1F94",
                                "ObservabilityContainerLogsF78DB9C9", "TeardownLogsC474B3B6"],
        "AWS::SecretsManager::Secret": [],
    },
    "hf-staged": {
        **NEW_VPC, "AWS::S3::Bucket": BUCKETS, "AWS::KMS::Key": ["EksSecretsKey89C78FFD"],
        "AWS::EKS::Cluster": ["EksBC5472D2"], "AWS::SageMaker::Cluster": ["HyperPodED6AB1C4"],
        "AWS::APS::Workspace": [],
        "AWS::Logs::LogGroup": [DEPLOYMENT_LOGS, "EksKubectlProviderHandlerLogGroup469A3006",
                                "EksKubectlProviderframeworkonEventLogGroup6C228DAD", "NetworkFlowLogs2BEC3212",
                                "TeardownLogsC474B3B6"],
        "AWS::SecretsManager::Secret": ["HuggingFaceToken7442CC3C"],
    },
}


@pytest.mark.parametrize("name", sorted(LOGICAL_IDS))
def test_the_stateful_resources_keep_their_logical_ids(all_apps: dict[str, Synthesized], name: str) -> None:
    found = {type_: sorted(all_apps[name].resources(type_)) for type_ in STATEFUL}
    assert found == LOGICAL_IDS[name]


def test_a_second_platform_in_one_stack_is_refused_with_the_fix() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region="us-west-2"))
    HyperPodDpd(stack, "First", endpoints=[default_spec()])
    with pytest.raises(SpecError) as raised:
        HyperPodDpd(stack, "Second", endpoints=[dataclasses.replace(default_spec(), name="dpd-two")])
    (problem,) = [p for p in raised.value.problems if p.field == "HyperPodDpd"]
    assert problem.value == "Platform/Second"
    assert "Platform/First" in problem.message and "add_endpoint" in problem.fix


def test_the_snippet_keeps_hyperpod_dpd_first_through_ruffs_import_sorting(tmp_path: Path) -> None:
    # ruff's isort rule used to move `import hyperpod_dpd` below `import aws_cdk`, where it is too late for jsii.
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    snippet = tmp_path / "app.py"
    snippet.write_text(_own_stack_snippet())
    done = subprocess.run([ruff, "check", "--isolated", "--select", "I", "--fix", "--quiet", str(snippet)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    imports = [line for line in snippet.read_text().splitlines() if line.startswith(("import ", "from "))]
    assert imports.index("import hyperpod_dpd  # first: it points jsii at the packaged Node.js") < imports.index(
        "import aws_cdk as cdk")
    assert snippet.read_text() == _own_stack_snippet()  # nothing for the sorter to change


def test_help_shows_every_default_and_the_docs_name_every_public_attribute() -> None:
    # IDE help showed `weights_staging_timeout: Duration = <aws_cdk.Duration object at 0x7f...>`.
    for construct in (HyperPodDpd, HyperPodDpdStack):
        for parameter in inspect.signature(construct.__init__).parameters.values():
            assert " object at 0x" not in repr(parameter.default), (construct.__name__, parameter.name)
    page = (REPO / "docs" / "stack.md").read_text(encoding="utf-8")
    doc = HyperPodDpd.__doc__ or ""
    public = [name for name in typing.get_type_hints(Composition) if not name.startswith("_")]
    assert len(public) > 15
    for name in [*public, "cluster_name"]:
        assert f"``{name}``" in doc, name
        assert f"`{name}`" in page, name
