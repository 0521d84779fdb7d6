"""One stack with everything: network, buckets, EKS, HyperPod, the inference operator and the endpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hyperpod_dpd import DpdSpec, Problem
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_AVAILABILITY_ZONE_ID
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd_cdk.eks_cluster import ExistingEksCluster
from hyperpod_dpd_cdk.exposure import ClusterEndpointAccess
from hyperpod_dpd_cdk.hyperpod_cluster import DEFAULT_EBS_GB
from hyperpod_dpd_cdk.hyperpod_dpd import ClusterOptions, Composition, HyperPodOptions
from hyperpod_dpd_cdk.network import ExistingVpc
from hyperpod_dpd_cdk.observability import ObservabilityOptions
from hyperpod_dpd_cdk.teardown import TeardownTiming
from hyperpod_dpd_cdk.versions import KUBERNETES_VERSION, AddonVersions, SupportType
from hyperpod_dpd_cdk.weights_staging import DEFAULT_WAIT


class HyperPodDpdStack(Stack, Composition):
    """A HyperPod EKS cluster serving one or more DPD endpoints, from nothing (or from your VPC, bucket, cluster).

    The parts of :class:`HyperPodDpd`, built into the stack itself (no nesting level, so the logical ids
    are the stack's own); the keywords below map onto its option objects. Every input is checked first
    and all problems are raised together as one ``SpecError``; :meth:`add_endpoint` hosts one more.

    :param endpoints: the DPD specs to host, one prefill and one decode instance group each.
    :param availability_zone_id: where the GPU capacity is. :default: usw2-az2
    :param vpc: an existing VPC (``IVpc`` or ``ExistingVpc`` ids). :default: - a new VPC
    :param hyperpod_subnet_ids: with ``vpc``, HyperPod subnets by AZ ID. :default: - none
    :param eks_subnets: with ``vpc``, EKS subnets. :default: - its private subnets with egress
    :param model_bucket_name: the specs' bucket already exists; import it. :default: - create the bucket the
        specs name (retained), or one with a generated name when no spec reads S3
    :param model_bucket: the specs' bucket as an object, instead of its name: an SSE-KMS bucket imported with its
        key (``s3.Bucket.from_bucket_attributes(..., encryption_key=...)``) gets its readers and writers KMS
        grants. :default: - ``model_bucket_name``
    :param existing_cluster: an existing EKS cluster. :default: - a new cluster
    :param admin_role_arns: IAM roles given EKS cluster admin. :default: - none
    :param dependency_chart_dir: a prepared HyperPod dependency chart. :default: - device plugins only
    :param hyperpod_cluster_name: :default: - ``<stack name>-hp``
    :param training_plan_arn: reserved capacity for every instance group. :default: - on-demand
    :param ebs_volume_gb: per node, at /opt/sagemaker. :default: 500
    :param lifecycle_scripts_dir: your own on-create scripts. :default: - the packaged script
    :param addon_versions: :default: - see ``AddonVersions``
    :param observability: the observability add-on, AMP workspace, DPD alert rules, log alarms and alert
        topic (``DpdObservability``); ``False`` leaves them out, options tune them. :default: True
    :param benchmark: an IAM role (IRSA) and ServiceAccount per endpoint namespace for ``hyperpod-dpd bench``
        (``BenchmarkAccess``). :default: True
    :param aggregated_baseline: host each endpoint's aggregated twin (``<name>-agg``) on one more one-node
        instance group, the baseline of ``hyperpod-dpd bench --aggregated`` (``AggregatedTwin``). :default: False
    :param allow_internet_facing_load_balancers: lift the explicit deny on internet-facing load balancers
        that the ALB controller's role and a new cluster's role carry (a synth warning follows). :default: False
    :param eks_endpoint_access: who reaches the EKS API endpoint (new cluster). :default: - public from
        anywhere and private (IAM and access entries authenticate every call)
    :param cluster_creator_admin: the cluster creator's bootstrap admin entry (new cluster; changing it
        later replaces the cluster). :default: True
    :param network_policies: NetworkPolicies that let only their peers, the operator's namespace and the
        metrics collectors reach each endpoint's model pods, and the VPC CNI's enforcement of them (new
        cluster). Off by default: not yet verified on HyperPod nodes. :default: False
    :param teardown: how long ``cdk destroy`` waits for what the operator created outside CloudFormation
        (``TeardownBarrier``). :default: - ``TeardownTiming()``: 10 minutes' grace, failure at 50
    :param weights_staging_timeout: how long ``cdk deploy`` waits for a ``huggingface`` source to be staged
        into the model bucket (``WeightsStaging``; 15 minutes to 12 hours). :default: 4 hours
    :param kubernetes_version: a new EKS cluster's version (1.33 or 1.34). :default: 1.34
    :param support_type: a new EKS cluster's ``UpgradePolicy`` (see ``SupportType`` for the cost).
        :default: ``SupportType.EXTENDED``
    :param preinstalled_addons: on an existing cluster, add-ons it runs already (names from ``aws eks
        list-addons``, any of ``PREREQUISITE_ADDONS``); the stack creates none of them. :default: - none
    :param bundled_load_balancer_controller: the inference add-on runs its own AWS Load Balancer Controller;
        ``False`` on an existing cluster that runs one. :default: True
    :param bundled_keda: the inference add-on runs its own KEDA; ``False`` on an existing cluster that runs
        KEDA. :default: True
    :param stack_props: passed to ``Stack`` (``env``, ``synthesizer``, ``description``, ...).
    """

    def __init__(self, scope: Construct, id: str, *, endpoints: Sequence[DpdSpec],
                 availability_zone_id: str = DEFAULT_AVAILABILITY_ZONE_ID, vpc: ec2.IVpc | ExistingVpc | None = None,
                 hyperpod_subnet_ids: Mapping[str, str] | None = None, eks_subnets: ec2.SubnetSelection | None = None,
                 model_bucket_name: str | None = None, model_bucket: s3.IBucket | None = None,
                 existing_cluster: ExistingEksCluster | None = None,
                 admin_role_arns: Sequence[str] = (), dependency_chart_dir: str | Path | None = None,
                 hyperpod_cluster_name: str | None = None, training_plan_arn: str | None = None,
                 ebs_volume_gb: int = DEFAULT_EBS_GB, lifecycle_scripts_dir: str | Path | None = None,
                 addon_versions: AddonVersions | None = None,
                 observability: ObservabilityOptions | bool = True, benchmark: bool = True,
                 aggregated_baseline: bool = False, allow_internet_facing_load_balancers: bool = False,
                 eks_endpoint_access: ClusterEndpointAccess | None = None, cluster_creator_admin: bool = True,
                 network_policies: bool = False, teardown: TeardownTiming | None = None,
                 weights_staging_timeout: Duration | None = None, kubernetes_version: str = KUBERNETES_VERSION,
                 support_type: SupportType = SupportType.EXTENDED, preinstalled_addons: Sequence[str] = (),
                 bundled_load_balancer_controller: bool = True, bundled_keda: bool = True,
                 **stack_props: Any) -> None:
        super().__init__(scope, id, **stack_props)
        if model_bucket is not None and model_bucket_name is not None:
            raise_if_any([Problem(field="model_bucket_name", value=model_bucket_name,
                                  message="is given with model_bucket; the stack has one model bucket",
                                  fix="pass one of them")])
        self._compose(
            self, endpoints=endpoints, vpc=vpc, model_bucket=model_bucket or model_bucket_name,
            hyperpod=HyperPodOptions(cluster_name=hyperpod_cluster_name, availability_zone_id=availability_zone_id,
                                     subnet_ids=hyperpod_subnet_ids, training_plan_arn=training_plan_arn,
                                     ebs_volume_gb=ebs_volume_gb, lifecycle_scripts_dir=lifecycle_scripts_dir,
                                     dependency_chart_dir=dependency_chart_dir),
            cluster=ClusterOptions(existing=existing_cluster, admins=admin_role_arns, subnets=eks_subnets,
                                   endpoint_access=eks_endpoint_access, creator_admin=cluster_creator_admin,
                                   kubernetes_version=kubernetes_version, support_type=support_type,
                                   preinstalled_addons=preinstalled_addons, addon_versions=addon_versions,
                                   network_policies=network_policies,
                                   bundled_load_balancer_controller=bundled_load_balancer_controller,
                                   bundled_keda=bundled_keda),
            observability=(observability if isinstance(observability, ObservabilityOptions)
                           else ObservabilityOptions() if observability else None),
            benchmark=benchmark, aggregated_baseline=aggregated_baseline,
            allow_internet_facing_load_balancers=allow_internet_facing_load_balancers, teardown=teardown,
            weights_staging_timeout=weights_staging_timeout or DEFAULT_WAIT)
