"""Every pinned version the constructs deploy, in one place, each with where it comes from.

Bump a version here and nowhere else; the snapshot tests then show exactly what changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hyperpod_dpd.contracts import stack_defaults as _defaults

# Kubernetes of the EKS control plane. HyperPod lists 1.28-1.34 ("Getting started with Amazon EKS
# support in SageMaker HyperPod"); AWS's cluster-setup templates default to 1.34. 1.33 left EKS
# standard support on 2026-07-29 (a new cluster would be billed for extended support); 1.34 is in
# standard support until 2026-12-02, and 1.35 is not yet listed for HyperPod. The kubectl Lambda layer
# must match within one minor version: ``aws-cdk.lambda-layer-kubectl-v34`` (KubectlV34Layer).
KUBERNETES_VERSION = _defaults.KUBERNETES_VERSION
# What ``kubernetes_version`` accepts: versions HyperPod lists that the v34 kubectl layer drives (kubectl
# supports one minor version of skew either way). 1.35 is not listed for HyperPod yet.
SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34")


class SupportType(Enum):
    """The EKS cluster's ``UpgradePolicy.SupportType``. ``EXTENDED`` keeps the version after its standard
    support ends, billed at the extended-support rate ($0.60 instead of $0.10 per cluster-hour, about
    $365 a month more); ``STANDARD`` lets EKS upgrade the control plane then, under running HyperPod
    nodes whose AMI HyperPod may not offer for the new version yet."""

    STANDARD = "STANDARD"
    EXTENDED = "EXTENDED"


# The add-ons the stack installs on an existing cluster unless they are declared pre-installed
# (``CreateAddon`` fails on one that exists): the operator's prerequisites, observability, Pod Identity.
PREREQUISITE_ADDONS = _defaults.PREREQUISITE_ADDONS

# amazon-sagemaker-hyperpod-inference v1.4.0-eksbuild.1 ships Inference Operator v3.3 (2026-08-04): DPD
# (``pdSpec``, since v3.2) plus the fixes for intelligent-routing endpoint registration, ``enableL1Cache:
# false`` being ignored and the missing routing Service (release notes). The manifests are validated
# against this version's CRD (hyperpod_dpd.contracts.crd).
INFERENCE_ADDON_VERSION = _defaults.INFERENCE_ADDON_VERSION

# The operator's chart bundles the AWS Load Balancer Controller chart 1.13.2, i.e. controller v2.13.2
# (aws/sagemaker-hyperpod-cli inference-operator/Chart.yaml, unchanged from operator v3.2 to v3.6). Its
# IAM policy is the one aws-cdk-lib ships for that version (aws_eks_v2.AlbControllerVersion.V2_13_2).
ALB_CONTROLLER_VERSION = "v2.13.2"

# The HyperPod dependency chart lives in aws/sagemaker-hyperpod-cli (helm_chart/HyperPodHelmChart)
# and is not published to a chart repository. This is the revision the reference Terraform pins
# (awsome-distributed-ai hyperpod-eks-tf variables.tf ``helm_repo_revision``); scripts/
# prepare_hyperpod_chart.sh checks it out.
HYPERPOD_CLI_REPOSITORY = "https://github.com/aws/sagemaker-hyperpod-cli.git"
HYPERPOD_CLI_REVISION = "9f496a6364759553f73ff534434a057ef4bdc004"

# Fallback when no prepared dependency chart is given: the two device plugins. NVIDIA 0.16.1 is the
# version the HyperPod dependency chart depends on at the pinned revision; the EFA plugin there is 0.5.10,
# and 0.5.20 is the one the chart moved to later (its main branch, 2026-06), which is used here.
NVIDIA_DEVICE_PLUGIN_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_VERSION = "0.16.1"
EFA_DEVICE_PLUGIN_REPOSITORY = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_VERSION = "0.5.20"


@dataclass(frozen=True, kw_only=True)
class AddonVersions:
    """EKS add-on versions. ``None`` lets EKS install its default version for the cluster's Kubernetes.

    The defaults for 1.34 are newer than the minimums the operator documents (cert-manager
    v1.18.2-eksbuild.2, aws-mountpoint-s3-csi-driver v1.14.1-eksbuild.1, metrics-server
    v0.7.2-eksbuild.4; VPC CNI >= 1.18.3 for HyperPod); pin them here to freeze an environment.

    :param fsx_csi: the FSx for Lustre CSI driver, which the operator requires even without FSx.
    :param inference: :default: v1.4.0-eksbuild.1 (operator v3.3)
    """

    vpc_cni: str | None = None
    kube_proxy: str | None = None
    coredns: str | None = None
    pod_identity_agent: str | None = None
    cert_manager: str | None = None
    mountpoint_s3_csi: str | None = None
    metrics_server: str | None = None
    fsx_csi: str | None = None
    inference: str = INFERENCE_ADDON_VERSION
