"""What must run on the EKS cluster before HyperPod creates nodes: device plugins and the health agent."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from hyperpod_dpd import InstanceType, Problem
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd_cdk import versions
from hyperpod_dpd_cdk._private.nag import acknowledge, pseudo
from hyperpod_dpd_cdk.ownership import ClusterOwnership

RELEASE = "hyperpod-dependencies"
NAMESPACE = "kube-system"
NODE_HEALTH_TAINT = {"key": "sagemaker.amazonaws.com/node-health-status", "operator": "Equal",
                     "value": "Unschedulable", "effect": "NoSchedule"}


def dependency_chart_values(region: str) -> dict[str, object]:
    """Values for the prepared HyperPod dependency chart.

    cert-manager comes from the EKS add-on (the inference operator needs that one), so the chart's
    copy is off; the health monitoring agent pulls its image from the stack's region.
    """
    return {
        "health-monitoring-agent": {"enabled": True, "region": region},
        "cert-manager": {"enabled": False},
        "nvidia-device-plugin": {"devicePlugin": {"enabled": True}},
        "aws-efa-k8s-device-plugin": {"devicePlugin": {"enabled": True}},
        "neuron-device-plugin": {"devicePlugin": {"enabled": False}},
        "deep-health-check": {"enabled": True},
        "job-auto-restart": {"enabled": True},
        "inferenceOperators": {"enabled": False},
    }


def _gpu_instance_affinity() -> dict[str, object]:
    names = sorted(t.api_name for t in InstanceType)
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": names}]}]}}}


class HyperPodDependencies(Construct):
    """The HyperPod dependency chart from a prepared folder, or else the published device-plugin charts.

    The dependency chart (``aws/sagemaker-hyperpod-cli`` ``helm_chart/HyperPodHelmChart``) is not in a
    chart repository and the kubectl provider cannot run ``helm dependency update``; prepare it with
    ``scripts/prepare_hyperpod_chart.sh`` (a pinned revision, dependencies vendored) and pass the folder.
    Without it, only the NVIDIA and EFA device plugins are installed: enough to schedule DPD pods, but
    without the health monitoring agent HyperPod's continuous health checks and automatic node
    replacement have no signal, and without the chart's ``aws-hyperpod`` namespace and RBAC the deep
    health checks cannot run, so the stack requests none (a warning says both).

    :param cluster: the EKS cluster. :param region: the region of the health agent's image.
    :param chart_dir: the prepared chart folder. :default: - the device plugins only
    :param ownership: what the stack may change on the cluster: on one it did not create, each release is
        named per stack (``helm upgrade --install`` would adopt, and ``cdk destroy`` uninstall, a release of
        AWS's own name that another HyperPod cluster's setup installed). :default: - a cluster the stack created
    """

    def __init__(self, scope: Construct, id: str, *, cluster: eks.ICluster, region: str,
                 chart_dir: str | Path | None = None, ownership: ClusterOwnership | None = None) -> None:
        super().__init__(scope, id)
        release = (ownership or ClusterOwnership.of_stack(self)).own_name
        self.charts: list[eks.HelmChart] = []
        if chart_dir is not None:
            folder = Path(chart_dir)
            check_chart_dir(folder)
            asset = s3_assets.Asset(self, "ChartAsset", path=str(folder))
            self.charts.append(eks.HelmChart(
                self, "Chart", cluster=cluster, chart_asset=asset, release=release(RELEASE), namespace=NAMESPACE,
                values=dependency_chart_values(region), wait=False, timeout=Duration.minutes(10)))
            provider = cluster.kubectl_provider
            if provider is not None and provider.role is not None:
                stack = Stack.of(self)
                acknowledge(provider.role, "IAM5",
                            "The kubectl handler downloads the chart asset from the CDK staging bucket; aws-cdk-lib's "
                            "Asset.grantRead gives object wildcards on that one bucket.",
                            ["Action::s3:GetBucket*", "Action::s3:GetObject*", "Action::s3:List*",
                             f"Resource::arn:{pseudo(stack, 'partition')}:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-"
                             f"{pseudo(stack, 'region')}/*"])
            return
        Annotations.of(self).add_warning_v2(
            "hyperpod-dpd:NoHealthMonitoringAgent",
            "No prepared HyperPod dependency chart (dependency_chart_dir / -c dependency_chart=...): installing only "
            "the NVIDIA and EFA device plugins. Without the health monitoring agent, HyperPod cannot detect and "
            "replace faulty GPU nodes while they run, and no deep health checks are requested when nodes start "
            "(they need the chart's aws-hyperpod namespace and RBAC); see scripts/prepare_hyperpod_chart.sh.")
        tolerations = [NODE_HEALTH_TAINT, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                       {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"}]
        self.charts.append(eks.HelmChart(
            self, "NvidiaDevicePlugin", cluster=cluster, chart="nvidia-device-plugin",
            repository=versions.NVIDIA_DEVICE_PLUGIN_REPOSITORY, version=versions.NVIDIA_DEVICE_PLUGIN_VERSION,
            release=release("nvidia-device-plugin"), namespace=NAMESPACE, wait=False,
            values={"affinity": _gpu_instance_affinity(), "tolerations": tolerations}))
        self.charts.append(eks.HelmChart(
            self, "EfaDevicePlugin", cluster=cluster, chart="aws-efa-k8s-device-plugin",
            repository=versions.EFA_DEVICE_PLUGIN_REPOSITORY, version=versions.EFA_DEVICE_PLUGIN_VERSION,
            release=release("aws-efa-k8s-device-plugin"), namespace=NAMESPACE, wait=False,
            values={"supportedInstanceLabels": {"keys": ["node.kubernetes.io/instance-type"],
                                                "values": sorted(t.api_name for t in InstanceType)},
                    "tolerations": tolerations}))


def check_chart_dir(folder: Path) -> None:
    """A prepared chart has ``Chart.yaml`` and its dependencies vendored under ``charts/``."""
    raise_if_any(chart_dir_problems(folder))


def chart_dir_problems(folder: str | Path | None) -> list[Problem]:
    """What :func:`check_chart_dir` refuses, for the platform to report with its other problems (none for ``None``)."""
    if folder is None:
        return []
    folder = Path(folder)
    problems = []
    if not (folder / "Chart.yaml").is_file():
        problems.append(Problem(field="dependency_chart_dir", value=str(folder),
                                message="has no Chart.yaml (not a Helm chart folder)",
                                fix="run scripts/prepare_hyperpod_chart.sh and pass the folder it prints"))
    elif not any((folder / "charts").glob("*.tgz")):
        problems.append(Problem(field="dependency_chart_dir", value=str(folder),
                                message="has no vendored dependencies (charts/*.tgz); the kubectl provider "
                                        "cannot run 'helm dependency update'",
                                fix="run scripts/prepare_hyperpod_chart.sh, which runs 'helm dependency build'"))
    return problems
