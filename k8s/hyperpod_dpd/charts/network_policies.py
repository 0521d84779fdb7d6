"""Opt-in NetworkPolicies that narrow who inside the cluster can call an endpoint's model pods.

Without them any pod in any namespace reaches vLLM on the prefill and decode pods directly, past the
router (the operator ships none for them). With this set the model pods admit only:

- each other (the endpoint's prefill and decode pods: KV transfer side channels);
- ``hyperpod-inference-system`` (the router, the operator and KEDA run there);
- ``hyperpod-observability`` (the HyperPod observability add-on's collectors scrape ``/metrics``).

The router itself is not covered: its pod labels are not documented, and a policy selecting the
whole operator namespace would also cut the operator's webhooks. NetworkPolicies do nothing unless
the VPC CNI enforces them (``enableNetworkPolicy``, off by default), and neither that agent on HyperPod
nodes nor kubelet probes through it have been verified on a cluster: the set is opt-in until they are.
Model pods are selected by ``inference.sagemaker.aws.amazon.com/dpd-role`` (DPD page of the HyperPod docs).
"""

from __future__ import annotations

from typing import Any

import cdk8s
from constructs import Construct

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, ROLE_LABEL
from hyperpod_dpd.spec import DpdSpec

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by Kubernetes on every namespace (v1.22+)
OBSERVABILITY_NAMESPACE = "hyperpod-observability"
ADMITTED_NAMESPACES = (OPERATOR_NAMESPACE, OBSERVABILITY_NAMESPACE)
MODEL_ROLES = ("prefill", "decode")


def model_pods_policy_name(spec: DpdSpec) -> str:
    return f"{spec.name}-model-pods"


def model_pods_policy(spec: DpdSpec) -> dict[str, Any]:
    """The NetworkPolicy of one endpoint's prefill and decode pods."""
    peers = {"podSelector": {"matchExpressions": [
        {"key": ROLE_LABEL, "operator": "In", "values": list(MODEL_ROLES)}]}}
    namespaces = [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}} for name in ADMITTED_NAMESPACES]
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": model_pods_policy_name(spec), "namespace": spec.namespace,
                     "labels": {"app.kubernetes.io/managed-by": "hyperpod-dpd"}},
        "spec": {"podSelector": peers["podSelector"], "policyTypes": ["Ingress"],
                 "ingress": [{"from": [peers, *namespaces]}]},
    }


class NetworkPolicyChart(cdk8s.Chart):
    """The endpoint's NetworkPolicies as a cdk8s chart (the stack applies it with the endpoint)."""

    def __init__(self, scope: Construct, id: str, *, spec: DpdSpec) -> None:
        super().__init__(scope, id)
        document = model_pods_policy(spec)
        policy = cdk8s.ApiObject(self, "ModelPods", api_version=document["apiVersion"], kind=document["kind"],
                                 metadata=cdk8s.ApiObjectMetadata(**document["metadata"]))
        policy.add_json_patch(cdk8s.JsonPatch.add("/spec", document["spec"]))
