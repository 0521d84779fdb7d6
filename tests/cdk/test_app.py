"""app.py: options from context, manifests next to the cloud assembly, clean errors."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk.cdk_support import REPO, Synthesized, second_spec, with_bucket

from hyperpod_dpd import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.loading import dump_spec_yaml
from hyperpod_dpd_cdk import HyperPodDpdStack


def test_default_app_region_and_account(default_app: Synthesized) -> None:
    assert default_app.stack.region == "us-west-2"
    assert default_app.stack.account.startswith("${Token")  # unresolved: no lookups, no credentials


def test_network_policies_are_written_beside_the_endpoint(existing_cluster_app: Synthesized, app_module: ModuleType,
                                                          tmp_path: Path) -> None:
    written = app_module.write_manifests(existing_cluster_app.stack, tmp_path)
    assert [p.name for p in written] == ["default-dpd-test.yaml", "default-dpd-test-network-policies.yaml"]
    policies = list(yaml.safe_load_all(written[1].read_text()))
    assert policies and {p["kind"] for p in policies} == {"NetworkPolicy"}
    assert {p["metadata"]["namespace"] for p in policies} == {"default"}


def test_manifests_are_written_for_reading(default_app: Synthesized, app_module: ModuleType,
                                           tmp_path: Path) -> None:
    (path,) = app_module.write_manifests(default_app.stack, tmp_path)
    assert path == tmp_path / "manifests" / "default-dpd-test.yaml"
    (manifest,) = list(yaml.safe_load_all(path.read_text()))
    assert manifest["kind"] == "InferenceEndpointConfig"
    # The bucket the spec names, which is the bucket the stack creates (not a rewrite to a generated name).
    assert manifest["spec"]["modelSourceConfig"]["s3Storage"]["bucketName"] == "dpd-models-example"
    bucket = default_app.template["Resources"]["ModelBucket220C70D9"]
    assert bucket["Properties"]["BucketName"] == "dpd-models-example"
    assert manifest["spec"]["pdSpec"]["decodingSpec"]["nodeSelector"] == {
        "sagemaker.amazonaws.com/instance-group-name": "dpd-test-decode"}


def test_bad_spec_file_exits_2_with_the_message(app_module: ModuleType, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nmodel: {name: m, source: {s3: {bucket: b, prefix: p}}}\nprefill: {replicas: 0}\n")
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "out"))
    assert app_module.main(["-c", f"spec={spec}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid DPD spec")
    assert "prefill.replicas" in err and "Traceback" not in err


def test_context_options(app_module: ModuleType, cdk_context: dict[str, Any], tmp_path: Path) -> None:
    spec = tmp_path / "team.yaml"
    spec.write_text(dump_spec_yaml(with_bucket(default_spec(), "team-weights")))
    context = {**cdk_context, "region": "us-east-2", "availability_zone_id": "use2-az1", "stack_name": "Dpd2",
               "admin_role_arns": "arn:aws:iam::111122223333:role/A,arn:aws:iam::111122223333:role/B",
               "model_bucket": "team-weights", "spec": str(spec)}
    _, stack = app_module.build(context)  # constructs only; no synth needed
    assert (stack.stack_name, stack.region) == ("Dpd2", "us-east-2")
    assert stack.network.availability_zone_id == "use2-az1"
    assert stack.model_bucket.created is False
    assert stack.endpoints[0].spec.model.source.bucket == "team-weights"


def test_the_spec_bucket_is_never_rewritten(app_module: ModuleType, cdk_context: dict[str, Any]) -> None:
    """-c model_bucket naming another bucket than the spec is an error, not a silent rewrite (bench-audit D1)."""
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, "model_bucket": "team-weights"})
    (problem,) = error.value.problems
    assert (problem.field, problem.value) == ("endpoints[0].model.source.s3.bucket", "dpd-models-example")
    assert "-c model_bucket=dpd-models-example" in problem.fix


def _warning_codes(synthesized: Synthesized) -> list[str]:
    messages = synthesized.app.synth().get_stack_artifact(synthesized.stack.artifact_id).messages
    return [code for m in messages for code in re.findall(r"hyperpod-dpd:(\w+)", json.dumps(m.entry.data))]


def test_the_example_bucket_name_is_flagged_before_a_deploy(default_app: Synthesized,
                                                             multi_app: Synthesized) -> None:
    """Bucket names are global: creating the embedded example's bucket fails wherever someone owns it."""
    assert "ExampleBucketName" in _warning_codes(default_app)
    assert "ExampleBucketName" not in _warning_codes(multi_app)  # its specs name a bucket of their own


def test_endpoints_of_one_stack_share_the_bucket(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(app, "Two", env=cdk.Environment(region="us-west-2"),
                         endpoints=[default_spec(), dataclasses.replace(second_spec(), name="other")])
    assert [p.field for p in error.value.problems] == ["endpoints[1].model.source.s3.bucket"]


def test_a_created_bucket_is_in_the_stack_region(cdk_context: dict[str, Any]) -> None:
    spec = default_spec()
    away = dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=dataclasses.replace(
        spec.model.source, region="eu-west-1")))
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(cdk.App(context=cdk_context), "Away", env=cdk.Environment(region="us-west-2"),
                         endpoints=[away])
    assert [p.field for p in error.value.problems] == ["endpoints[0].model.source.s3.region"]


def test_existing_cluster_needs_its_issuer(app_module: ModuleType, cdk_context: dict[str, Any]) -> None:
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, "eks_cluster": "platform"})
    assert error.value.problems[0].field == "oidc_issuer_url"


def test_existing_vpc_from_context(app_module: ModuleType, cdk_context: dict[str, Any]) -> None:
    context = {**cdk_context, "vpc_id": "vpc-0123456789abcdef0",
               "eks_subnets": "us-west-2a=subnet-0aaa0000000000001,us-west-2b=subnet-0bbb0000000000002",
               "hyperpod_subnets": "usw2-az2=subnet-0ccc0000000000003"}
    _, stack = app_module.build(context)
    assert stack.network.hyperpod_subnet.subnet_id == "subnet-0ccc0000000000003"
    with pytest.raises(SpecError) as error:
        app_module.build({**context, "hyperpod_subnets": "usw2-az1=subnet-0ddd0000000000004"})
    assert error.value.problems[0].field == "availability_zone_id"


def test_context_problems_are_reported_together(app_module: ModuleType, cdk_context: dict[str, Any]) -> None:
    """An empty spec= and a misspelt key used to deploy the default silently (first-hour audit F2)."""
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, "spec": "", "availabilty_zone_id": "usw2-az1", "benchmark": "maybe",
                          "admin_role_arns": " "})
    problems = {p.field: p for p in error.value.problems}
    assert list(problems) == ["spec", "availabilty_zone_id", "benchmark", "admin_role_arns"]
    assert problems["availabilty_zone_id"].fix == "did you mean -c availability_zone_id=...?"
    assert "is empty" in problems["spec"].message and "is empty" in problems["admin_role_arns"].message
    assert str(error.value).startswith("invalid CDK context")


def test_cdk_own_context_keys_pass(app_module: ModuleType) -> None:
    ok = {"@aws-cdk/core:newStyleStackSynthesis": True, "aws:cdk:enable-path-metadata": True,
          "availability-zones:account=111122223333:region=us-west-2": ["us-west-2a"], "region": "us-west-2"}
    assert app_module.context_problems(ok) == []


def test_the_launcher_usage_text_is_the_table(app_module: ModuleType) -> None:
    """app.py's docstring (the app's usage text) quotes the one table, key by key, so neither can drift."""
    doc = ast.get_docstring(ast.parse((REPO / "app.py").read_text(encoding="utf-8")), clean=False)
    assert doc is not None and app_module.context_usage() in doc, "paste hyperpod_dpd_cdk.app.context_usage()"
    assert all(f"    {key.name}=" in doc for key in app_module.CONTEXT_KEYS)


def test_every_context_key_the_app_reads_is_declared(app_module: ModuleType) -> None:
    """A key read but not declared would be refused as unknown; one declared but not read is a dead option."""
    source = Path(app_module.__file__).read_text(encoding="utf-8")
    read = set(re.findall(r'(?:ctx|context\.get)\("([a-z_]+)"\)|_flag\(context, "([a-z_]+)"', source))
    names = {a or b for a, b in read}
    declared = {key.name for key in app_module.CONTEXT_KEYS}
    assert names - declared == set()
    assert declared - names == set()


def test_every_context_key_is_in_the_stack_page(app_module: ModuleType) -> None:
    """docs/stack.md's option table lists every key, so a new option cannot go undocumented there."""
    page = (REPO / "docs" / "stack.md").read_text(encoding="utf-8")
    missing = [key.name for key in app_module.CONTEXT_KEYS if f"`{key.name}`" not in page]
    assert missing == []


def test_empty_context_exits_2_from_python_app(app_module: ModuleType, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    monkeypatch.setenv("CDK_OUTDIR", str(tmp_path / "out"))
    assert app_module.main(["-c", "spec=", "-c", "availabilty_zone_id=usw2-az1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: invalid CDK context") and "Traceback" not in err


def test_cdk_cli_context_is_checked_too(cdk_context: dict[str, Any], tmp_path: Path) -> None:
    """Under `cdk synth` the context arrives as CDK_CONTEXT_JSON: the app exits 2 with the message, no traceback."""
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({**cdk_context, "aws:cdk:enable-path-metadata": True,
                                                         "spec": ""}),
           "CDK_OUTDIR": str(tmp_path / "out"), "PYTHONPATH": os.pathsep.join(
               [str(REPO / "k8s"), str(REPO / "constructs"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(REPO / "app.py")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: invalid CDK context") and "Traceback" not in done.stderr
    assert "spec: is empty" in done.stderr


def test_topology_zone_of_another_region_is_refused(app_module: ModuleType, cdk_context: dict[str, Any],
                                                    tmp_path: Path) -> None:
    """First-hour audit F4: us-east-1a in a us-west-2 stack passed every check."""
    spec = default_spec()
    away = dataclasses.replace(spec, topology=dataclasses.replace(spec.topology, availability_zone="us-east-1a"),
                               prefill=dataclasses.replace(spec.prefill, node_selector={
                                   "topology.k8s.aws/zone-id": "usw2-az1"}))
    path = tmp_path / "away.yaml"
    path.write_text(dump_spec_yaml(away))
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, "spec": str(path)})
    assert [p.field for p in error.value.problems] == [
        "endpoints[0].topology.availability_zone", "endpoints[0].prefill.node_selector['topology.k8s.aws/zone-id']"]
    assert "us-west-2" in error.value.problems[0].message
    assert "usw2-az2" in error.value.problems[1].message


def test_endpoint_names_that_share_an_output_key_are_refused(cdk_context: dict[str, Any]) -> None:
    spec = default_spec()
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(cdk.App(context=cdk_context), "Keys", env=cdk.Environment(region="us-west-2"),
                         endpoints=[dataclasses.replace(spec, name="a-b", endpoint_name="a-b"),
                                    dataclasses.replace(spec, name="a--b", endpoint_name="a--b")])
    assert [(p.field, p.value) for p in error.value.problems] == [("endpoints[1].name", "a--b")]


def test_existing_namespaces_reach_the_existing_cluster() -> None:
    """``-c existing_namespaces``: the specs' namespaces a shared cluster has, used and never created or deleted."""
    from hyperpod_dpd_cdk.app import stack_options

    _, options = stack_options({"eks_cluster": "platform", "oidc_issuer_url": "https://oidc.example/id/X",
                                "existing_namespaces": "team-a, team-b"})
    assert options["existing_cluster"].namespaces == ("team-a", "team-b")
