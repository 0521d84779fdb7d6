"""Every documented model source synthesizes: FSx and PVC specs read no S3, so no role reads the model bucket."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import aws_cdk as cdk
import pytest
from cdk.cdk_support import REGION, synthesize
from cdk.cdk_template_queries import depends_on

from hyperpod_dpd import DpdSpec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.model import FsxSource, ModelSource, VolumeSource
from hyperpod_dpd_cdk import HyperPodDpdStack

MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"


def _with_source(source: ModelSource, spec: DpdSpec | None = None) -> DpdSpec:
    spec = spec or default_spec()
    return dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=source))


def _endpoint_config(template: dict[str, Any], name: str) -> dict[str, Any]:
    for resource in template["Resources"].values():
        if resource["Type"] != MANIFEST_TYPE:
            continue
        manifest = resource["Properties"]["Manifest"]
        if isinstance(manifest, dict):  # Fn::Join of JSON text with deploy-time references
            separator, parts = manifest["Fn::Join"]
            manifest = separator.join(p if isinstance(p, str) else "deploy-time" for p in parts)
        for obj in json.loads(manifest):
            if obj["kind"] == "InferenceEndpointConfig" and obj["metadata"]["name"] == name:
                return obj  # type: ignore[no-any-return]
    raise AssertionError(f"no InferenceEndpointConfig {name!r}")


def _synth(specs: list[DpdSpec], tmp_path: Any, cdk_context: dict[str, Any]) -> Any:
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    stack = HyperPodDpdStack(app, "Sources", env=cdk.Environment(region=REGION), endpoints=specs,
                             benchmark=False, observability=False)
    return synthesize(app, stack)


FSX = FsxSource(file_system_id="fs-0123456789abcdef0", path="Llama-3.3-70B-Instruct",
                dns_name="fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", mount_name="abcdefgh")
PVC = VolumeSource(claim_name="llama-weights", path="Llama-3.3-70B-Instruct")


@pytest.mark.parametrize(("source", "expected"), [
    (FSX, {"modelSourceType": "fsx", "modelLocation": "Llama-3.3-70B-Instruct",
           "fsxStorage": {"fileSystemId": "fs-0123456789abcdef0",
                          "dnsName": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "mountName": "abcdefgh"}}),
    (PVC, {"modelSourceType": "kubernetesVolume", "modelLocation": "Llama-3.3-70B-Instruct"}),
], ids=["fsx", "pvc"])
def test_a_source_that_reads_no_s3_synthesizes(source: ModelSource, expected: dict[str, Any], tmp_path: Any,
                                               cdk_context: dict[str, Any]) -> None:
    spec = _with_source(source)
    s = _synth([spec], tmp_path, cdk_context)
    config = _endpoint_config(s.template, spec.name)
    assert config["spec"]["modelSourceConfig"] == expected
    if isinstance(source, VolumeSource):
        volumes = config["spec"]["kubernetes"]["volumes"]
        assert [v["persistentVolumeClaim"]["claimName"] for v in volumes] == ["llama-weights"]
    # No prefix to read: the S3 CSI driver's role has no inline policy at all.
    csi_role = s.stack.operator.s3_csi_role
    assert csi_role.node.try_find_child("DefaultPolicy") is None


def test_an_s3_endpoint_added_later_still_orders_the_csi_driver_after_its_policy(
        tmp_path: Any, cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context, outdir=str(tmp_path))
    stack = HyperPodDpdStack(app, "Later", env=cdk.Environment(region=REGION), endpoints=[_with_source(FSX)],
                             benchmark=False, observability=False)
    second = dataclasses.replace(default_spec(), name="s3-dpd", endpoint_name="s3-dpd")
    stack.add_endpoint(second)
    s = synthesize(app, stack)
    assert stack.operator.s3_csi is not None
    policy = stack.operator.s3_csi_role.node.find_child("DefaultPolicy").node.default_child
    assert isinstance(policy, cdk.CfnElement) and isinstance(stack.operator.s3_csi, cdk.CfnElement)
    assert depends_on(s.template, stack.get_logical_id(stack.operator.s3_csi), stack.get_logical_id(policy))
