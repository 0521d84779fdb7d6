"""The SageMaker HyperPod Inference Operator as an EKS add-on, with its IAM roles and prerequisite add-ons."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

from aws_cdk import Annotations, Aws, CfnJson, Fn, Stack, Token
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct

from hyperpod_dpd import Problem
from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE
from hyperpod_dpd.contracts.stack_defaults import INFERENCE_ADDON
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd_cdk._late import at_synthesis
from hyperpod_dpd_cdk._private.alb_policy import controller_statements, wildcard_findings
from hyperpod_dpd_cdk._private.nag import acknowledge, arn_of, managed_policy
from hyperpod_dpd_cdk.exposure import INTERNET_FACING_WARNING, OWN_CONTROLLER_WARNING, deny_internet_facing
from hyperpod_dpd_cdk.lifecycle import PrefixReads, prefix_findings
from hyperpod_dpd_cdk.model_bucket import secure_bucket
from hyperpod_dpd_cdk.ownership import ClusterOwnership
from hyperpod_dpd_cdk.versions import AddonVersions

# The service accounts the add-on runs as (add-on install; the Helm install used other names, and a
# role trusting those fails AssumeRoleWithWebIdentity with 403).
CONTROLLER_SA = f"system:serviceaccount:{OPERATOR_NAMESPACE}:hyperpod-inference-controller-manager"
ALB_SA = f"system:serviceaccount:{OPERATOR_NAMESPACE}:aws-load-balancer-controller"
KEDA_SA = f"system:serviceaccount:{OPERATOR_NAMESPACE}:keda-operator"
S3_CSI_SA = "system:serviceaccount:kube-system:s3-csi-driver-sa"
S3_CSI_REASON = "Mountpoint reads the model files under each endpoint's prefix only (prefix/*)."
GATED_MODEL_SA_PATTERN = "system:serviceaccount:*:hyperpod-inference-service-account*"
STS_AUDIENCE = "sts.amazonaws.com"
# The add-on's chart refuses any other execution role name, and AmazonSageMakerHyperPodInferenceAccess
# passes only roles named so (iam:PassRole on role/SageMakerHyperPodInference*).
EXECUTION_ROLE_PREFIX = "SageMakerHyperPodInference"
MAX_ROLE_NAME = 64
FSX_CSI_ADDON = "aws-fsx-csi-driver"
# The operator's chart installs its AWS Load Balancer Controller and KEDA subcharts only under these
# conditions (aws/sagemaker-hyperpod-cli helm_chart/HyperPodHelmChart/charts/inference-operator/Chart.yaml at
# 0986f2cc, operator v3.3: ``alias: alb ... condition: alb.enabled``, ``alias: keda ... condition:
# keda.enabled``); the add-on takes
# the chart's values as its configuration, the same ``alb``/``keda`` objects AWS's add-on setup passes.
BUNDLED_ALB = "alb"
BUNDLED_KEDA = "keda"
DATA_CAPTURE_PREFIX = "data-capture/"


def _after_inline_policy(addon: eks_l1.CfnAddon, role: iam.Role) -> None:
    """Create ``addon`` after ``role``'s inline policy, if the role has one by synthesis.

    The S3 CSI driver's role gets its statements from the first endpoint that reads S3, which may be
    added later or never (FSx and PVC sources): a role without statements has no ``DefaultPolicy``.
    """
    def depend() -> None:
        policy = role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            addon.node.add_dependency(policy)

    if role.node.try_find_child("DefaultPolicy") is not None:
        depend()
    else:
        at_synthesis(role, depend)


def execution_role_name(stack_name: str, region: str) -> str:
    """``SageMakerHyperPodInference-<stack>-<hash>-<region>``: the prefix, unique per stack and region, <= 64.

    IAM role names are global to the account, so the region is part of the name (a token when the stack
    is environment-agnostic: every region name fits the 14 characters left for it).
    """
    slug = re.sub(r"[^A-Za-z0-9-]", "-", stack_name)[:13].strip("-")
    digest = hashlib.sha256(stack_name.encode()).hexdigest()[:8]
    return f"{EXECUTION_ROLE_PREFIX}-{slug}-{digest}-{region}"


class IrsaTrust(Construct):
    """Principals for IAM roles for service accounts: the OIDC provider and ``sub``/``aud`` conditions.

    The issuer of a new cluster is only known at deploy time, and a condition *key* cannot hold a
    token, so the conditions go through ``CfnJson``.
    """

    def __init__(self, scope: Construct, id: str, *, issuer_url: str, provider_arn: str | None = None) -> None:
        super().__init__(scope, id)
        if provider_arn is None:
            provider = eks.OidcProviderNative(self, "Provider", url=issuer_url)
            provider_arn = provider.open_id_connect_provider_arn
        self.provider_arn = provider_arn
        self.issuer = (Fn.select(1, Fn.split("https://", issuer_url)) if Token.is_unresolved(issuer_url)
                       else issuer_url.removeprefix("https://"))

    def principal(self, id: str, subject: str, *, like: bool = False) -> iam.IPrincipal:
        """A web-identity principal for exactly ``subject`` (``StringEquals``), or a pattern (``StringLike``)."""
        aud = f"{self.issuer}:aud"
        sub = f"{self.issuer}:sub"
        conditions: dict[str, object]
        if like:
            conditions = {"StringLike": CfnJson(self, f"{id}Sub", value={sub: subject}),
                          "StringEquals": CfnJson(self, f"{id}Aud", value={aud: STS_AUDIENCE})}
        else:
            conditions = {"StringEquals": CfnJson(self, f"{id}Conditions", value={sub: subject, aud: STS_AUDIENCE})}
        return iam.WebIdentityPrincipal(self.provider_arn, conditions)


class InferenceOperator(Construct):
    """The operator add-on (v1.4.0, operator v3.3) and everything it needs, in order.

    Creates the IAM OIDC provider (unless given), the operator's roles (each trusting only its named
    service account; the execution role named with the ``SageMakerHyperPodInference`` prefix the add-on
    requires), the TLS certificate bucket, the cert-manager, Mountpoint for S3 CSI (reading only the
    model prefixes), FSx for Lustre CSI (the operator refuses to start without its CSIDriver, FSx or
    not) and metrics-server add-ons, then the operator add-on after them and after its roles' policies. Call
    :meth:`after` with the HyperPod cluster so nothing starts before HyperPod nodes exist.

    :param cluster_name: the EKS cluster. :param oidc_issuer_url: its OIDC issuer.
    :param oidc_provider_arn: an existing IAM OIDC provider for it. :default: - a new one
    :param hyperpod_cluster_arn: the HyperPod cluster the operator serves.
    :param model_bucket: the weights. :param model_prefixes: what the S3 CSI driver may read.
    :param log_bucket: access logs of the TLS bucket.
    :param addon_versions: :default: - the operator at v1.4.0-eksbuild.1, the others at EKS defaults
    :param allow_internet_facing_load_balancers: lift the explicit deny on internet-facing load balancers
        from the ALB controller's role (a synth warning says what that exposes). :default: False
    :param preinstalled: prerequisite add-ons the cluster runs already; they are not created (their
        running copies need what the stack would have given them, such as read access to the model
        prefixes for the S3 CSI driver's role). :default: - none
    :param bundled_load_balancer_controller: let the add-on run its own AWS Load Balancer Controller
        (``alb.enabled``). ``False`` on a cluster that runs one already: two controllers would manage the
        same Ingresses and share one backend security group name. No controller role is created then;
        the cluster's controller needs the ``elasticloadbalancing`` permissions for the operator's
        Ingresses. :default: True
    :param bundled_keda: let the add-on run its own KEDA (``keda.enabled``). ``False`` on a cluster that
        runs KEDA already (two KEDA operators fight over the external metrics API); no KEDA role is
        created then, and the cluster's KEDA needs read access to the metrics endpoints scale on.
        :default: True
    :param ownership: what the stack may change on the cluster (``ClusterOwnership``). :default: - a cluster the
        stack created
    """

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, oidc_issuer_url: str,
                 hyperpod_cluster_arn: str, model_bucket: s3.IBucket, model_prefixes: Sequence[str],
                 log_bucket: s3.IBucket, oidc_provider_arn: str | None = None,
                 addon_versions: AddonVersions | None = None,
                 allow_internet_facing_load_balancers: bool = False, preinstalled: Sequence[str] = (),
                 bundled_load_balancer_controller: bool = True, bundled_keda: bool = True,
                 ownership: ClusterOwnership | None = None) -> None:
        super().__init__(scope, id)
        self._ownership = ownership or ClusterOwnership.of_stack(self)
        if allow_internet_facing_load_balancers and not bundled_load_balancer_controller:
            raise_if_any([Problem(
                field="allow_internet_facing_load_balancers", value=True,
                message="lifts a deny from the bundled AWS Load Balancer Controller's role, but the bundled "
                        "controller is off: the cluster's own controller keeps whatever its role allows",
                fix="drop allow_internet_facing_load_balancers, or keep the bundled controller")])
        versions = addon_versions or AddonVersions()
        self._cluster_name = cluster_name
        self._preinstalled = frozenset(preinstalled)
        self.data_capture_allowed = False
        self.trust = IrsaTrust(self, "Oidc", issuer_url=oidc_issuer_url, provider_arn=oidc_provider_arn)
        self.tls_bucket = secure_bucket(self, "TlsBucket", log_bucket=log_bucket, log_prefix="tls-bucket/")

        self.execution_role = self._execution_role()
        self.alb_role: iam.Role | None = None
        if bundled_load_balancer_controller:
            self.alb_role = iam.Role(self, "AlbControllerRole", assumed_by=self.trust.principal("Alb", ALB_SA),
                                     description="HyperPod inference: AWS Load Balancer Controller")
            for statement in controller_statements():
                self.alb_role.add_to_policy(statement)
            if allow_internet_facing_load_balancers:
                Annotations.of(self.alb_role).add_warning_v2("hyperpod-dpd:InternetFacingAllowed",
                                                             INTERNET_FACING_WARNING)
            else:
                self.alb_role.add_to_policy(deny_internet_facing())
        else:
            Annotations.of(self).add_warning_v2("hyperpod-dpd:OwnLoadBalancerController", OWN_CONTROLLER_WARNING)
        self.keda_role: iam.Role | None = None
        if bundled_keda:
            self.keda_role = iam.Role(self, "KedaRole", assumed_by=self.trust.principal("Keda", KEDA_SA),
                                      description="HyperPod inference: KEDA reads the metrics it scales on")
            self.keda_role.add_to_policy(iam.PolicyStatement(
                actions=["cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics",
                         "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
                resources=["*"]))
        self.gated_model_role = iam.Role(
            self, "GatedModelRole", description="HyperPod inference: gated JumpStart model downloads",
            assumed_by=iam.CompositePrincipal(iam.ServicePrincipal("sagemaker.amazonaws.com"),
                                              self.trust.principal("Gated", GATED_MODEL_SA_PATTERN, like=True)),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerHyperPodGatedModelAccess")])
        self.s3_csi_role = iam.Role(self, "S3CsiRole", assumed_by=self.trust.principal("S3Csi", S3_CSI_SA),
                                    description="Mountpoint for S3 CSI driver: read the model prefixes")
        # Mountpoint lists from the mount's prefix, which the operator may leave empty: list the whole bucket
        # (names only, as every AWS reference grants), read objects only under the model prefixes.
        self._model_bucket = model_bucket
        self._model_reads = PrefixReads(self.s3_csi_role, model_bucket, model_prefixes, list_whole_bucket=True)

        # Defaults: these run on the system node group, so they need no tolerations for GPU nodes.
        self.cert_manager = self._prerequisite("cert-manager", versions.cert_manager)
        self.s3_csi = self._prerequisite("aws-mountpoint-s3-csi-driver", versions.mountpoint_s3_csi,
                                         role=self.s3_csi_role)
        self.metrics_server = self._prerequisite("metrics-server", versions.metrics_server)
        # No IAM role: the stack provisions no FSx volumes, and static volumes need none.
        self.fsx_csi = self._prerequisite(FSX_CSI_ADDON, versions.fsx_csi)
        self.prerequisites: list[eks_l1.CfnAddon] = [a for a in (self.cert_manager, self.s3_csi, self.fsx_csi,
                                                                 self.metrics_server) if a is not None]
        self.addon = self._addon(INFERENCE_ADDON, versions.inference, {
            "executionRoleArn": self.execution_role.role_arn,
            "tlsCertificateS3Bucket": self.tls_bucket.bucket_name,
            "hyperpodClusterArn": hyperpod_cluster_arn,
            "jumpstartGatedModelDownloadRoleArn": self.gated_model_role.role_arn,
            BUNDLED_ALB: ({"enabled": True, "serviceAccount": {"create": True, "roleArn": self.alb_role.role_arn}}
                          if self.alb_role is not None else {"enabled": False}),
            BUNDLED_KEDA: ({"enabled": True, "auth": {"aws": {"irsa": {"enabled": True,
                                                                       "roleArn": self.keda_role.role_arn}}}}
                           if self.keda_role is not None else {"enabled": False}),
        })
        for prerequisite in self.prerequisites:
            self.addon.node.add_dependency(prerequisite)
        # A controller that starts before its role's inline policy exists logs AccessDenied until IAM catches up.
        operator_roles = [r for r in (self.execution_role, self.alb_role, self.keda_role) if r is not None]
        for addon, roles in ((self.addon, operator_roles),
                             *([(self.s3_csi, (self.s3_csi_role,))] if self.s3_csi is not None else [])):
            for role in roles:
                _after_inline_policy(addon, role)
        self._acknowledge(model_bucket, model_prefixes)

    def after(self, *dependencies: IConstruct) -> None:
        """Create the add-ons only after ``dependencies`` (the HyperPod cluster): they need nodes.

        The operator add-on follows through its prerequisites (and it references the HyperPod ARN).
        """
        for addon in self.prerequisites:
            for dependency in dependencies:
                addon.node.add_dependency(dependency)

    def add_model_prefixes(self, prefixes: Sequence[str]) -> None:
        """Let the S3 CSI driver read these model prefixes too (an endpoint added after construction)."""
        self._model_reads.add(prefixes)
        acknowledge(self.s3_csi_role, "IAM5", S3_CSI_REASON, prefix_findings(self._model_bucket, prefixes))

    def allow_data_capture(self) -> None:
        """Let the operator's ALB access logs (``dataCapture`` without ``s3Uri``) land in the TLS bucket.

        The operator's default capture location is ``data-capture/`` there, and the managed policy grants
        it only in buckets named ``hyperpod-tls*`` (data-capture page, "Updating permissions"); ELB writes
        the logs itself as ``logdelivery.elasticloadbalancing.amazonaws.com``. A second call does nothing.
        """
        if self.data_capture_allowed:
            return
        self.data_capture_allowed = True
        objects = self.tls_bucket.arn_for_objects(f"{DATA_CAPTURE_PREFIX}*")
        self.execution_role.add_to_policy(iam.PolicyStatement(actions=["s3:PutObject"], resources=[objects]))
        self.tls_bucket.add_to_resource_policy(iam.PolicyStatement(
            actions=["s3:PutObject"], resources=[objects],
            principals=[iam.ServicePrincipal("logdelivery.elasticloadbalancing.amazonaws.com")],
            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}))
        acknowledge(self.execution_role, "IAM5", "The operator writes access-log captures with generated names "
                    "under the TLS bucket's data-capture/ prefix only.",
                    [f"Resource::{arn_of(self.tls_bucket)}/{DATA_CAPTURE_PREFIX}*"])

    def _execution_role(self) -> iam.Role:
        stack = Stack.of(self)
        name = execution_role_name(stack.stack_name, stack.region)
        assert Token.is_unresolved(name) or len(name) <= MAX_ROLE_NAME, name
        role = iam.Role(
            self, "ExecutionRole", description="HyperPod Inference Operator", role_name=name,
            assumed_by=iam.CompositePrincipal(iam.ServicePrincipal("sagemaker.amazonaws.com"),
                                              self.trust.principal("Controller", CONTROLLER_SA)),
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerHyperPodInferenceAccess")])
        role.add_to_policy(iam.PolicyStatement(
            actions=["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"],
            resources=[self.tls_bucket.arn_for_objects("*")]))
        role.add_to_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.tls_bucket.bucket_arn]))
        # Operator v3.0+ tags the certificates it imports into ACM (release notes).
        role.add_to_policy(iam.PolicyStatement(
            actions=["acm:AddTagsToCertificate"],
            resources=[f"arn:{Aws.PARTITION}:acm:{Aws.REGION}:{Aws.ACCOUNT_ID}:certificate/*"]))
        return role

    def _prerequisite(self, name: str, version: str | None, *,
                      role: iam.IRole | None = None) -> eks_l1.CfnAddon | None:
        return None if name in self._preinstalled else self._addon(name, version, None, role=role)

    def _addon(self, name: str, version: str | None, configuration: Mapping[str, object] | None, *,
               role: iam.IRole | None = None) -> eks_l1.CfnAddon:
        return self._ownership.addon(
            self, f"Addon-{name}", addon_name=name, cluster_name=self._cluster_name, addon_version=version,
            service_account_role_arn=role.role_arn if role else None,
            configuration_values=Stack.of(self).to_json_string(configuration) if configuration else None)

    def _acknowledge(self, model_bucket: s3.IBucket, model_prefixes: Sequence[str]) -> None:
        acknowledge(self.execution_role, "IAM4", "AmazonSageMakerHyperPodInferenceAccess is the policy the operator "
                    "documents for its execution role.", [managed_policy("AmazonSageMakerHyperPodInferenceAccess")])
        acknowledge(self.gated_model_role, "IAM4",
                    "AmazonSageMakerHyperPodGatedModelAccess is the policy the operator documents for gated JumpStart "
                    "downloads.", [managed_policy("AmazonSageMakerHyperPodGatedModelAccess")])
        acknowledge(self.execution_role, "IAM5",
                    "The operator writes certificates with generated names into its own TLS bucket (bucket/*) and "
                    "tags the ACM certificates it imports, whose ids are not known in advance.",
                    [f"Resource::{arn_of(self.tls_bucket)}/*",
                     "Resource::arn:<AWS::Partition>:acm:<AWS::Region>:<AWS::AccountId>:certificate/*"])
        if self.keda_role is not None:
            acknowledge(self.keda_role, "IAM5",
                        "CloudWatch GetMetricData/ListMetrics and the AMP query APIs that KEDA triggers call have no "
                        "resource-level permissions for metrics; workspaces are chosen per endpoint.", ["Resource::*"])
        if self.alb_role is not None:
            acknowledge(self.alb_role, "IAM5",
                        "Upstream's policy for the bundled controller version, unchanged: the controller creates load "
                        "balancers, target groups, listeners, rules and security groups that do not exist yet, every "
                        "change to an existing one requires the elbv2.k8s.aws/cluster tag it sets, and reads have no "
                        "resource-level permissions.", wildcard_findings())
        acknowledge(self.s3_csi_role, "IAM5", S3_CSI_REASON, prefix_findings(model_bucket, model_prefixes))
