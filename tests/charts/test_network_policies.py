"""The opt-in NetworkPolicies around the model pods: a valid Kubernetes object that admits exactly the
endpoint's own pods, the operator's namespace and the metrics collectors."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import cdk8s

from hyperpod_dpd.charts.network_policies import NetworkPolicyChart, model_pods_policy
from hyperpod_dpd.spec.defaults import default_spec


def _admits(policy: dict[str, Any], *, namespace: str, labels: dict[str, str], pod_namespace: str) -> bool:
    """Whether ``policy`` admits ingress from a pod (a small NetworkPolicy evaluator for the shapes we emit)."""
    for rule in policy["spec"]["ingress"]:
        for peer in rule["from"]:
            if "namespaceSelector" in peer:
                wanted = peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                if pod_namespace == wanted:
                    return True
            elif pod_namespace == namespace:
                (expression,) = peer["podSelector"]["matchExpressions"]
                if labels.get(expression["key"]) in expression["values"]:
                    return True
    return False


def test_the_policy_is_a_valid_networkpolicy(kubernetes_errors: Callable[[str, Any], list[str]]) -> None:
    document = model_pods_policy(default_spec())
    assert kubernetes_errors("io.k8s.api.networking.v1.NetworkPolicy", document) == []
    assert kubernetes_errors("io.k8s.api.networking.v1.NetworkPolicy", {**document, "spec": {"podSelector": 1}}) != []


def test_model_pods_admit_their_peers_the_operator_and_the_collectors_only() -> None:
    spec = dataclasses.replace(default_spec(), namespace="inference")
    policy = model_pods_policy(spec)
    assert policy["metadata"]["namespace"] == "inference"
    assert policy["spec"]["podSelector"]["matchExpressions"][0]["key"] == "inference.sagemaker.aws.amazon.com/dpd-role"
    role = "inference.sagemaker.aws.amazon.com/dpd-role"
    admitted = [("inference", {role: "decode"}), ("hyperpod-inference-system", {"app": "router"}),
                ("hyperpod-observability", {})]
    refused = [("inference", {"app": "curl"}), ("default", {role: "prefill"}), ("kube-system", {})]
    for pod_namespace, labels in admitted:
        assert _admits(policy, namespace="inference", labels=labels, pod_namespace=pod_namespace), pod_namespace
    for pod_namespace, labels in refused:
        assert not _admits(policy, namespace="inference", labels=labels, pod_namespace=pod_namespace), labels


def test_the_chart_renders_the_same_object() -> None:
    chart = NetworkPolicyChart(cdk8s.App(), "np", spec=default_spec())
    (document,) = chart.to_json()
    assert document == model_pods_policy(default_spec())
