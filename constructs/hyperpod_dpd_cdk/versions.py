"""Every pinned version the constructs deploy, in one place, each with where it comes from.

Bump a version here and nowhere else; the snapshot tests then show exactly what changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from enum import Enum

from hyperpod_dpd import Problem
from hyperpod_dpd.contracts import stack_defaults as _defaults

# Kubernetes of the EKS control plane. HyperPod lists 1.28-1.34 ("Getting started with Amazon EKS
# support in SageMaker HyperPod"); AWS's cluster-setup templates default to 1.34. 1.33 left EKS
# standard support on 2026-07-29 (a new cluster would be billed for extended support); 1.34 is in
# standard support until 2026-12-02 (EKS_SUPPORT_CALENDAR below), and 1.35 is not yet listed for
# HyperPod. The kubectl Lambda layer must match within one minor version:
# ``aws-cdk.lambda-layer-kubectl-v34`` (KubectlV34Layer).
KUBERNETES_VERSION = _defaults.KUBERNETES_VERSION
# What ``kubernetes_version`` accepts: versions HyperPod lists that the v34 kubectl layer drives (kubectl
# supports one minor version of skew either way). 1.35 is not listed for HyperPod yet.
SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34")


class SupportType(Enum):
    """The EKS cluster's ``UpgradePolicy.SupportType``. ``EXTENDED`` keeps the version after its standard
    support ends, billed at the extended-support rate ($0.60 instead of $0.10 per cluster-hour, about
    $365 a month more); ``STANDARD`` lets EKS upgrade the control plane then, under running HyperPod
    nodes whose AMI HyperPod may not offer for the new version yet. ``STANDARD`` exists only while the
    version is in standard support: from its end (``EKS_SUPPORT_CALENDAR``) it is refused at synth."""

    STANDARD = "STANDARD"
    EXTENDED = "EXTENDED"


@dataclass(frozen=True)
class SupportWindow:
    """When EKS stops a Kubernetes version's standard and extended support (UTC days)."""

    end_of_standard: date
    end_of_extended: date


# The Amazon EKS Kubernetes release calendar ("Understand the Kubernetes version lifecycle on EKS",
# awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc at 01385604, the table
# "Amazon EKS Kubernetes release calendar"; ``aws eks describe-cluster-versions`` gives the same dates).
# "Billing for extended support starts at the beginning of the day that the version reaches end of
# standard support, in the UTC+0 timezone": on that day the version is in extended support.
EKS_SUPPORT_CALENDAR: dict[str, SupportWindow] = {
    "1.33": SupportWindow(end_of_standard=date(2026, 7, 29), end_of_extended=date(2027, 7, 29)),
    "1.34": SupportWindow(end_of_standard=date(2026, 12, 2), end_of_extended=date(2027, 12, 2)),
}


def support_type_problems(kubernetes_version: str, support_type: SupportType, *,
                          today: date | None = None) -> list[Problem]:
    """``STANDARD`` on a version already past its end of standard support.

    EKS: "You cannot disable extended support once your cluster has entered it. You can only disable
    extended support for clusters on standard support" (EKS user guide, "Disable EKS extended support",
    latest/ug/clusters/disable-extended-support.adoc). A deployed stack switched to ``STANDARD`` then
    fails its update, and a new cluster would not get what the option promises.
    """
    window = EKS_SUPPORT_CALENDAR.get(kubernetes_version)
    day = today or datetime.now(UTC).date()
    if support_type is not SupportType.STANDARD or window is None or day < window.end_of_standard:
        return []
    return [Problem(
        field="eks_support_type", value=support_type.value,
        message=f"cannot be set on Kubernetes {kubernetes_version}: its EKS standard support ended on "
                f"{window.end_of_standard.isoformat()} (extended support runs to "
                f"{window.end_of_extended.isoformat()}), "
                "and EKS lets a cluster leave extended support only while its version is in standard support",
        fix="leave eks_support_type out (EXTENDED, billed at the extended-support rate), or use a Kubernetes "
            "version in standard support once HyperPod lists one")]


# The add-ons the stack installs on an existing cluster unless they are declared pre-installed
# (``CreateAddon`` fails on one that exists): the operator's prerequisites, observability, Pod Identity.
PREREQUISITE_ADDONS = _defaults.PREREQUISITE_ADDONS

# amazon-sagemaker-hyperpod-inference v1.4.0-eksbuild.1 ships Inference Operator v3.3 (2026-08-04): DPD
# (``pdSpec``, since v3.2) plus the fixes for intelligent-routing endpoint registration, ``enableL1Cache:
# false`` being ignored and the missing routing Service (release notes). The manifests are validated
# against this version's CRD (hyperpod_dpd.contracts.crd).
INFERENCE_ADDON_VERSION = _defaults.INFERENCE_ADDON_VERSION

# amazon-sagemaker-hyperpod-observability and amazon-cloudwatch-observability: no public source names a
# build of either that was shown working with the configuration the stack sends (AWS's templates and
# Terraform leave both unpinned), so EKS installs its default for the cluster's Kubernetes. Set a version
# here, from ``aws eks describe-addon-versions --addon-name NAME --kubernetes-version 1.34``, to freeze
# it; ``hyperpod-dpd preflight`` checks that the versions the stack installs are offered.
OBSERVABILITY_ADDON_VERSION: str | None = None
CONTAINER_LOGS_ADDON_VERSION: str | None = None

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
