"""The HyperPod cluster (``AWS::SageMaker::Cluster``, EKS orchestrator) and its instance groups."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct, IValidation

from hyperpod_dpd import DpdSpec, InstanceType, Problem, SpecError
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd.spec.instances import THREADS_PER_CORE
from hyperpod_dpd.validation import is_sagemaker_name
from hyperpod_dpd_cdk.lifecycle import LifecycleScripts

# /opt/sagemaker holds containerd's images (the vLLM image is tens of GB) and the kubelet; the
# reference p5 configuration uses 500 GB.
DEFAULT_EBS_GB = 500
# InstanceConnectivity is a multi-node NCCL/EFA test: AWS documents it for two nodes or more.
STRESS_CHECK = "InstanceStress"
CONNECTIVITY_CHECK = "InstanceConnectivity"


@dataclass(frozen=True, kw_only=True)
class InstanceGroup:
    """One HyperPod instance group.

    :param threads_per_core: 1 disables SMT, as the HyperPod templates do for GPU groups. :default: 1
    :param ebs_volume_gb: the volume mounted at /opt/sagemaker. :default: 500
    :param training_plan_arn: reserved capacity for this group. :default: - on-demand capacity
    :param deep_health_checks: run HyperPod's deep health checks when a node starts; they need the
        ``aws-hyperpod`` namespace and RBAC that the HyperPod dependency chart installs. :default: True
    """

    name: str
    instance_type: InstanceType
    count: int
    threads_per_core: int = THREADS_PER_CORE
    ebs_volume_gb: int = DEFAULT_EBS_GB
    training_plan_arn: str | None = None
    deep_health_checks: bool = True

    @property
    def on_start_deep_health_checks(self) -> list[str]:
        """The stress test on every node; the connectivity test only where there are two nodes to connect."""
        if not self.deep_health_checks:
            return []
        return [STRESS_CHECK, *([CONNECTIVITY_CHECK] if self.count >= 2 else [])]


def group_name(spec: DpdSpec, role: str) -> str:
    """``<spec.name>-prefill`` / ``<spec.name>-decode``."""
    return f"{spec.name}-{role}"


def instance_groups_for(specs: Sequence[DpdSpec], *, ebs_volume_gb: int = DEFAULT_EBS_GB,
                        training_plan_arn: str | None = None, deep_health_checks: bool = True) -> list[InstanceGroup]:
    """One prefill and one decode group per endpoint, so each role's pods land on their own nodes.

    Counts come from :meth:`DpdSpec.role_nodes`: an autoscaled role gets nodes for its maximum.
    """
    return [InstanceGroup(name=group_name(spec, role), instance_type=spec.instance_type,
                          count=spec.role_nodes(role_spec), ebs_volume_gb=ebs_volume_gb,
                          training_plan_arn=training_plan_arn, deep_health_checks=deep_health_checks)
            for spec in specs for role, role_spec in spec.roles()]


def instance_group_problems(groups: Sequence[InstanceGroup], *, field: str = "instance_groups") -> Iterator[Problem]:
    seen: set[str] = set()
    for i, group in enumerate(groups):
        where = f"{field}[{i}].name"
        if not is_sagemaker_name(group.name):
            yield Problem(field=where, value=group.name, message="is not a valid HyperPod instance group name "
                          "(1-63 letters, digits and hyphens, no leading or trailing hyphen, no dots)",
                          fix="shorten the endpoint name or use only letters, digits and hyphens")
        if group.name in seen:
            yield Problem(field=where, value=group.name, message="is used by two instance groups",
                          fix="give every endpoint a distinct name")
        seen.add(group.name)
        if group.count < 1:
            yield Problem(field=f"{field}[{i}].count", value=group.count, message="must be at least 1",
                          fix="set replicas to 1 or more")
        if group.threads_per_core not in (1, 2):
            yield Problem(field=f"{field}[{i}].threads_per_core", value=group.threads_per_core,
                          message="must be 1 or 2", fix="use 1 (SMT off) or 2")


def _groups_problems(groups: Sequence[InstanceGroup]) -> list[Problem]:
    return list(instance_group_problems(groups))


@jsii.implements(IValidation)
class _HasInstanceGroups:
    """A cluster may start without groups (``HyperPodDpd`` created empty, endpoints added later), not synthesize so."""

    def __init__(self, cluster: HyperPodCluster) -> None:
        self._cluster = cluster

    def validate(self) -> list[str]:
        if self._cluster.instance_groups:
            return []
        return [Problem(field="endpoints", value=[], message="is still empty at synthesis: a HyperPod cluster needs "
                        "at least one instance group, and the groups are the endpoints' roles",
                        fix="call add_endpoint(spec) before the app synthesizes").render()]


class HyperPodCluster(Construct):
    """A HyperPod cluster on EKS, every node in one subnet (one AZ), with automatic node recovery.

    ``ClusterName``, ``VpcConfig`` and the EKS ARN are create-only: changing them replaces the
    cluster and all its nodes.

    :param cluster_name: 1-63 letters, digits, hyphens. :param eks_cluster_arn: the orchestrator.
    :param subnet: the single-AZ HyperPod subnet. :param security_group: the EFA group.
    :param execution_role: the instance role. :param lifecycle: the uploaded on-create script.
    :param instance_groups: at least one by synthesis (``replace_instance_groups`` sets them later).
    """

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, eks_cluster_arn: str,
                 subnet: ec2.ISubnet, security_group: ec2.ISecurityGroup, execution_role: iam.IRole,
                 lifecycle: LifecycleScripts, instance_groups: Sequence[InstanceGroup]) -> None:
        super().__init__(scope, id)
        problems = list(_groups_problems(instance_groups))
        if not is_sagemaker_name(cluster_name):
            problems.append(Problem(field="hyperpod_cluster_name", value=cluster_name,
                                    message="is not a valid HyperPod cluster name",
                                    fix="use 1-63 letters, digits and hyphens"))
        if problems:
            raise SpecError(problems)
        self._execution_role = execution_role
        self._lifecycle = lifecycle
        self.instance_groups = tuple(instance_groups)
        self.resource = sagemaker.CfnCluster(
            self, "Resource", cluster_name=cluster_name,
            orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
                eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=eks_cluster_arn)),
            vpc_config=sagemaker.CfnCluster.VpcConfigProperty(
                security_group_ids=[security_group.security_group_id], subnets=[subnet.subnet_id]),
            node_recovery="Automatic",
            instance_groups=[self._group(g, execution_role, lifecycle) for g in instance_groups])
        self.cluster_arn = self.resource.attr_cluster_arn
        self.cluster_name = cluster_name
        self.node.add_validation(_HasInstanceGroups(self))

    def replace_instance_groups(self, instance_groups: Sequence[InstanceGroup]) -> None:
        """The cluster's groups from now on, in this order (every endpoint's, when one is added later)."""
        raise_if_any(_groups_problems(instance_groups))
        self.instance_groups = tuple(instance_groups)
        self.resource.instance_groups = [self._group(g, self._execution_role, self._lifecycle)
                                         for g in instance_groups]

    @staticmethod
    def _group(group: InstanceGroup, role: iam.IRole,
               lifecycle: LifecycleScripts) -> sagemaker.CfnCluster.ClusterInstanceGroupProperty:
        return sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=group.name, instance_type=group.instance_type.api_name,
            instance_count=group.count, execution_role=role.role_arn, threads_per_core=group.threads_per_core,
            life_cycle_config=sagemaker.CfnCluster.ClusterLifeCycleConfigProperty(
                source_s3_uri=lifecycle.source_s3_uri, on_create=lifecycle.on_create),
            instance_storage_configs=[sagemaker.CfnCluster.ClusterInstanceStorageConfigProperty(
                ebs_volume_config=sagemaker.CfnCluster.ClusterEbsVolumeConfigProperty(
                    volume_size_in_gb=group.ebs_volume_gb))],
            on_start_deep_health_checks=group.on_start_deep_health_checks or None,
            training_plan_arn=group.training_plan_arn)
