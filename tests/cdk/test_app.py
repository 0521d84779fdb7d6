"""app.py: options from context, manifests next to the cloud assembly, clean errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk_support import Synthesized, second_spec, with_bucket

from hyperpod_dpd import SpecError
from hyperpod_dpd.defaults import default_spec
from hyperpod_dpd.loading import spec_to_yaml
from hyperpod_dpd_cdk import HyperPodDpdStack


def test_default_app_region_and_account(default_app: Synthesized) -> None:
    assert default_app.stack.region == "us-west-2"
    assert default_app.stack.account.startswith("${Token")  # unresolved: no lookups, no credentials


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
    spec.write_text(spec_to_yaml(with_bucket(default_spec(), "team-weights")))
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
