"""Every Kubernetes object the stacks apply validates: the InferenceEndpointConfig against the real
CRD, everything else against the Kubernetes schemas of the cluster's version (strict: unknown fields are errors)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest

from hyperpod_dpd_cdk.versions import KUBERNETES_VERSION

MANIFEST_TYPE = "Custom::AWSCDK-EKS-KubernetesResource"
DEPLOY_TIME = "resolved-at-deploy-time"


def _text(value: Any) -> str:
    """A ``Manifest`` property as JSON text; CloudFormation references become a placeholder string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(part if isinstance(part, str) else DEPLOY_TIME for part in parts)
    raise AssertionError(f"unexpected Manifest value {value!r}")


def _objects(app: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for resource in app.resources(MANIFEST_TYPE).values():
        found += json.loads(_text(resource["Properties"]["Manifest"]))
    return found


@pytest.mark.parametrize("name", ["default", "multi", "existing-cluster", "hf-staged"])
def test_applied_manifests_validate(name: str, all_apps: dict[str, Any],
                                    crd_errors: Callable[[dict[str, Any]], list[str]]) -> None:
    objects = _objects(all_apps[name])
    kinds = [o["kind"] for o in objects]
    assert "InferenceEndpointConfig" in kinds
    for obj in objects:
        if obj["kind"] == "InferenceEndpointConfig":
            assert crd_errors(obj) == [], obj["metadata"]["name"]
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_multi_endpoint_stack_applies_its_namespace(all_apps: dict[str, Any]) -> None:
    kinds = sorted((o["kind"], o["metadata"].get("namespace", "")) for o in _objects(all_apps["multi"]))
    assert ("Namespace", "") in kinds
    assert ("InferenceEndpointConfig", "inference") in kinds


def test_strict_kubernetes_validation_rejects_unknown_fields() -> None:
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"},
                                      "spek": {}}, KUBERNETES_VERSION, strict=True)
