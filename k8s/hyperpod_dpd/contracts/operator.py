"""The names the HyperPod inference operator uses and derives from a spec.

From the operator's documentation and CRD: checks (the router Service must fit 63 characters), the
chart (the API group) and ``verify`` (what to look up on the cluster) all read them from here.
"""

from __future__ import annotations

from hyperpod_dpd.spec import DpdSpec

IEC_GROUP = "inference.sagemaker.aws.amazon.com"
IEC_VERSION = "v1"
IEC_API_VERSION = f"{IEC_GROUP}/{IEC_VERSION}"
IEC_KIND = "InferenceEndpointConfig"
IEC_PLURAL = "inferenceendpointconfigs"
ROLE_LABEL = f"{IEC_GROUP}/dpd-role"
OPERATOR_NAMESPACE = "hyperpod-inference-system"
ROUTER_CONTAINER = "router-container"
ROUTER_PORT = 443
# Node labels: HyperPod puts its instance group's name on every HyperPod (GPU) node; the stack's
# system node group carries SYSTEM_POOL, so CPU-only pods (the benchmark) can be kept off GPU nodes.
INSTANCE_GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
SYSTEM_POOL_LABEL = "hyperpod-dpd/pool"
SYSTEM_POOL = {SYSTEM_POOL_LABEL: "system"}
# The operator (add-on v3.3) renders one decode Deployment per endpoint and routes every request's
# decode phase to it: more decode replicas than one are unverified, so no rule recommends them.
DECODE_DEPLOYMENTS = 1


def role_deployment(spec: DpdSpec, role: str) -> str:
    """``prefill-<name>`` or ``decode-<name>``, in the endpoint's namespace."""
    return f"{role}-{spec.name}"


def router_deployment(spec: DpdSpec) -> str:
    """``<name>-<namespace>-router``, in ``hyperpod-inference-system``."""
    return f"{spec.name}-{spec.namespace}-router"


def router_service(spec: DpdSpec) -> str:
    """``<name>-<namespace>-routing-service`` (port 443), in ``hyperpod-inference-system``."""
    return f"{spec.name}-{spec.namespace}-routing-service"


def load_balancer_ingress(spec: DpdSpec) -> str:
    """``alb-<name>-<namespace>``, in ``hyperpod-inference-system``: the Ingress behind the operator's ALB
    when intelligent routing is on, as it always is for DPD (custom-certificates page of the HyperPod docs).

    The operator's source is not public. AWS's add-on migration script confirms the ``alb-`` prefix only: it
    finds the "ingress resources created by inference models" with ``select(.metadata.name | test("alb-.*"))``
    over every namespace (aws/sagemaker-hyperpod-cli
    ``helm_chart/HyperPodHelmChart/charts/inference-operator/migration/helm_to_addon.sh`` L370-371, 9ffefae2)."""
    return f"alb-{spec.name}-{spec.namespace}"
