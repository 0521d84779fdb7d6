"""One stack with everything: network, buckets, EKS, HyperPod, the inference operator and the endpoints."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from hyperpod_dpd import DpdSpec, HuggingFaceSource, Problem, S3Source, SpecError, check
from hyperpod_dpd.contracts import stack_outputs
from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, SYSTEM_POOL, router_service
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_AVAILABILITY_ZONE_ID
from hyperpod_dpd.contracts.stack_defaults import hyperpod_cluster_name as default_cluster_name
from hyperpod_dpd.contracts.zones import zone_settings
from hyperpod_dpd.validation import is_sagemaker_name
from hyperpod_dpd_cdk._private.placement import instance_type_problems, zone_problems
from hyperpod_dpd_cdk.benchmark_access import AggregatedTwin, BenchmarkAccess, aggregated_groups
from hyperpod_dpd_cdk.dpd_endpoint import BUILTIN_NAMESPACES, DpdEndpoint
from hyperpod_dpd_cdk.efa_security_group import EfaSecurityGroup
from hyperpod_dpd_cdk.eks_cluster import ExistingEksCluster, HyperPodEksCluster
from hyperpod_dpd_cdk.exposure import ClusterEndpointAccess
from hyperpod_dpd_cdk.hyperpod_cluster import (
    DEFAULT_EBS_GB,
    HyperPodCluster,
    group_name,
    instance_groups_for,
)
from hyperpod_dpd_cdk.hyperpod_dependencies import HyperPodDependencies
from hyperpod_dpd_cdk.inference_operator import InferenceOperator
from hyperpod_dpd_cdk.lifecycle import HyperPodExecutionRole, LifecycleScripts
from hyperpod_dpd_cdk.model_bucket import AccessLogBucket, ModelBucket, model_bucket_problems, spec_bucket_name
from hyperpod_dpd_cdk.network import ExistingVpc, HyperPodNetwork, network_problems
from hyperpod_dpd_cdk.network_policies import EndpointNetworkPolicies
from hyperpod_dpd_cdk.observability import (
    CONTAINER_LOGS_ADDON,
    OBSERVABILITY_ADDON,
    DpdObservability,
    ObservabilityOptions,
    container_log_group,
)
from hyperpod_dpd_cdk.teardown import (
    CausedLogGroups,
    GuardDutyCleanup,
    TeardownBarrier,
    TeardownHandler,
    TeardownTiming,
)
from hyperpod_dpd_cdk.versions import (
    INFERENCE_ADDON_VERSION,
    KUBERNETES_VERSION,
    PREREQUISITE_ADDONS,
    SUPPORTED_KUBERNETES_VERSIONS,
    AddonVersions,
    SupportType,
)
from hyperpod_dpd_cdk.weights_staging import (
    DEFAULT_WAIT,
    HuggingFaceTokenSecret,
    WeightsStaging,
    staged_prefix,
    staging_problems,
    staging_wait_problems,
    weights_prefix,
)

MAX_EBS_GB = 16384  # AWS::SageMaker::Cluster ClusterEbsVolumeConfig.VolumeSizeInGB
MAX_INSTANCE_GROUPS = 100  # AWS::SageMaker::Cluster InstanceGroups maxItems
TRAINING_PLAN_ARN = re.compile(r"^arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:training-plan/.+$")
IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::[0-9]{12}:(role|user)/.+$")


def endpoint_problems(specs: Sequence[DpdSpec], *, region: str, training_plan_arn: str | None,
                      availability_zone_id: str = DEFAULT_AVAILABILITY_ZONE_ID) -> Iterator[Problem]:
    """Every problem of the hosted endpoints, each field prefixed with ``endpoints[i].``."""
    if not specs:
        yield Problem(field="endpoints", value=[], message="is empty; the stack hosts at least one endpoint",
                      fix="pass endpoints=[spec] (the app uses the embedded default spec)")
        return
    for i, spec in enumerate(specs):
        try:
            check(spec)
        except SpecError as error:
            for p in error.problems:
                yield Problem(field=f"endpoints[{i}].{p.field}", value=p.value, message=p.message, fix=p.fix)
        yield from instance_type_problems(spec.instance_type, region, field=f"endpoints[{i}].instance_type",
                                          training_plan_arn=training_plan_arn)
        yield from zone_problems(spec, region=region, availability_zone_id=availability_zone_id,
                                 field=f"endpoints[{i}]")
    keys = [stack_outputs.endpoint_output_key(spec.name) for spec in specs]
    for i, key in enumerate(keys):
        if keys.index(key) != i and specs[keys.index(key)].name != specs[i].name:
            yield Problem(field=f"endpoints[{i}].name", value=specs[i].name,
                          message=f"gives the same stack output key ({key}) as endpoints[{keys.index(key)}]'s "
                                  f"name {specs[keys.index(key)].name!r}", fix="rename one of them")
    for attribute, why in (("name", "it names the instance groups and the operator's pods and services"),
                           ("endpoint_name", "SageMaker endpoint names are unique per account and region")):
        values = [getattr(spec, attribute) for spec in specs]
        counts = Counter(v for v in values if v is not None)
        for i, value in enumerate(values):
            if value is not None and counts[value] > 1 and values.index(value) != i:
                first = values.index(value)
                yield Problem(field=f"endpoints[{i}].{attribute}", value=value,
                              message=f"is also the {attribute} of endpoints[{first}]; {why}",
                              fix=f"give each endpoint a distinct {attribute}")


def option_problems(*, cluster_name: str, ebs_volume_gb: int, groups: int, training_plan_arn: str | None,
                    admin_role_arns: Sequence[str]) -> Iterator[Problem]:
    """Problems with the stack's own options (the specs are checked by :func:`endpoint_problems`)."""
    if not is_sagemaker_name(cluster_name):
        yield Problem(field="hyperpod_cluster_name", value=cluster_name, message="is not a valid HyperPod cluster name",
                      fix="use 1-63 letters, digits and hyphens, starting and ending with a letter or digit")
    if not 1 <= ebs_volume_gb <= MAX_EBS_GB:
        yield Problem(field="ebs_volume_gb", value=ebs_volume_gb, message=f"must be 1-{MAX_EBS_GB}",
                      fix=f"use {DEFAULT_EBS_GB} (the vLLM image and kubelet data live there)")
    if groups > MAX_INSTANCE_GROUPS:
        yield Problem(field="endpoints", value=groups // 2, message=f"need {groups} instance groups; a HyperPod "
                      f"cluster has at most {MAX_INSTANCE_GROUPS}", fix="split the endpoints over two stacks")
    if training_plan_arn is not None and not TRAINING_PLAN_ARN.match(training_plan_arn):
        yield Problem(field="training_plan_arn", value=training_plan_arn, message="is not a training plan ARN",
                      fix="use arn:aws:sagemaker:<region>:<account>:training-plan/<name>")
    for i, arn in enumerate(admin_role_arns):
        if not IAM_PRINCIPAL_ARN.match(arn):
            yield Problem(field=f"admin_role_arns[{i}]", value=arn, message="is not an IAM role or user ARN",
                          fix="use arn:aws:iam::<account>:role/<name>")


def cluster_option_problems(*, kubernetes_version: str, preinstalled_addons: Sequence[str],
                            existing: bool) -> Iterator[Problem]:
    """The Kubernetes version a new cluster gets, and the add-ons declared already running."""
    if kubernetes_version not in SUPPORTED_KUBERNETES_VERSIONS:
        yield Problem(field="kubernetes_version", value=kubernetes_version,
                      message=f"is not one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}: HyperPod lists Kubernetes "
                              "up to 1.34, and the stack's kubectl layer (v34) drives one minor version either way",
                      fix=f"use {KUBERNETES_VERSION}")
    for i, name in enumerate(preinstalled_addons):
        if name not in PREREQUISITE_ADDONS:
            yield Problem(field=f"preinstalled_addons[{i}]", value=name, message="is not an add-on the stack installs",
                          fix=f"name any of {', '.join(PREREQUISITE_ADDONS)} (as 'aws eks list-addons' shows them)")
    if preinstalled_addons and not existing:
        yield Problem(field="preinstalled_addons", value=list(preinstalled_addons),
                      message="apply only to an existing cluster; a new cluster has none",
                      fix="drop them, or pass the existing cluster (-c eks_cluster=...)")


def existing_cluster_problems(existing: ExistingEksCluster | None, *, vpc: ec2.IVpc | ExistingVpc | None,
                              endpoint_access: ClusterEndpointAccess | None = None) -> Iterator[Problem]:
    """An existing cluster needs its VPC, and its IAM OIDC provider (IAM allows one per issuer URL)."""
    if existing is None:
        return
    if vpc is None:
        yield Problem(field="existing_cluster", value=existing.cluster_name,
                      message="needs the cluster's VPC: HyperPod nodes must join the cluster's network",
                      fix="pass vpc= (or -c vpc_id=... -c eks_subnets=... -c hyperpod_subnets=...)")
    if endpoint_access is not None and not endpoint_access.is_default:
        yield Problem(field="eks_endpoint_access", value=endpoint_access.describe(),
                      message="applies to a new cluster only; an existing cluster keeps its own endpoint settings",
                      fix="change it with `aws eks update-cluster-config --resources-vpc-config ...`, or leave it out")
    if existing.oidc_provider_arn is None:
        yield Problem(field="existing_cluster.oidc_provider_arn", value=None,
                      message="is required: the operator's roles trust the cluster's IAM OIDC provider, and IAM "
                              "refuses a second provider for the same issuer URL",
                      fix="pass the ARN from 'aws iam list-open-id-connect-providers' (-c oidc_provider_arn=...); "
                          "if the cluster has none, create it with 'eksctl utils associate-iam-oidc-provider'")


def model_output(source: object, *, staged_bucket: str, region: str) -> dict[str, str] | None:
    """Where an endpoint reads its weights: the S3 source as written, or the stack's staged copy of a Hub revision."""
    if isinstance(source, S3Source):
        return {"bucket": source.bucket, "prefix": source.prefix, "region": source.region or region}
    if isinstance(source, HuggingFaceSource):
        return {"bucket": staged_bucket, "prefix": staged_prefix(source), "region": region}
    return None


class HyperPodDpdStack(Stack):
    """A HyperPod EKS cluster serving one or more DPD endpoints, from nothing (or from your VPC, bucket, cluster).

    Creation order: network, buckets and EKS; then the HyperPod dependency chart; then the HyperPod
    cluster; then the inference operator's prerequisite add-ons and the operator; then the endpoints.
    Every input is checked first and all problems are raised together as one ``SpecError``.

    :param endpoints: the DPD specs to host, one prefill and one decode instance group each.
    :param availability_zone_id: where the GPU capacity is. :default: usw2-az2
    :param vpc: an existing VPC (``IVpc`` or ``ExistingVpc`` ids). :default: - a new VPC
    :param hyperpod_subnet_ids: with ``vpc``, HyperPod subnets by AZ ID. :default: - none
    :param eks_subnets: with ``vpc``, EKS subnets. :default: - its private subnets with egress
    :param model_bucket_name: the specs' bucket already exists; import it. :default: - create the bucket the
        specs name (retained), or one with a generated name when no spec reads S3
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
    :param allow_internet_facing_load_balancers: lift the ALB controller role's explicit deny on
        internet-facing load balancers (a synth warning follows). :default: False
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
    :param stack_props: passed to ``Stack`` (``env``, ``synthesizer``, ``description``, ...).
    """

    def __init__(self, scope: Construct, id: str, *, endpoints: Sequence[DpdSpec],
                 availability_zone_id: str = DEFAULT_AVAILABILITY_ZONE_ID, vpc: ec2.IVpc | ExistingVpc | None = None,
                 hyperpod_subnet_ids: Mapping[str, str] | None = None, eks_subnets: ec2.SubnetSelection | None = None,
                 model_bucket_name: str | None = None, existing_cluster: ExistingEksCluster | None = None,
                 admin_role_arns: Sequence[str] = (), dependency_chart_dir: str | Path | None = None,
                 hyperpod_cluster_name: str | None = None, training_plan_arn: str | None = None,
                 ebs_volume_gb: int = DEFAULT_EBS_GB, lifecycle_scripts_dir: str | Path | None = None,
                 addon_versions: AddonVersions | None = None,
                 observability: ObservabilityOptions | bool = True, benchmark: bool = True,
                 aggregated_baseline: bool = False, allow_internet_facing_load_balancers: bool = False,
                 eks_endpoint_access: ClusterEndpointAccess | None = None, cluster_creator_admin: bool = True,
                 network_policies: bool = False, teardown: TeardownTiming | None = None,
                 weights_staging_timeout: Duration = DEFAULT_WAIT, kubernetes_version: str = KUBERNETES_VERSION,
                 support_type: SupportType = SupportType.EXTENDED, preinstalled_addons: Sequence[str] = (),
                 **stack_props: Any) -> None:
        super().__init__(scope, id, **stack_props)
        specs = tuple(endpoints)
        cluster_name = hyperpod_cluster_name or default_cluster_name(self.stack_name)
        groups = instance_groups_for(specs, ebs_volume_gb=ebs_volume_gb, training_plan_arn=training_plan_arn,
                                     deep_health_checks=dependency_chart_dir is not None)
        groups += aggregated_groups(specs, groups) if aggregated_baseline else []
        problems = [*endpoint_problems(specs, region=self.region, training_plan_arn=training_plan_arn,
                                       availability_zone_id=availability_zone_id),
                    *option_problems(cluster_name=cluster_name, ebs_volume_gb=ebs_volume_gb, groups=len(groups),
                                     training_plan_arn=training_plan_arn, admin_role_arns=admin_role_arns),
                    *existing_cluster_problems(existing_cluster, vpc=vpc, endpoint_access=eks_endpoint_access),
                    *(eks_endpoint_access.problems("eks_endpoint_access") if eks_endpoint_access else ()),
                    *cluster_option_problems(kubernetes_version=kubernetes_version,
                                             preinstalled_addons=preinstalled_addons,
                                             existing=existing_cluster is not None),
                    *(p for i, spec in enumerate(specs) for p in staging_problems(spec, field=f"endpoints[{i}]")),
                    *staging_wait_problems(weights_staging_timeout),
                    *network_problems(availability_zone_id, self.region, vpc=vpc,
                                      hyperpod_subnet_ids=hyperpod_subnet_ids),
                    *model_bucket_problems(specs, existing_bucket_name=model_bucket_name, region=self.region)]
        if problems:
            raise SpecError(problems)
        self.endpoint_specs = specs
        for spec in specs:  # a zone name maps to an AZ ID per account: only preflight can compare them
            for setting in (z for z in zone_settings(spec) if not z.is_id):
                Annotations.of(self).add_warning_v2(
                    "hyperpod-dpd:ZoneNameUnchecked",
                    f"endpoint {spec.name!r}: {setting.field} {setting.value!r} must be the name of "
                    f"{availability_zone_id} in the deploying account, or the pods never schedule; check it with "
                    f"`hyperpod-dpd preflight SPEC --availability-zone-id {availability_zone_id}`, or leave it out")

        logs = AccessLogBucket(self, "AccessLogs")
        self.model_bucket = ModelBucket(self, "ModelBucket", log_bucket=logs.bucket,
                                        existing_bucket_name=model_bucket_name, bucket_name=spec_bucket_name(specs))
        bucket = self.model_bucket.bucket
        prefixes = sorted({p for s in specs if (p := weights_prefix(s)) is not None})

        self.network = HyperPodNetwork(self, "Network", availability_zone_id=availability_zone_id, vpc=vpc,
                                       hyperpod_subnet_ids=hyperpod_subnet_ids, eks_subnets=eks_subnets)
        self.security_group = EfaSecurityGroup(self, "EfaSecurityGroup", vpc=self.network.vpc).security_group
        self.eks = HyperPodEksCluster(self, "Eks", vpc=self.network.vpc, subnets=self.network.eks_subnets,
                                      security_group=self.security_group, admin_role_arns=admin_role_arns,
                                      existing=existing_cluster, addon_versions=addon_versions,
                                      endpoint_access=eks_endpoint_access, cluster_creator_admin=cluster_creator_admin,
                                      network_policy=network_policies,
                                      kubernetes_version=kubernetes_version, support_type=support_type,
                                      preinstalled=preinstalled_addons)
        cluster = self.eks.cluster

        self.lifecycle = LifecycleScripts(self, "LifecycleScripts", log_bucket=logs.bucket,
                                          scripts_dir=lifecycle_scripts_dir)
        self.execution_role = HyperPodExecutionRole(
            self, "ExecutionRole", lifecycle=self.lifecycle, model_bucket=bucket, model_prefixes=prefixes,
            eks_cluster_arn=self.eks.cluster_arn, vpc_id=self.network.vpc.vpc_id,
            subnet_ids=[self.network.hyperpod_subnet.subnet_id],
            security_group_id=self.security_group.security_group_id)
        self.hyperpod_dependencies = HyperPodDependencies(
            self, "HyperPodDependencies", cluster=cluster, region=self.region, chart_dir=dependency_chart_dir)
        self.hyperpod = HyperPodCluster(
            self, "HyperPod", cluster_name=cluster_name, eks_cluster_arn=self.eks.cluster_arn,
            subnet=self.network.hyperpod_subnet, security_group=self.security_group,
            execution_role=self.execution_role.role, lifecycle=self.lifecycle, instance_groups=groups)
        # HyperPod's resiliency features need the dependency chart before the first node (hpcli readme).
        for dependency in (*self.hyperpod_dependencies.charts, self.lifecycle.deployment, self.execution_role.policy,
                           *self.eks.addons, *([self.eks.system_nodes] if self.eks.system_nodes else []),
                           *self.network.hyperpod_routes):
            self.hyperpod.node.add_dependency(dependency)

        self.operator = InferenceOperator(
            self, "InferenceOperator", cluster_name=self.eks.cluster_name, oidc_issuer_url=self.eks.oidc_issuer_url,
            oidc_provider_arn=self.eks.oidc_provider_arn, hyperpod_cluster_arn=self.hyperpod.cluster_arn,
            model_bucket=bucket, model_prefixes=prefixes, log_bucket=logs.bucket, addon_versions=addon_versions,
            allow_internet_facing_load_balancers=allow_internet_facing_load_balancers,
            preinstalled=preinstalled_addons)
        self.operator.after(self.hyperpod)
        if any(s.data_capture is not None and s.data_capture.s3_uri is None for s in specs):
            self.operator.allow_data_capture()
        inference_version = (addon_versions or AddonVersions()).inference
        if inference_version != INFERENCE_ADDON_VERSION:
            Annotations.of(self.operator).add_warning_v2(
                "hyperpod-dpd:InferenceAddonVersion",
                f"the inference add-on is {inference_version}, but the manifests are checked against the CRD of "
                f"{INFERENCE_ADDON_VERSION} that this package ships: fields added or removed since are not known "
                "to the checks")

        # cdk destroy: endpoint manifests -> barrier -> operator add-on -> HyperPod -> EKS -> GuardDuty -> VPC.
        self.teardown_handler = TeardownHandler(self, "Teardown")
        self.teardown = TeardownBarrier(
            self, "TeardownBarrier", handler=self.teardown_handler, cluster_name=self.eks.cluster_name,
            endpoint_names=[s.endpoint_name for s in specs if s.endpoint_name], timing=teardown)
        self.teardown.node.add_dependency(self.operator.addon)
        self.log_groups = CausedLogGroups(
            self, "CausedLogGroups", handler=self.teardown_handler, hyperpod_cluster_name=cluster_name,
            hyperpod_cluster_arn=self.hyperpod.cluster_arn,
            eks_cluster_name=self.eks.cluster_name if self.eks.created else None)
        self.hyperpod.node.add_dependency(self.log_groups.sweep)
        self.guardduty_cleanup: GuardDutyCleanup | None = None
        if vpc is None:  # only the stack's own VPC; GuardDuty's endpoint in yours is yours
            self.guardduty_cleanup = GuardDutyCleanup(self, "GuardDutyCleanup", handler=self.teardown_handler,
                                                      vpc_id=self.network.vpc.vpc_id)
            # Before the subnets, where the endpoint's network interfaces sit (the VPC is referenced already).
            vpc_ = self.network.vpc
            for subnet in (*vpc_.public_subnets, *vpc_.private_subnets, *vpc_.isolated_subnets,
                           self.network.hyperpod_subnet_resource):
                self.guardduty_cleanup.node.add_dependency(subnet)
            self.eks.node.add_dependency(self.guardduty_cleanup)

        namespaces: dict[str, eks.KubernetesManifest] = {}
        for namespace in sorted({s.namespace for s in specs} - BUILTIN_NAMESPACES):
            namespaces[namespace] = eks.KubernetesManifest(
                self, f"Namespace-{namespace}", cluster=cluster, overwrite=True,
                manifest=[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}])
        # A huggingface source: stage the pinned revision into the bucket; the endpoint waits for it.
        # One Job per staged revision; every endpoint serving it waits for it.
        self.weights_staging: dict[str, WeightsStaging] = {}
        self.token_secret: HuggingFaceTokenSecret | None = None
        by_prefix: dict[str, WeightsStaging] = {}
        for spec in specs:
            source = spec.model.source
            if not isinstance(source, HuggingFaceSource):
                continue
            prefix = staged_prefix(source)
            if prefix not in by_prefix:
                token = source.token_secret_arn
                if token is None:
                    self.token_secret = self.token_secret or HuggingFaceTokenSecret(self, "HuggingFaceToken")
                    token = self.token_secret.secret_arn
                by_prefix[prefix] = WeightsStaging(
                    self, f"Weights-{spec.name}", cluster=cluster, trust=self.operator.trust, spec=spec,
                    model_bucket=bucket, namespace=spec.namespace, token_secret_arn=token,
                    wait=weights_staging_timeout,
                    after=[namespaces[spec.namespace]] if spec.namespace in namespaces else [])
            self.weights_staging[spec.name] = by_prefix[prefix]
        staged = {name: (staging.wait,) for name, staging in self.weights_staging.items()}
        self.endpoints: list[DpdEndpoint] = []
        for spec in specs:
            after = (self.operator.addon, self.teardown, *staged.get(spec.name, ()),
                     *([namespaces[spec.namespace]] if spec.namespace in namespaces else []))
            self.endpoints.append(DpdEndpoint(
                self, f"Endpoint-{spec.name}", cluster=cluster, spec=spec,
                group_names={role: group_name(spec, role) for role, _ in spec.roles()},
                staged_bucket=bucket.bucket_name, after=after, create_namespace=False))

        self.network_policies = [EndpointNetworkPolicies(
            self, f"NetworkPolicies-{spec.name}", cluster=cluster, spec=spec, enforced=self.eks.created,
            after=(endpoint.manifest,)) for spec, endpoint in zip(specs, self.endpoints, strict=True)
            if network_policies]

        self.observability: DpdObservability | None = None
        if observability is not False:
            options = observability if isinstance(observability, ObservabilityOptions) else ObservabilityOptions()
            if OBSERVABILITY_ADDON in preinstalled_addons:
                options = dataclasses.replace(options, install_addon=False)
            if CONTAINER_LOGS_ADDON in preinstalled_addons and options.log_group_name is None:
                # Its Fluent Bit writes the Container Insights application group already: watch that one.
                options = dataclasses.replace(options, container_logs=False,
                                              log_group_name=container_log_group(self.eks.cluster_name))
            self.observability = DpdObservability(
                self, "Observability", cluster_name=self.eks.cluster_name, cluster_arn=self.eks.cluster_arn,
                hyperpod_cluster_name=cluster_name, hyperpod_cluster_arn=self.hyperpod.cluster_arn,
                endpoints=specs, options=options)
            self.observability.after(self.hyperpod, *self.eks.addons)

        # hyperpod-dpd bench: the Job's ServiceAccount and role per namespace, and the aggregated twins.
        self.benchmark_access: list[BenchmarkAccess] = []
        for namespace in sorted({s.namespace for s in specs}) if benchmark else []:
            access = BenchmarkAccess(
                self, f"BenchmarkAccess-{namespace}", trust=self.operator.trust, namespace=namespace,
                model_bucket=bucket, cluster=cluster, after=[namespaces[namespace]] if namespace in namespaces else [],
                model_prefixes=sorted({p for s in specs
                                       if s.namespace == namespace and (p := weights_prefix(s)) is not None}))
            self.benchmark_access.append(access)
            CfnOutput(self, f"BenchmarkRoleArn-{namespace}", value=access.role.role_arn,
                      description=f"The role of ServiceAccount {namespace}/{access.service_account_name} that "
                                  "hyperpod-dpd bench uses; --results-s3 s3://<model bucket>/"
                                  f"{access.results_prefix}")
        self.aggregated_twins = [AggregatedTwin(
            self, f"Aggregated-{spec.name}", cluster=cluster, spec=spec, staged_bucket=bucket.bucket_name,
            after=(self.operator.addon, self.teardown, *staged.get(spec.name, ()),
                   *([namespaces[spec.namespace]] if spec.namespace in namespaces else [])))
            for spec in (specs if aggregated_baseline else ())]

        self._deployed_outputs(cluster_name)
        CfnOutput(self, "KubeconfigCommand",
                  value=f"aws eks update-kubeconfig --region {self.region} --name {self.eks.cluster_name}")

    def _deployed_outputs(self, cluster_name: str) -> None:
        """What bench and verify read with --stack / --outputs-file (:mod:`hyperpod_dpd.contracts.stack_outputs`)."""
        CfnOutput(self, stack_outputs.REGION, value=self.region)
        CfnOutput(self, stack_outputs.EKS_CLUSTER, value=self.eks.cluster_name)
        CfnOutput(self, stack_outputs.HYPERPOD_CLUSTER, value=cluster_name)
        CfnOutput(self, stack_outputs.HYPERPOD_CLUSTER_ARN, value=self.hyperpod.cluster_arn)
        CfnOutput(self, stack_outputs.MODEL_BUCKET, value=self.model_bucket.bucket.bucket_name,
                  description="Upload weights to s3://<this>/<model prefix>/ before the endpoints start")
        CfnOutput(self, stack_outputs.SYSTEM_NODE_SELECTOR, value=",".join(
            f"{k}={v}" for k, v in (SYSTEM_POOL if self.eks.system_nodes else {}).items()) or stack_outputs.NO_SELECTOR,
                  description="Labels of the CPU nodes the benchmark Job runs on (none: any non-HyperPod node)")
        if self.observability is not None:
            CfnOutput(self, stack_outputs.AMP_WORKSPACE, value=self.observability.workspace_arn)
        access = {a.namespace: a for a in self.benchmark_access}
        twins = {twin.spec_name: twin for twin in self.aggregated_twins}
        for endpoint in self.endpoints:
            spec = endpoint.spec
            source = spec.model.source
            bench = access.get(spec.namespace)
            twin = twins.get(spec.name)
            value = stack_outputs.endpoint_output(
                name=spec.name, namespace=spec.namespace, router_service=router_service(spec),
                router_namespace=OPERATOR_NAMESPACE, instance_groups={
                    role: group_name(spec, role) for role, _ in spec.roles()},
                model=model_output(source, staged_bucket=self.model_bucket.bucket.bucket_name, region=self.region),
                benchmark={"serviceAccount": bench.service_account_name, "roleArn": bench.role.role_arn}
                if bench is not None else None,
                aggregated={"name": twin.name, "routerService": twin.router_service, "instanceGroup": twin.group_name}
                if twin is not None else None)
            CfnOutput(self, stack_outputs.endpoint_output_key(spec.name), value=self.to_json_string(value),
                      description=f"Endpoint {spec.namespace}/{spec.name} as deployed (read by hyperpod-dpd bench "
                                  "and verify)")
