"""verify's live-CRD comparison, fed CRD objects shaped as the API server returns them
(apiextensions.k8s.io/v1 CustomResourceDefinition, spec.versions[].schema.openAPIV3Schema)."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes.client.exceptions import ApiException

from hyperpod_dpd.crd import v1_schema
from hyperpod_dpd.ops.checks import Status
from hyperpod_dpd.ops.crd_diff import CRD_NAME, check_live_crd, diff
from hyperpod_dpd.ops.kube import KubeApi


def crd(schema: dict[str, Any] | None = None, version: str = "v1") -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD_NAME},
            "spec": {"group": "inference.sagemaker.aws.amazon.com", "versions": [
                {"name": version, "served": True, "storage": True,
                 "schema": {"openAPIV3Schema": copy.deepcopy(v1_schema()) if schema is None else schema}}]}}


class Customs:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, ...]] = []

    def get_namespaced_custom_object(self, *args: str) -> Any:
        raise AssertionError("not used")

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> Any:
        self.calls.append((group, version, plural, name))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def kube(answer: Any) -> KubeApi:
    return KubeApi(custom=Customs(answer), apps=None, core=None)  # type: ignore[arg-type]


def test_the_same_crd_passes() -> None:
    api = kube(crd())
    row = check_live_crd(api)
    assert (row.status, row.detail) == (Status.PASS, "the live CRD has exactly the fields of the shipped one")
    assert api.custom.calls == [("apiextensions.k8s.io", "v1", "customresourcedefinitions", CRD_NAME)]  # type: ignore[attr-defined]


def test_a_newer_operator_with_an_added_field_is_listed() -> None:
    live = crd()
    spec = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec["modelCacheConfig2"] = {"type": "object", "properties": {"enabled": {"type": "boolean"}}}
    assert diff(live) == (["spec.modelCacheConfig2", "spec.modelCacheConfig2.enabled"], [])
    row = check_live_crd(kube(live))
    assert row.status is Status.PASS and "spec.modelCacheConfig2" in row.detail


def test_a_removed_field_fails() -> None:
    live = crd()
    spec = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    del spec["endpointName"]
    row = check_live_crd(kube(live))
    assert row.status is Status.FAIL and "spec.endpointName" in row.detail


def test_a_missing_crd_or_version_fails_and_an_api_error_is_an_error() -> None:
    assert check_live_crd(kube(ApiException(status=404, reason="Not Found"))).status is Status.FAIL
    assert check_live_crd(kube(crd(version="v1alpha1"))).status is Status.FAIL
    assert check_live_crd(kube(ApiException(status=403, reason="Forbidden"))).status is Status.ERROR
