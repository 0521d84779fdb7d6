"""verify's live-CRD comparison, fed CRD objects shaped as the API server returns them
(apiextensions.k8s.io/v1 CustomResourceDefinition, spec.versions[].schema.openAPIV3Schema)."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes.client.exceptions import ApiException

from hyperpod_dpd.charts.inference_endpoint_config import render_inference_endpoint_config
from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.contracts.crd import v1_schema
from hyperpod_dpd.ops.crd_diff import CRD_NAME, check_live_crd, diff, field_paths, set_paths
from hyperpod_dpd.spec import DpdSpec


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
    assert check_live_crd(kube(ApiException(status=500, reason="Internal Server Error"))).status is Status.ERROR


def test_no_rbac_for_crds_is_a_skip_naming_it() -> None:
    row = check_live_crd(kube(ApiException(status=403, reason="Forbidden")))
    assert row.status is Status.SKIP
    assert "get on customresourcedefinitions.apiextensions.k8s.io (cluster-scoped)" in row.detail
    assert "--no-crd-diff" in row.detail


def _without(path: str) -> dict[str, Any]:
    """The shipped CRD less one field (``spec.pdSpec.routingThreshold``)."""
    live = crd()
    node = live["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    *parents, leaf = path.split(".")
    for name in parents:
        node = node["properties"][name]
    del node["properties"][leaf]
    return live


def test_set_paths_name_fields_as_field_paths_do(spec: DpdSpec) -> None:
    manifest = render_inference_endpoint_config(spec)
    used = set(set_paths(manifest, v1_schema()))
    assert {"spec.pdSpec.routingThreshold", "spec.worker.environmentVariables[].name",
            "spec.pdSpec.prefillSpec.replicas", "spec.pdSpec.decodingSpec.resources.limits"} <= used
    assert used <= set(field_paths(v1_schema()))  # metadata.name and map keys are not CRD fields


def test_a_field_the_manifest_sets_missing_from_the_live_crd_fails(spec: DpdSpec) -> None:
    manifest = render_inference_endpoint_config(spec)
    row = check_live_crd(kube(_without("spec.pdSpec.routingThreshold")), manifest=manifest)
    assert row.status is Status.FAIL
    assert row.detail.startswith("the live CRD lacks 1 field(s) the manifest sets: spec.pdSpec.routingThreshold; ")


def test_a_removed_field_the_manifest_does_not_set_is_listed_not_failed(spec: DpdSpec) -> None:
    manifest = render_inference_endpoint_config(spec)
    assert "spec.dataCapture" not in set(set_paths(manifest, v1_schema()))
    row = check_live_crd(kube(_without("spec.dataCapture")), manifest=manifest)
    assert row.status is Status.PASS
    assert row.detail.startswith("the live CRD has every field the manifest sets; it lacks ")
    assert "spec.dataCapture" in row.detail


def test_the_matching_crd_passes_with_a_manifest(spec: DpdSpec) -> None:
    row = check_live_crd(kube(crd()), manifest=render_inference_endpoint_config(spec))
    assert (row.status, row.detail) == (Status.PASS, "the live CRD has exactly the fields of the shipped one")
