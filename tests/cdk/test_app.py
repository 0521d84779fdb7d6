"""app.py: options from context, manifests next to the cloud assembly, clean errors."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from cdk_support import Synthesized

from hyperpod_dpd import SpecError


def test_default_app_region_and_account(default_app: Synthesized) -> None:
    assert default_app.stack.region == "us-west-2"
    assert default_app.stack.account.startswith("${Token")  # unresolved: no lookups, no credentials


def test_manifests_are_written_for_reading(default_app: Synthesized, app_module: ModuleType,
                                           tmp_path: Path) -> None:
    (path,) = app_module.write_manifests(default_app.stack, tmp_path)
    assert path == tmp_path / "manifests" / "default-dpd-test.yaml"
    (manifest,) = list(yaml.safe_load_all(path.read_text()))
    assert manifest["kind"] == "InferenceEndpointConfig"
    assert manifest["spec"]["modelSourceConfig"]["s3Storage"]["bucketName"] == {"Ref": "ModelBucket220C70D9"}
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


def test_context_options(app_module: ModuleType, cdk_context: dict[str, Any]) -> None:
    context = {**cdk_context, "region": "us-east-2", "availability_zone_id": "use2-az1", "stack_name": "Dpd2",
               "admin_role_arns": "arn:aws:iam::111122223333:role/A,arn:aws:iam::111122223333:role/B",
               "model_bucket": "team-weights"}
    _, stack = app_module.build(context)  # constructs only; no synth needed
    assert (stack.stack_name, stack.region) == ("Dpd2", "us-east-2")
    assert stack.network.availability_zone_id == "use2-az1"
    assert stack.model_bucket.created is False
    assert stack.endpoints[0].spec.model.source.bucket == "team-weights"


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
