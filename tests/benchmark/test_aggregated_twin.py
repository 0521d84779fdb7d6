"""The aggregated twin: the DPD manifest without pdSpec, valid against the operator's CRD."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from hyperpod_dpd import SpecError
from hyperpod_dpd.charts import render_inference_endpoint_config
from hyperpod_dpd.charts.aggregated import aggregated_spec, render_aggregated_endpoint_config
from hyperpod_dpd.spec import DpdSpec

GROUP = "sagemaker.amazonaws.com/instance-group-name"


def test_the_twin_is_the_dpd_endpoint_without_pd_spec(spec: DpdSpec, crd_errors: Callable[[Any], list[str]]) -> None:
    dpd = render_inference_endpoint_config(spec)
    twin = render_aggregated_endpoint_config(spec)
    assert crd_errors(twin) == []
    assert "pdSpec" not in twin["spec"] and twin["spec"]["replicas"] == 1
    assert twin["metadata"] == {"name": f"{spec.name}-agg", "namespace": spec.namespace}
    for same in ("modelName", "modelSourceConfig", "worker", "instanceType", "intelligentRoutingSpec", "kvCacheSpec"):
        assert twin["spec"][same] == dpd["spec"][same], same
    assert "--tensor-parallel-size" in twin["spec"]["worker"]["args"]


def test_pinned_to_an_instance_group_through_node_affinity(spec: DpdSpec,
                                                           crd_errors: Callable[[Any], list[str]]) -> None:
    twin = render_aggregated_endpoint_config(spec, node_selector={GROUP: "dpd-test-aggregated"})
    assert crd_errors(twin) == []
    assert "instanceType" not in twin["spec"]  # the CRD makes nodeAffinity and instanceType exclusive
    (term,) = twin["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": GROUP, "operator": "In", "values": ["dpd-test-aggregated"]}]}


def test_snapshot(spec: DpdSpec, snapshot: SnapshotAssertion) -> None:
    assert render_aggregated_endpoint_config(spec, node_selector={GROUP: "dpd-test-aggregated"}) == snapshot


def test_a_name_too_long_for_the_twin_names_the_field(spec: DpdSpec) -> None:
    long_name = "a" * (63 - len("-default-routing-service") - 2)  # fits the DPD endpoint, not the twin
    with pytest.raises(SpecError) as caught:
        aggregated_spec(dataclasses.replace(spec, name=long_name))
    assert any(p.field == "name" and "aggregated twin" in p.message for p in caught.value.problems)
