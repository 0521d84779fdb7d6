"""Every pinned version the constructs deploy, in one place, each with where it comes from.

Bump a version here and nowhere else; the snapshot tests then show exactly what changes.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kubernetes of the EKS control plane. HyperPod supports 1.28-1.34 (SageMaker "HyperPod EKS
# prerequisites" page); the reference Terraform (awslabs/awsome-distributed-ai, hyperpod-eks-tf
# terraform.tfvars) uses 1.33. The kubectl Lambda layer must match within one minor version, so
# this pairs with the ``aws-cdk.lambda-layer-kubectl-v33`` package (KubectlV33Layer).
KUBERNETES_VERSION = "1.33"

# amazon-sagemaker-hyperpod-inference v1.3.0-eksbuild.1 ships Inference Operator v3.2, the first
# release with ``pdSpec`` (DPD); earlier add-on versions reject the CRD fields (operator release notes).
INFERENCE_ADDON_VERSION = "v1.3.0-eksbuild.1"

# The HyperPod dependency chart lives in aws/sagemaker-hyperpod-cli (helm_chart/HyperPodHelmChart)
# and is not published to a chart repository. This is the revision the reference Terraform pins
# (awsome-distributed-ai hyperpod-eks-tf variables.tf ``helm_repo_revision``); scripts/
# prepare_hyperpod_chart.sh checks it out.
HYPERPOD_CLI_REPOSITORY = "https://github.com/aws/sagemaker-hyperpod-cli.git"
HYPERPOD_CLI_REVISION = "9f496a6364759553f73ff534434a057ef4bdc004"

# Fallback when no prepared dependency chart is given: the two device plugins, at the versions the
# HyperPod dependency chart itself depends on (HyperPodHelmChart/Chart.yaml).
NVIDIA_DEVICE_PLUGIN_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_VERSION = "0.16.1"
EFA_DEVICE_PLUGIN_REPOSITORY = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_VERSION = "0.5.20"


@dataclass(frozen=True, kw_only=True)
class AddonVersions:
    """EKS add-on versions. ``None`` lets EKS install its default version for the cluster's Kubernetes.

    The defaults for 1.33 are newer than the minimums the operator documents (cert-manager
    v1.18.2-eksbuild.2, aws-mountpoint-s3-csi-driver v1.14.1-eksbuild.1, metrics-server
    v0.7.2-eksbuild.4; VPC CNI >= 1.18.3 for HyperPod); pin them here to freeze an environment.

    :param inference: :default: v1.3.0-eksbuild.1 (operator v3.2, the DPD minimum)
    """

    vpc_cni: str | None = None
    kube_proxy: str | None = None
    coredns: str | None = None
    pod_identity_agent: str | None = None
    cert_manager: str | None = None
    mountpoint_s3_csi: str | None = None
    metrics_server: str | None = None
    inference: str = INFERENCE_ADDON_VERSION
