"""The whole platform as one construct: a HyperPod EKS cluster serving DPD endpoints, in any stack of yours."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Annotations, CfnOutput, Duration, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.aws_eks_v2 import KubernetesManifest
from constructs import Construct

from hyperpod_dpd import DpdSpec, HuggingFaceSource, Problem, S3Source, SpecError, check
from hyperpod_dpd.charts.aggregated import aggregated_spec
from hyperpod_dpd.contracts import stack_outputs
from hyperpod_dpd.contracts.aws_names import ACM_ARN_REGION, bucket_name_error
from hyperpod_dpd.contracts.bench_job import DEFAULT_SERVICE_ACCOUNT
from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, SYSTEM_POOL, router_service
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_AVAILABILITY_ZONE_ID
from hyperpod_dpd.contracts.stack_defaults import hyperpod_cluster_name as default_cluster_name
from hyperpod_dpd.contracts.zones import zone_settings
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd.scaling.shape import unpinned_roles
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
    InstanceGroup,
    group_name,
    instance_groups_for,
)
from hyperpod_dpd_cdk.hyperpod_dependencies import HyperPodDependencies, chart_dir_problems
from hyperpod_dpd_cdk.inference_operator import InferenceOperator
from hyperpod_dpd_cdk.lifecycle import HyperPodExecutionRole, LifecycleScripts
from hyperpod_dpd_cdk.model_bucket import (
    AccessLogBucket,
    ModelBucket,
    known_bucket_name,
    model_bucket_problems,
    spec_bucket_name,
)
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


@dataclass(frozen=True, kw_only=True)
class HyperPodOptions:
    """The HyperPod cluster: its name, where its nodes go, and how they start.

    :param cluster_name: 1-63 letters, digits and hyphens. :default: - ``<stack name>-hp``
    :param availability_zone_id: where the GPU capacity is; every node goes there (EFA connects prefill and
        decode within one AZ). :default: usw2-az2
    :param subnet_ids: with an existing ``vpc``, private subnets for the nodes by AZ ID
        (``{"usw2-az2": "subnet-..."}``), routed to a NAT gateway and to S3. :default: - none; a new VPC makes its own
    :param training_plan_arn: reserved capacity for every instance group. :default: - on-demand
    :param ebs_volume_gb: per node, at /opt/sagemaker. :default: 500
    :param lifecycle_scripts_dir: your own on-create scripts. :default: - the packaged script
    :param dependency_chart_dir: a prepared HyperPod dependency chart (``scripts/prepare_hyperpod_chart.sh``).
        :default: - the NVIDIA and EFA device plugins only
    """

    cluster_name: str | None = None
    availability_zone_id: str = DEFAULT_AVAILABILITY_ZONE_ID
    subnet_ids: Mapping[str, str] | None = None
    training_plan_arn: str | None = None
    ebs_volume_gb: int = DEFAULT_EBS_GB
    lifecycle_scripts_dir: str | Path | None = None
    dependency_chart_dir: str | Path | None = None


@dataclass(frozen=True, kw_only=True)
class ClusterOptions:
    """The EKS cluster HyperPod attaches to.

    :param existing: an existing EKS cluster, in the ``vpc`` you pass. :default: - a new cluster
    :param admins: IAM roles given EKS cluster admin, as role objects or ARNs. :default: - none
    :param subnets: with an existing ``vpc``, the control-plane and system-node subnets (two AZs or more).
        :default: - the VPC's private subnets with egress
    :param endpoint_access: who reaches the EKS API endpoint (new cluster). :default: - public from anywhere and
        private (IAM and access entries authenticate every call)
    :param creator_admin: the cluster creator's bootstrap admin entry (new cluster; changing it later replaces
        the cluster). :default: True
    :param kubernetes_version: a new cluster's version (1.33 or 1.34). :default: 1.34
    :param support_type: a new cluster's ``UpgradePolicy`` (see ``SupportType`` for the cost).
        :default: ``SupportType.EXTENDED``
    :param preinstalled_addons: on an existing cluster, add-ons it runs already, as EKS add-ons or installed
        otherwise (names from ``aws eks list-addons``, any of ``PREREQUISITE_ADDONS``); none of them is created. An
        undeclared self-managed copy fails the deploy (``ResolveConflicts: NONE``). :default: - none
    :param addon_versions: :default: - see ``AddonVersions``
    :param network_policies: NetworkPolicies that let only their peers, the operator's namespace and the metrics
        collectors reach each endpoint's model pods, and the VPC CNI's enforcement of them (new cluster). Off by
        default: not yet verified on HyperPod nodes. :default: False
    :param bundled_load_balancer_controller: the inference add-on runs its own AWS Load Balancer Controller;
        ``False`` on an existing cluster that runs one (see ``InferenceOperator``). :default: True
    :param bundled_keda: the inference add-on runs its own KEDA; ``False`` on an existing cluster that runs
        KEDA. :default: True
    """

    existing: ExistingEksCluster | None = None
    admins: Sequence[str | iam.IRole] = ()
    subnets: ec2.SubnetSelection | None = None
    endpoint_access: ClusterEndpointAccess | None = None
    creator_admin: bool = True
    kubernetes_version: str = KUBERNETES_VERSION
    support_type: SupportType = SupportType.EXTENDED
    preinstalled_addons: Sequence[str] = ()
    addon_versions: AddonVersions | None = None
    network_policies: bool = False
    bundled_load_balancer_controller: bool = True
    bundled_keda: bool = True


def certificate_region_problems(spec: DpdSpec, *, region: str, field: str) -> Iterator[Problem]:
    """ACM serves a certificate only to load balancers in its own region (ACM User Guide, "Supported Regions")."""
    arn = spec.tls.acm_certificate_arn if spec.tls is not None else None
    found = ACM_ARN_REGION.match(arn) if arn is not None else None
    if found is not None and not Token.is_unresolved(region) and found.group(1) != region:
        yield Problem(field=field, value=arn, message=f"is a certificate in {found.group(1)}, but the stack deploys "
                      f"to {region}: the load balancer cannot use it",
                      fix=f"request or import the certificate in ACM in {region}, and use that ARN")


def endpoint_problems(specs: Sequence[DpdSpec], *, region: str, training_plan_arn: str | None,
                      availability_zone_id: str = DEFAULT_AVAILABILITY_ZONE_ID) -> Iterator[Problem]:
    """Every problem of the hosted endpoints, each field prefixed with ``endpoints[i].``."""
    for i, spec in enumerate(specs):
        try:
            check(spec)
        except SpecError as error:
            yield from _of_endpoint(i, error.problems)
        yield from instance_type_problems(spec.instance_type, region, field=f"endpoints[{i}].instance_type",
                                          training_plan_arn=training_plan_arn)
        yield from zone_problems(spec, region=region, availability_zone_id=availability_zone_id,
                                 field=f"endpoints[{i}]")
        yield from certificate_region_problems(spec, region=region, field=f"endpoints[{i}].tls.acm_certificate_arn")
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


def _of_endpoint(i: int, problems: Sequence[Problem]) -> Iterator[Problem]:
    """``problems`` of ``endpoints[i]``, each field prefixed with it."""
    for p in problems:
        yield Problem(field=f"endpoints[{i}].{p.field}", value=p.value, message=p.message, fix=p.fix)


def resolved_endpoints(specs: Sequence[DpdSpec], *, first: int = 0) -> tuple[DpdSpec, ...]:
    """``specs`` with SLO autoscaling's capacities computed and pinned, as ``hyperpod-dpd synth`` pins them.

    The same ``resolve`` as the CLI's synth (the ``advisor`` extra computes one replica's capacity at the SLO),
    so a construct user gets the endpoint the CLI renders. Specs whose capacities are pinned, or that do not
    scale on their SLO, come back as they are and the advisor is not loaded. Every spec's problems are raised
    together, each field prefixed with ``endpoints[i].`` (``i`` counted from ``first``).
    """
    if not any(unpinned_roles(spec) for spec in specs):
        return tuple(specs)
    from hyperpod_dpd.advisor.capacity import resolve  # noqa: PLC0415 - the advisor only for SLO autoscaling

    resolved: list[DpdSpec] = []
    problems: list[Problem] = []
    for i, spec in enumerate(specs, start=first):
        try:
            resolved.append(resolve(spec))
        except SpecError as error:
            problems += _of_endpoint(i, error.problems)
    raise_if_any(problems)
    return tuple(resolved)


def option_problems(*, cluster_name: str, ebs_volume_gb: int, groups: int, training_plan_arn: str | None,
                    admin_role_arns: Sequence[str | iam.IRole]) -> Iterator[Problem]:
    """Problems with the platform's own options (the specs are checked by :func:`endpoint_problems`)."""
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
    for i, arn in enumerate(admin_role_arns):  # a role object's ARN is the role's own business
        if isinstance(arn, str) and not Token.is_unresolved(arn) and not IAM_PRINCIPAL_ARN.match(arn):
            yield Problem(field=f"admin_role_arns[{i}]", value=arn, message="is not an IAM role or user ARN",
                          fix="use arn:aws:iam::<account>:role/<name>")


def cluster_option_problems(*, kubernetes_version: str, preinstalled_addons: Sequence[str], existing: bool,
                            bundled_load_balancer_controller: bool = True,
                            bundled_keda: bool = True) -> Iterator[Problem]:
    """The Kubernetes version a new cluster gets, and the add-ons and controllers declared already running."""
    for field, bundled, what in (("bundled_load_balancer_controller", bundled_load_balancer_controller,
                                  "no Ingress would get a load balancer"),
                                 ("bundled_keda", bundled_keda, "no endpoint's autoscaling would run")):
        if not bundled and not existing:
            yield Problem(field=field, value=False,
                          message=f"applies only to an existing cluster that runs its own; a new cluster has none, "
                                  f"so {what}",
                          fix=f"drop {field}, or pass the existing cluster")
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


def region_problems(region: str, *, availability_zone_id: str) -> Iterator[Problem]:
    """An environment-agnostic stack cannot be placed: an AZ ID is a zone of one region, and HyperPod offers each
    instance type only in some regions; neither can be checked, and a deploy elsewhere fails on the subnet."""
    if Token.is_unresolved(region):
        yield Problem(field="region", value=None,
                      message=f"is not known at synthesis (the stack is environment-agnostic): the HyperPod AZ ID "
                              f"{availability_zone_id!r} is a zone of one region, and neither it nor the instance "
                              "types can be checked against the region the stack will deploy to",
                      fix="give the stack its region: cdk.Stack(app, 'Name', env=cdk.Environment(region='us-west-2')) "
                          "(with this project's app.py: -c region=us-west-2)")


def bucket_name_problems(bucket: s3.IBucket | str | None) -> Iterator[Problem]:
    """A bucket given by name must be a valid S3 bucket name (the specs are held to the same rule)."""
    if isinstance(bucket, str) and not Token.is_unresolved(bucket) and (error := bucket_name_error(bucket)):
        yield Problem(field="model_bucket", value=bucket, message=f"is not a valid S3 bucket name: it {error}",
                      fix="give the bare bucket name (3-63 lower-case letters, digits, '.' and '-'), without s3://")


def option_type_problems(options: Mapping[str, tuple[object, type]]) -> Iterator[Problem]:
    """An option of the wrong type (a dict for ``HyperPodOptions``, say) gets its fix, not an ``AttributeError``."""
    for field, (value, expected) in options.items():
        if value is None or isinstance(value, expected):
            continue
        name = expected.__name__
        fix = (f"pass {field}={name}(**{value!r})" if isinstance(value, dict)
               else f"pass {field}={name}(...) (see its docstring)")
        yield Problem(field=field, value=repr(value), message=f"is a {type(value).__name__}, not {name}", fix=fix)


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


def bucket_object_problems(bucket: s3.IBucket | str | None, specs: Sequence[DpdSpec]) -> Iterator[Problem]:
    """A bucket object whose name is only known at deploy time cannot be checked against the specs' bucket."""
    if isinstance(bucket, str) or bucket is None or known_bucket_name(bucket) is not None:
        return
    if any(isinstance(spec.model.source, S3Source) for spec in specs):
        yield Problem(field="model_bucket", value=bucket.node.path,
                      message="has no name known at synthesis; an endpoint reads the bucket its spec names, so the "
                              "stack must know they are the same",
                      fix="create it with bucket_name= (the specs' bucket), or import it by name "
                          "(s3.Bucket.from_bucket_name)")


def model_output(source: object, *, staged_bucket: str, region: str) -> dict[str, str] | None:
    """Where an endpoint reads its weights: the S3 source as written, or the stack's staged copy of a Hub revision."""
    if isinstance(source, S3Source):
        return {"bucket": source.bucket, "prefix": source.prefix, "region": source.region or region}
    if isinstance(source, HuggingFaceSource):
        return {"bucket": staged_bucket, "prefix": staged_prefix(source), "region": region}
    return None


def bucket_description(specs: Sequence[DpdSpec]) -> str:
    """The model bucket output's description: what the user uploads, and what the stack stages itself."""
    uploads = any(isinstance(s.model.source, S3Source) for s in specs)
    staged = any(isinstance(s.model.source, HuggingFaceSource) for s in specs)
    upload = "Upload weights to s3://<this>/<model prefix>/ before the endpoints start"
    stage = "the stack stages each huggingface source's revision here itself (huggingface/<model id>/<revision>/)"
    if staged and not uploads:
        return f"The model bucket: {stage}; nothing to upload"
    if staged:
        return f"{upload} (the s3 sources); {stage}"
    return upload


def model_prefixes(specs: Sequence[DpdSpec]) -> list[str]:
    """The key prefixes the endpoints read in the model bucket, sorted."""
    return sorted({p for s in specs if (p := weights_prefix(s)) is not None})


class Composition:
    """What :class:`HyperPodDpd` and ``HyperPodDpdStack`` share: the parts, built into the scope each gives.

    ``HyperPodDpd`` builds them into itself; the stack builds them into itself, without a nesting level,
    so its logical ids stay what they have always been. Every part of an endpoint is built by
    :meth:`add_endpoint`, and everything the endpoints share (the instance groups, the prefixes the roles
    read, the names the teardown waits for) is rendered from the whole list: endpoints given at
    construction and endpoints added later give the same template.
    """

    endpoint_specs: tuple[DpdSpec, ...]
    model_bucket: ModelBucket
    network: HyperPodNetwork
    security_group: ec2.ISecurityGroup
    eks: HyperPodEksCluster
    lifecycle: LifecycleScripts
    execution_role: HyperPodExecutionRole
    hyperpod_dependencies: HyperPodDependencies
    hyperpod: HyperPodCluster
    operator: InferenceOperator
    teardown_handler: TeardownHandler
    teardown: TeardownBarrier
    log_groups: CausedLogGroups
    guardduty_cleanup: GuardDutyCleanup | None
    namespaces: dict[str, KubernetesManifest]
    weights_staging: dict[str, WeightsStaging]
    token_secret: HuggingFaceTokenSecret | None
    endpoints: list[DpdEndpoint]
    network_policies: list[EndpointNetworkPolicies]
    observability: DpdObservability | None
    benchmark_access: list[BenchmarkAccess]
    aggregated_twins: list[AggregatedTwin]

    def _one_per_stack(self) -> Iterator[Problem]:
        """A second platform in one stack would collide on the outputs bench and verify read, and on role names."""
        first = next((c for c in self._stack.node.find_all() if isinstance(c, Composition) and c is not self), None)
        if first is not None:
            here = self._scope.node.path or self._stack.stack_name
            yield Problem(field="HyperPodDpd", value=here,
                          message=f"is the second platform in stack {self._stack.stack_name} (the first: "
                                  f"{first.node.path or 'the stack itself'}): the stack's outputs and the "
                                  "operator's role are named after the stack",
                          fix="host the endpoint on the first with add_endpoint(spec), or put this one in a "
                              "stack of its own")

    def _compose(self, scope: Construct, *, endpoints: Sequence[DpdSpec], vpc: ec2.IVpc | ExistingVpc | None,
                 model_bucket: s3.IBucket | str | None, hyperpod: HyperPodOptions, cluster: ClusterOptions,
                 observability: ObservabilityOptions | None, benchmark: bool, aggregated_baseline: bool,
                 allow_internet_facing_load_balancers: bool, teardown: TeardownTiming | None,
                 weights_staging_timeout: Duration) -> None:
        """Check every input (all problems in one ``SpecError``), then build the parts into ``scope``."""
        self._scope = scope
        self._stack = Stack.of(scope)
        self._vpc = vpc
        self._bucket_option = model_bucket
        self._hyperpod_options = hyperpod
        self._cluster_options = cluster
        self._benchmark = benchmark
        self._aggregated_baseline = aggregated_baseline
        self._staging_wait = weights_staging_timeout
        self.cluster_name = hyperpod.cluster_name or default_cluster_name(self._stack.stack_name)
        specs = tuple(endpoints)
        raise_if_any([*self._one_per_stack(), *self._problems(specs)])
        specs = resolved_endpoints(specs)
        region = self._stack.region
        existing_name = model_bucket if isinstance(model_bucket, str) else None

        logs = AccessLogBucket(scope, "AccessLogs")
        self.model_bucket = ModelBucket(
            scope, "ModelBucket", log_bucket=logs.bucket, existing_bucket_name=existing_name,
            existing_bucket=None if model_bucket is None or isinstance(model_bucket, str) else model_bucket,
            bucket_name=spec_bucket_name(specs))
        bucket = self.model_bucket.bucket
        prefixes = model_prefixes(specs)

        self.network = HyperPodNetwork(scope, "Network", availability_zone_id=hyperpod.availability_zone_id, vpc=vpc,
                                       hyperpod_subnet_ids=hyperpod.subnet_ids, eks_subnets=cluster.subnets)
        self.security_group = EfaSecurityGroup(scope, "EfaSecurityGroup", vpc=self.network.vpc).security_group
        self.eks = HyperPodEksCluster(
            scope, "Eks", vpc=self.network.vpc, subnets=self.network.eks_subnets, security_group=self.security_group,
            admin_role_arns=[a if isinstance(a, str) else a.role_arn for a in cluster.admins],
            existing=cluster.existing, addon_versions=cluster.addon_versions, endpoint_access=cluster.endpoint_access,
            cluster_creator_admin=cluster.creator_admin, network_policy=cluster.network_policies,
            kubernetes_version=cluster.kubernetes_version, support_type=cluster.support_type,
            preinstalled=cluster.preinstalled_addons,
            allow_internet_facing_load_balancers=allow_internet_facing_load_balancers)
        eks_cluster = self.eks.cluster

        self.lifecycle = LifecycleScripts(scope, "LifecycleScripts", log_bucket=logs.bucket,
                                          scripts_dir=hyperpod.lifecycle_scripts_dir)
        self.execution_role = HyperPodExecutionRole(
            scope, "ExecutionRole", lifecycle=self.lifecycle, model_bucket=bucket, model_prefixes=prefixes,
            eks_cluster_arn=self.eks.cluster_arn, vpc_id=self.network.vpc.vpc_id,
            subnet_ids=[self.network.hyperpod_subnet.subnet_id],
            security_group_id=self.security_group.security_group_id)
        self.hyperpod_dependencies = HyperPodDependencies(
            scope, "HyperPodDependencies", cluster=eks_cluster, region=region, chart_dir=hyperpod.dependency_chart_dir,
            ownership=self.eks.ownership)
        self.hyperpod = HyperPodCluster(
            scope, "HyperPod", cluster_name=self.cluster_name, eks_cluster_arn=self.eks.cluster_arn,
            subnet=self.network.hyperpod_subnet, security_group=self.security_group,
            execution_role=self.execution_role.role, lifecycle=self.lifecycle,
            instance_groups=self._instance_groups(specs))
        # HyperPod's resiliency features need the dependency chart before the first node (hpcli readme).
        for dependency in (*self.hyperpod_dependencies.charts, self.lifecycle.deployment, self.execution_role.policy,
                           *self.eks.addons, *([self.eks.system_nodes] if self.eks.system_nodes else []),
                           *self.network.hyperpod_routes):
            self.hyperpod.node.add_dependency(dependency)

        self.operator = InferenceOperator(
            scope, "InferenceOperator", cluster_name=self.eks.cluster_name, oidc_issuer_url=self.eks.oidc_issuer_url,
            oidc_provider_arn=self.eks.oidc_provider_arn, hyperpod_cluster_arn=self.hyperpod.cluster_arn,
            model_bucket=bucket, model_prefixes=prefixes, log_bucket=logs.bucket, addon_versions=cluster.addon_versions,
            allow_internet_facing_load_balancers=allow_internet_facing_load_balancers,
            preinstalled=cluster.preinstalled_addons,
            bundled_load_balancer_controller=cluster.bundled_load_balancer_controller,
            bundled_keda=cluster.bundled_keda, ownership=self.eks.ownership)
        self.operator.after(self.hyperpod)
        self._allow_data_capture(specs)
        inference_version = (cluster.addon_versions or AddonVersions()).inference
        if inference_version != INFERENCE_ADDON_VERSION:
            Annotations.of(self.operator).add_warning_v2(
                "hyperpod-dpd:InferenceAddonVersion",
                f"the inference add-on is {inference_version}, but the manifests are checked against the CRD of "
                f"{INFERENCE_ADDON_VERSION} that this package ships: fields added or removed since are not known "
                "to the checks")

        # cdk destroy: endpoint manifests -> barrier -> operator add-on -> HyperPod -> EKS -> GuardDuty -> VPC.
        self.teardown_handler = TeardownHandler(scope, "Teardown")
        self.teardown = TeardownBarrier(
            scope, "TeardownBarrier", handler=self.teardown_handler, cluster_name=self.eks.cluster_name,
            owns_cluster=self.eks.created, timing=teardown, node_security_group_ids=[
                self.security_group.security_group_id,
                *([self.eks.cluster.cluster_security_group_id] if self.eks.created else [])])
        self.teardown.node.add_dependency(self.operator.addon)
        options = self._observability_options(observability, cluster)
        self.log_groups = CausedLogGroups(
            scope, "CausedLogGroups", handler=self.teardown_handler, hyperpod_cluster_name=self.cluster_name,
            hyperpod_cluster_arn=self.hyperpod.cluster_arn,
            eks_cluster_name=self.eks.cluster_name if self.eks.created else None,
            container_insights=options is not None and options.container_logs and options.log_group_name is None)
        self.hyperpod.node.add_dependency(self.log_groups.sweep)
        self.guardduty_cleanup = None
        if vpc is None:  # only the stack's own VPC; GuardDuty's endpoint in yours is yours
            self.guardduty_cleanup = GuardDutyCleanup(scope, "GuardDutyCleanup", handler=self.teardown_handler,
                                                      vpc_id=self.network.vpc.vpc_id)
            # Before the subnets, where the endpoint's network interfaces sit (the VPC is referenced already).
            vpc_ = self.network.vpc
            for subnet in (*vpc_.public_subnets, *vpc_.private_subnets, *vpc_.isolated_subnets,
                           self.network.hyperpod_subnet_resource):
                self.guardduty_cleanup.node.add_dependency(subnet)
            self.eks.node.add_dependency(self.guardduty_cleanup)

        self.observability = None
        if options is not None:
            self.observability = DpdObservability(
                scope, "Observability", cluster_name=self.eks.cluster_name, cluster_arn=self.eks.cluster_arn,
                hyperpod_cluster_name=self.cluster_name, hyperpod_cluster_arn=self.hyperpod.cluster_arn,
                endpoints=(), options=options, ownership=self.eks.ownership)
            self.observability.after(self.hyperpod, *self.eks.addons)
            if self.observability.log_group is not None and self.log_groups.swept_names:
                # Delete order: the add-on (its agents write the groups until then), the metric filters, the
                # application group CloudFormation owns, then the sweep of whatever the agents left or remade.
                self.observability.log_group.node.add_dependency(self.log_groups.sweep)

        self.endpoint_specs = ()
        self.namespaces = {}
        self.weights_staging = {}
        self._staging_by_prefix: dict[str, WeightsStaging] = {}
        self.token_secret = None
        self.endpoints = []
        self.network_policies = []
        self.benchmark_access = []
        self.aggregated_twins = []
        self._build_endpoints(specs)
        self._deployed_outputs()

    def _observability_options(self, observability: ObservabilityOptions | None,
                               cluster: ClusterOptions) -> ObservabilityOptions | None:
        """The options with what the cluster already runs taken out: an add-on it has is not installed again."""
        if observability is None:
            return None
        options = observability
        if OBSERVABILITY_ADDON in cluster.preinstalled_addons:
            options = dataclasses.replace(options, install_addon=False)
        if CONTAINER_LOGS_ADDON in cluster.preinstalled_addons and options.log_group_name is None:
            # Its Fluent Bit writes the Container Insights application group already: watch that one.
            options = dataclasses.replace(options, container_logs=False,
                                          log_group_name=container_log_group(self.eks.cluster_name))
        return options

    def add_endpoint(self, spec: DpdSpec) -> DpdEndpoint:
        """Host one more endpoint, exactly as if it had been passed at construction.

        It gets its instance groups, namespace, weights staging, manifest, NetworkPolicies, alert rules,
        benchmark access, twin and outputs. Its problems, and those it makes with the other endpoints,
        are raised together as one ``SpecError`` before anything is added. SLO autoscaling's capacities
        are computed and pinned as ``hyperpod-dpd synth`` pins them (:func:`resolved_endpoints`).
        """
        raise_if_any(self._problems((*self.endpoint_specs, spec)))
        (spec,) = resolved_endpoints((spec,), first=len(self.endpoint_specs))
        specs = (*self.endpoint_specs, spec)
        name = spec_bucket_name(specs)  # the first endpoint that reads S3 names the bucket the parts create
        if self.model_bucket.created and self.model_bucket.new_bucket_name is None and name is not None:
            self.model_bucket.name_new_bucket(name)
        self.hyperpod.replace_instance_groups(self._instance_groups(specs))
        new_prefixes = [p for p in model_prefixes([spec]) if p not in model_prefixes(self.endpoint_specs)]
        if new_prefixes:
            self.execution_role.add_model_prefixes(new_prefixes)
            self.operator.add_model_prefixes(new_prefixes)
        self._allow_data_capture([spec])
        self._build_endpoints((spec,))
        self._bucket_output.description = bucket_description(self.endpoint_specs)
        return self.endpoints[-1]

    def _problems(self, specs: Sequence[DpdSpec]) -> list[Problem]:
        """Every problem of the options and of ``specs`` together."""
        hyperpod, cluster, region = self._hyperpod_options, self._cluster_options, self._stack.region
        bucket = self._bucket_option
        existing_bucket_name = bucket if isinstance(bucket, str) else (
            known_bucket_name(bucket) if bucket is not None else None)
        return [*endpoint_problems(specs, region=region, training_plan_arn=hyperpod.training_plan_arn,
                                   availability_zone_id=hyperpod.availability_zone_id),
                *option_problems(cluster_name=self.cluster_name, ebs_volume_gb=hyperpod.ebs_volume_gb,
                                 groups=len(self._instance_groups(specs)), training_plan_arn=hyperpod.training_plan_arn,
                                 admin_role_arns=cluster.admins),
                *existing_cluster_problems(cluster.existing, vpc=self._vpc, endpoint_access=cluster.endpoint_access),
                *(cluster.endpoint_access.problems("eks_endpoint_access") if cluster.endpoint_access else ()),
                *cluster_option_problems(kubernetes_version=cluster.kubernetes_version,
                                         preinstalled_addons=cluster.preinstalled_addons,
                                         existing=cluster.existing is not None,
                                         bundled_load_balancer_controller=cluster.bundled_load_balancer_controller,
                                         bundled_keda=cluster.bundled_keda),
                *(p for i, spec in enumerate(specs) for p in staging_problems(spec, field=f"endpoints[{i}]")),
                *staging_wait_problems(self._staging_wait),
                *network_problems(hyperpod.availability_zone_id, region, vpc=self._vpc,
                                  hyperpod_subnet_ids=hyperpod.subnet_ids),
                *model_bucket_problems(specs, existing_bucket_name=existing_bucket_name, region=region),
                *region_problems(region, availability_zone_id=hyperpod.availability_zone_id),
                *bucket_name_problems(bucket),
                *bucket_object_problems(bucket, specs),
                *chart_dir_problems(hyperpod.dependency_chart_dir)]

    def _instance_groups(self, specs: Sequence[DpdSpec]) -> list[InstanceGroup]:
        """One prefill and one decode group per endpoint, then each aggregated twin's group."""
        hyperpod = self._hyperpod_options
        groups = instance_groups_for(specs, ebs_volume_gb=hyperpod.ebs_volume_gb,
                                     training_plan_arn=hyperpod.training_plan_arn,
                                     deep_health_checks=hyperpod.dependency_chart_dir is not None)
        return groups + (aggregated_groups(specs, groups) if self._aggregated_baseline else [])

    def _allow_data_capture(self, specs: Sequence[DpdSpec]) -> None:
        if any(s.data_capture is not None and s.data_capture.s3_uri is None for s in specs):
            self.operator.allow_data_capture()

    def _build_endpoints(self, specs: Sequence[DpdSpec]) -> None:
        """Every part of each endpoint of ``specs``, in the order the operator needs them."""
        scope, cluster, bucket = self._scope, self.eks.cluster, self.model_bucket.bucket
        zone_id = self._hyperpod_options.availability_zone_id
        self.endpoint_specs = (*self.endpoint_specs, *specs)
        for spec in specs:  # a zone name maps to an AZ ID per account: only preflight can compare them
            for setting in (z for z in zone_settings(spec) if not z.is_id):
                Annotations.of(scope).add_warning_v2(
                    "hyperpod-dpd:ZoneNameUnchecked",
                    f"endpoint {spec.name!r}: {setting.field} {setting.value!r} must be the name of "
                    f"{zone_id} in the deploying account, or the pods never schedule; check it with "
                    f"`hyperpod-dpd preflight SPEC --availability-zone-id {zone_id}`, or leave it out")

        ownership = self.eks.ownership
        for namespace in sorted({s.namespace for s in specs} - BUILTIN_NAMESPACES - set(self.namespaces)):
            if ownership.creates_namespace(namespace):
                self.namespaces[namespace] = ownership.namespace(scope, f"Namespace-{namespace}", cluster=cluster,
                                                                 namespace=namespace)
        # A huggingface source: stage the pinned revision into the bucket; the endpoint waits for it.
        # One Job per staged revision; every endpoint serving it waits for it.
        for spec in specs:
            source = spec.model.source
            if not isinstance(source, HuggingFaceSource):
                continue
            prefix = staged_prefix(source)
            if prefix not in self._staging_by_prefix:
                token = source.token_secret_arn
                if token is None:
                    self.token_secret = self.token_secret or HuggingFaceTokenSecret(scope, "HuggingFaceToken")
                    token = self.token_secret.secret_arn
                self._staging_by_prefix[prefix] = WeightsStaging(
                    scope, f"Weights-{spec.name}", cluster=cluster, trust=self.operator.trust, spec=spec,
                    model_bucket=bucket, namespace=spec.namespace, token_secret_arn=token, wait=self._staging_wait,
                    after=self._namespace_manifest(spec.namespace))
            self.weights_staging[spec.name] = self._staging_by_prefix[prefix]
        built = []
        for spec in specs:
            endpoint = DpdEndpoint(
                scope, f"Endpoint-{spec.name}", cluster=cluster, spec=spec,
                group_names={role: group_name(spec, role) for role, _ in spec.roles()},
                staged_bucket=bucket.bucket_name, after=self._endpoint_after(spec), create_namespace=False)
            self.endpoints.append(endpoint)
            built.append(endpoint)

        if self._cluster_options.network_policies:
            self.network_policies += [EndpointNetworkPolicies(
                scope, f"NetworkPolicies-{spec.name}", cluster=cluster, spec=spec, enforced=self.eks.created,
                after=(endpoint.manifest,)) for spec, endpoint in zip(specs, built, strict=True)]
        if self.observability is not None:
            for spec in specs:
                self.observability.add_endpoint(spec)

        # hyperpod-dpd bench: the Job's ServiceAccount and role per namespace, and the aggregated twins.
        access = {a.namespace: a for a in self.benchmark_access}
        for namespace in sorted({s.namespace for s in specs}) if self._benchmark else []:
            prefixes = model_prefixes([s for s in specs if s.namespace == namespace])
            if namespace in access:
                access[namespace].add_model_prefixes(prefixes)
                continue
            bench = BenchmarkAccess(
                scope, f"BenchmarkAccess-{namespace}", trust=self.operator.trust, namespace=namespace,
                model_bucket=bucket, cluster=cluster, after=self._namespace_manifest(namespace),
                model_prefixes=prefixes, service_account=ownership.own_name(DEFAULT_SERVICE_ACCOUNT),
                overwrite=ownership.owned)
            self.benchmark_access.append(bench)
            self._output(f"BenchmarkRoleArn-{namespace}", value=bench.role.role_arn,
                         description=f"The role of ServiceAccount {namespace}/{bench.service_account_name} that "
                                     "hyperpod-dpd bench uses; --results-s3 s3://<model bucket>/"
                                     f"{bench.results_prefix}")
        self.aggregated_twins += [AggregatedTwin(
            scope, f"Aggregated-{spec.name}", cluster=cluster, spec=spec, staged_bucket=bucket.bucket_name,
            after=self._endpoint_after(spec)) for spec in (specs if self._aggregated_baseline else ())]
        # cdk destroy waits for what the operator made for these endpoints and their twins, and only that.
        self.teardown.add_endpoints([*specs, *(aggregated_spec(s) for s in specs if self._aggregated_baseline)])
        for endpoint in built:
            self._endpoint_output(endpoint.spec)

    def _namespace_manifest(self, namespace: str) -> list[KubernetesManifest]:
        """The manifest of ``namespace``, when the parts create it (not a built-in one)."""
        return [self.namespaces[namespace]] if namespace in self.namespaces else []

    def _endpoint_after(self, spec: DpdSpec) -> tuple[Construct, ...]:
        """What an endpoint's manifest (and its twin's) follows: operator, barrier, its weights and namespace."""
        staged = (self.weights_staging[spec.name].wait,) if spec.name in self.weights_staging else ()
        return (self.operator.addon, self.teardown, *staged, *self._namespace_manifest(spec.namespace))

    def _output(self, id: str, *, value: str, description: str | None = None) -> CfnOutput:
        """A stack output named ``id`` (without its punctuation) whether or not the parts are nested in a construct:
        bench and verify read the outputs by these names."""
        output = CfnOutput(self._scope, id, value=value, description=description)
        output.override_logical_id(re.sub(r"[^A-Za-z0-9]", "", id))
        return output

    def _deployed_outputs(self) -> None:
        """What bench and verify read with --stack / --outputs-file (:mod:`hyperpod_dpd.contracts.stack_outputs`)."""
        self._output(stack_outputs.REGION, value=self._stack.region)
        self._output(stack_outputs.EKS_CLUSTER, value=self.eks.cluster_name)
        self._output(stack_outputs.HYPERPOD_CLUSTER, value=self.cluster_name)
        self._output(stack_outputs.HYPERPOD_CLUSTER_ARN, value=self.hyperpod.cluster_arn)
        self._bucket_output = self._output(stack_outputs.MODEL_BUCKET, value=self.model_bucket.bucket.bucket_name,
                                           description=bucket_description(self.endpoint_specs))
        self._output(stack_outputs.SYSTEM_NODE_SELECTOR, value=",".join(
            f"{k}={v}" for k, v in (SYSTEM_POOL if self.eks.system_nodes else {}).items()) or stack_outputs.NO_SELECTOR,
                     description="Labels of the CPU nodes the benchmark Job runs on (none: any non-HyperPod node)")
        if self.observability is not None:
            self._output(stack_outputs.AMP_WORKSPACE, value=self.observability.workspace_arn)
        self._output("KubeconfigCommand",
                     value=f"aws eks update-kubeconfig --region {self._stack.region} --name {self.eks.cluster_name}")

    def _endpoint_output(self, spec: DpdSpec) -> None:
        """The endpoint as deployed, for bench and verify (its routes, groups, weights, benchmark role, twin)."""
        bench = next((a for a in self.benchmark_access if a.namespace == spec.namespace), None)
        twin = next((t for t in self.aggregated_twins if t.spec_name == spec.name), None)
        value = stack_outputs.endpoint_output(
            name=spec.name, namespace=spec.namespace, router_service=router_service(spec),
            router_namespace=OPERATOR_NAMESPACE, instance_groups={
                role: group_name(spec, role) for role, _ in spec.roles()},
            model=model_output(spec.model.source, staged_bucket=self.model_bucket.bucket.bucket_name,
                               region=self._stack.region),
            benchmark={"serviceAccount": bench.service_account_name, "roleArn": bench.role.role_arn}
            if bench is not None else None,
            aggregated={"name": twin.name, "routerService": twin.router_service, "instanceGroup": twin.group_name}
            if twin is not None else None)
        self._output(stack_outputs.endpoint_output_key(spec.name), value=self._stack.to_json_string(value),
                     description=f"Endpoint {spec.namespace}/{spec.name} as deployed (read by hyperpod-dpd bench "
                                 "and verify)")


class HyperPodDpd(Construct, Composition):
    """A HyperPod EKS cluster serving DPD endpoints, inside any stack of yours.

    Creation order: network, buckets and EKS; then the HyperPod dependency chart; then the HyperPod
    cluster; then the inference operator's prerequisite add-ons and the operator; then the endpoints.
    Every input is checked first and all problems are raised together as one ``SpecError``.
    :meth:`add_endpoint` hosts one more endpoint on the same cluster, so a platform may start empty and get
    its endpoints later (at synthesis it must host one: a HyperPod cluster needs an instance group). One per
    stack: the operator's role name and the outputs that ``hyperpod-dpd bench`` and ``verify`` read are
    named after the stack.

    The parts, for adding your own resources beside them (docs/stack.md, "What the construct exposes"):
    ``eks`` (``eks.cluster`` is the ``aws_eks_v2`` cluster: ``add_helm_chart``, ``add_manifest``),
    ``hyperpod`` (the HyperPod cluster: ``cluster_arn``, ``instance_groups``), ``network`` (``vpc``,
    ``hyperpod_subnet``), ``security_group``, ``model_bucket`` (a ``ModelBucket``; ``model_bucket.bucket``
    is the ``s3.IBucket``), ``execution_role`` (the nodes' role), ``operator`` (the inference operator
    add-on and its roles), ``endpoints`` (one ``DpdEndpoint`` per spec, in order) and ``endpoint_specs``,
    ``weights_staging`` (by endpoint name), ``token_secret``, ``observability``, ``benchmark_access``,
    ``aggregated_twins``, ``network_policies``, ``namespaces``, ``teardown`` and ``cluster_name``; and the
    rest of the platform's own parts: ``lifecycle`` (the nodes' lifecycle scripts), ``hyperpod_dependencies``
    (the dependency chart and device plugins), ``teardown_handler``, ``log_groups`` and ``guardduty_cleanup``.

    :param endpoints: the DPD specs to host, one prefill and one decode instance group each.
        :default: - none yet: add them with :meth:`add_endpoint` before synthesis
    :param vpc: an existing VPC (``IVpc``, or ``ExistingVpc`` ids). :default: - a new VPC
    :param model_bucket: the specs' bucket exists already: a bucket object, or its name.
        :default: - create the bucket the specs name (retained), or one with a generated name when no spec reads S3
    :param hyperpod: the HyperPod cluster. :default: ``HyperPodOptions()``
    :param cluster: the EKS cluster. :default: ``ClusterOptions()``: a new cluster
    :param observability: the observability add-on, AMP workspace, DPD alert rules, log alarms and alert
        topic (``DpdObservability``); ``None`` leaves them out. :default: ``ObservabilityOptions()``
    :param benchmark: an IAM role (IRSA) and ServiceAccount per endpoint namespace for ``hyperpod-dpd bench``
        (``BenchmarkAccess``). :default: True
    :param aggregated_baseline: host each endpoint's aggregated twin (``<name>-agg``) on one more one-node
        instance group, the baseline of ``hyperpod-dpd bench --aggregated`` (``AggregatedTwin``). :default: False
    :param allow_internet_facing_load_balancers: lift the explicit deny on internet-facing load balancers
        that the ALB controller's role and a new cluster's role carry (a synth warning follows). :default: False
    :param teardown: how long ``cdk destroy`` waits for what the operator created outside CloudFormation
        (``TeardownBarrier``). :default: - ``TeardownTiming()``: 10 minutes' grace, failure at 50
    :param weights_staging_timeout: how long ``cdk deploy`` waits for a ``huggingface`` source to be staged
        into the model bucket (``WeightsStaging``; 15 minutes to 12 hours). :default: 4 hours
    """

    def __init__(self, scope: Construct, id: str, *, endpoints: Sequence[DpdSpec] = (),
                 vpc: ec2.IVpc | ExistingVpc | None = None, model_bucket: s3.IBucket | str | None = None,
                 hyperpod: HyperPodOptions | None = None, cluster: ClusterOptions | None = None,
                 observability: ObservabilityOptions | None = ObservabilityOptions(),  # noqa: B008 - frozen
                 benchmark: bool = True, aggregated_baseline: bool = False,
                 allow_internet_facing_load_balancers: bool = False, teardown: TeardownTiming | None = None,
                 weights_staging_timeout: Duration | None = None) -> None:
        super().__init__(scope, id)
        raise_if_any(option_type_problems({
            "hyperpod": (hyperpod, HyperPodOptions), "cluster": (cluster, ClusterOptions),
            "observability": (observability, ObservabilityOptions), "teardown": (teardown, TeardownTiming),
            "weights_staging_timeout": (weights_staging_timeout, Duration)}))  # jsii interfaces allow no isinstance
        self._compose(self, endpoints=endpoints, vpc=vpc, model_bucket=model_bucket,
                      hyperpod=hyperpod or HyperPodOptions(), cluster=cluster or ClusterOptions(),
                      observability=observability, benchmark=benchmark,
                      aggregated_baseline=aggregated_baseline,
                      allow_internet_facing_load_balancers=allow_internet_facing_load_balancers, teardown=teardown,
                      weights_staging_timeout=weights_staging_timeout or DEFAULT_WAIT)
