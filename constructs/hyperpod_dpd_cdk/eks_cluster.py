"""The EKS cluster HyperPod attaches to: a new one (not Auto Mode) or an existing one imported by name."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from aws_cdk import CfnCondition, CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk.lambda_layer_kubectl_v34 import KubectlV34Layer
from constructs import Construct

from hyperpod_dpd import SpecError
from hyperpod_dpd.contracts.operator import SYSTEM_POOL
from hyperpod_dpd_cdk._private.nag import acknowledge, arn_of, logical_id, managed_policy, role_of
from hyperpod_dpd_cdk.exposure import ClusterEndpointAccess, deny_internet_facing
from hyperpod_dpd_cdk.ownership import ClusterOwnership
from hyperpod_dpd_cdk.versions import KUBERNETES_VERSION, AddonVersions, SupportType, support_type_problems

# The operator, its ALB controller and KEDA, cert-manager and CoreDNS run here, never on GPU nodes.
# Two nodes for availability; m5.xlarge because the operator image is amd64 only (operator v3.2).
DEFAULT_SYSTEM_INSTANCE_TYPE = "m5.xlarge"
DEFAULT_SYSTEM_NODES = 2
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
POD_IDENTITY_AGENT = "eks-pod-identity-agent"


@dataclass(frozen=True, kw_only=True)
class ExistingEksCluster:
    """An EKS cluster created elsewhere (authentication mode API or API_AND_CONFIG_MAP, VPC CNI >= 1.18.3).

    :param cluster_name: its name.
    :param oidc_issuer_url: ``aws eks describe-cluster --query cluster.identity.oidc.issuer``; the
        inference operator's roles trust this issuer.
    :param oidc_provider_arn: the IAM OIDC provider registered for that issuer (``aws iam
        list-open-id-connect-providers``; ``eksctl utils associate-iam-oidc-provider`` creates one).
        Required: IAM holds one provider per issuer URL, so a second one for an existing cluster fails.
    :param namespaces: namespaces of the endpoints that the cluster has already: used as they are, never created
        or deleted. Any other namespace is created with ``kubectl create`` (a namespace that exists then fails
        the deploy rather than being adopted) and deleted on ``cdk destroy``. :default: - none
    :param cluster_security_group_id: the cluster security group EKS created
        (``cluster.resourcesVpcConfig.clusterSecurityGroupId``); HyperPod nodes (EFA group) and the
        existing nodes and control plane (this group) are then allowed to reach each other.
        :default: - no rules; you connect the two groups yourself
    """

    cluster_name: str
    oidc_issuer_url: str
    oidc_provider_arn: str | None = None
    cluster_security_group_id: str | None = None
    namespaces: Sequence[str] = ()


class HyperPodEksCluster(Construct):
    """EKS for HyperPod: API authentication, no Auto Mode, a small system node group, the core add-ons.

    Managed node group capacity is for system pods only; the GPU nodes are HyperPod's. The kubectl
    provider (a Lambda with kubectl and helm) applies the charts and endpoints.

    :param vpc: the VPC. :param subnets: control-plane and system-node subnets, in two AZs or more.
    :param security_group: the EFA group, attached to the control plane as HyperPod expects.
    :param admin_role_arns: IAM roles given cluster admin through access entries. :default: - none
    :param existing: import this cluster instead of creating one. :default: - a new cluster
    :param system_instance_type: :default: m5.xlarge (amd64, which the operator requires)
    :param system_nodes: :default: 2
    :param addon_versions: :default: - EKS defaults for the Kubernetes version
    :param endpoint_access: who reaches the API server endpoint (new cluster only).
        :default: - public from anywhere and private; every call needs IAM and an access entry
    :param cluster_creator_admin: give the principal that creates the cluster (under CDK, the
        bootstrap's CloudFormation execution role) a cluster-admin access entry, as EKS does unless told
        otherwise. The kubectl provider and ``admin_role_arns`` have their own entries. Decide before the
        first deploy: changing it later replaces the cluster. :default: True
    :param network_policy: turn on the VPC CNI's NetworkPolicy enforcement (off by default: not yet
        verified on HyperPod nodes). :default: False
    :param kubernetes_version: a new cluster's version. :default: 1.34
    :param support_type: a new cluster's ``UpgradePolicy``; ``STANDARD`` is refused for a version already
        past its end of standard support (``versions.EKS_SUPPORT_CALENDAR``). :default: ``SupportType.EXTENDED``
    :param preinstalled: add-ons an existing cluster runs already (``eks-pod-identity-agent`` is created
        otherwise: the observability add-on needs it). :default: - none
    :param allow_internet_facing_load_balancers: leave out the new cluster's role's explicit deny on
        internet-facing load balancers. :default: False

    A new cluster encrypts Kubernetes secrets with a customer-managed KMS key (rotated yearly, retained
    on ``cdk destroy`` like any key that may still decrypt backups). An existing cluster's kubectl
    provider runs in ``subnets`` with the cluster security group when its id is given (a private-only
    endpoint works), and outside the VPC through the public endpoint otherwise.
    """

    def __init__(self, scope: Construct, id: str, *, vpc: ec2.IVpc, subnets: ec2.SubnetSelection,
                 security_group: ec2.ISecurityGroup, admin_role_arns: Sequence[str] = (),
                 existing: ExistingEksCluster | None = None,
                 system_instance_type: str = DEFAULT_SYSTEM_INSTANCE_TYPE, system_nodes: int = DEFAULT_SYSTEM_NODES,
                 addon_versions: AddonVersions | None = None, endpoint_access: ClusterEndpointAccess | None = None,
                 cluster_creator_admin: bool = True, network_policy: bool = False,
                 kubernetes_version: str = KUBERNETES_VERSION, support_type: SupportType = SupportType.EXTENDED,
                 preinstalled: Sequence[str] = (), allow_internet_facing_load_balancers: bool = False) -> None:
        super().__init__(scope, id)
        versions = addon_versions or AddonVersions()
        access = endpoint_access or ClusterEndpointAccess()
        self.kubectl_layer = KubectlV34Layer(self, "KubectlLayer")
        kubectl = eks.KubectlProviderOptions(kubectl_layer=self.kubectl_layer)
        self.cluster: eks.ICluster
        self.addons: list[eks_l1.CfnAddon] = []
        self.system_nodes: eks.Nodegroup | None = None
        self.ownership = ClusterOwnership(
            owned=existing is None, stack_name=Stack.of(self).stack_name,
            existing_namespaces=frozenset(existing.namespaces) if existing is not None else frozenset())
        if existing is not None:
            # An imported cluster gets no kubectl provider from kubectl_provider_options: build one against a
            # first import, give its role cluster admin, and hand it to the import the stack uses.
            bare = eks.Cluster.from_cluster_attributes(self, "ImportedBare", cluster_name=existing.cluster_name,
                                                       vpc=vpc)
            # With the cluster security group known, the provider runs in the VPC (a private-only endpoint
            # works); without it, it runs outside and needs the public endpoint.
            in_vpc: dict[str, object] = {}
            if existing.cluster_security_group_id is not None:
                in_vpc = {"private_subnets": vpc.select_subnets(subnet_type=subnets.subnet_type,
                                                                subnets=subnets.subnets).subnets,
                          "security_group": ec2.SecurityGroup.from_security_group_id(
                              self, "ClusterSecurityGroup", existing.cluster_security_group_id)}
            provider = eks.KubectlProvider(self, "KubectlProvider", cluster=bare, kubectl_layer=self.kubectl_layer,
                                           **in_vpc)  # type: ignore[arg-type]
            assert provider.role is not None
            self.kubectl_admin = eks.AccessEntry(
                self, "KubectlProviderAdmin", cluster=bare, principal=provider.role.role_arn,
                access_policies=[eks.AccessPolicy.from_access_policy_name(
                    CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)])
            # Every manifest and chart in the scope runs kubectl/helm as the provider's role: only while it has access.
            self.ownership.order_after_access(scope, self.kubectl_admin)
            self.cluster = eks.Cluster.from_cluster_attributes(
                self, "Imported", cluster_name=existing.cluster_name, vpc=vpc, kubectl_provider=provider)
            self.cluster_name = existing.cluster_name
            self.cluster_arn = Stack.of(self).format_arn(service="eks", resource="cluster",
                                                         resource_name=existing.cluster_name)
            self.oidc_issuer_url = existing.oidc_issuer_url
            self.oidc_provider_arn = existing.oidc_provider_arn
            self.created = False
            if POD_IDENTITY_AGENT not in preinstalled:
                self.addons = [self._addon(POD_IDENTITY_AGENT, versions.pod_identity_agent)]
            if existing.cluster_security_group_id is not None:
                self._connect(existing.cluster_security_group_id, security_group)
        else:
            problems = support_type_problems(kubernetes_version, support_type)
            if problems:
                raise SpecError(problems)
            self.secrets_key = kms.Key(
                self, "SecretsKey", enable_key_rotation=True, removal_policy=RemovalPolicy.RETAIN,
                description="Envelope encryption of the EKS cluster's Kubernetes secrets")
            cluster = eks.Cluster(
                self, "Resource", version=eks.KubernetesVersion.of(kubernetes_version), vpc=vpc, vpc_subnets=[subnets],
                secrets_encryption_key=self.secrets_key,
                security_group=security_group, default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
                default_capacity=0, kubectl_provider_options=kubectl, endpoint_access=access.to_eks(),
                # Only False is written: the property's absence means True, and a change replaces the cluster.
                bootstrap_cluster_creator_admin_permissions=None if cluster_creator_admin else False,
                cluster_logging=[eks.ClusterLoggingTypes.API, eks.ClusterLoggingTypes.AUDIT,
                                 eks.ClusterLoggingTypes.AUTHENTICATOR, eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
                                 eks.ClusterLoggingTypes.SCHEDULER])
            self.cluster = cast(eks.ICluster, cluster)  # jsii: Cluster implements ICluster
            # Explicit, so the bill after standard support ends is a choice (aws-eks-v2 has no prop for it).
            resource = cluster.node.default_child
            assert isinstance(resource, CfnResource)
            resource.add_property_override("UpgradePolicy", {"SupportType": support_type.value})
            if not allow_internet_facing_load_balancers:
                # The control plane's legacy cloud provider serves every Service of type LoadBalancer that
                # the AWS Load Balancer Controller does not claim, as this role; AmazonEKSClusterPolicy (v9)
                # allows it elasticloadbalancing:CreateLoadBalancer on "*", and its default is an
                # internet-facing Classic LB. The same deny as the controller's role closes that path. The
                # policy exists before the cluster, so no Service can come first.
                denied = cluster.role.add_to_principal_policy(deny_internet_facing())
                assert denied.policy_dependable is not None
                resource.node.add_dependency(denied.policy_dependable)
            self.cluster_name = cluster.cluster_name
            self.cluster_arn = cluster.cluster_arn
            self.oidc_issuer_url = cluster.cluster_open_id_connect_issuer_url
            self.oidc_provider_arn = None
            self.created = True
            nodegroup = cluster.add_nodegroup_capacity(
                "SystemNodes", instance_types=[ec2.InstanceType(system_instance_type)],
                ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD, min_size=system_nodes,
                desired_size=system_nodes, max_size=system_nodes + 2, subnets=subnets,
                labels=dict(SYSTEM_POOL))
            self.system_nodes = nodegroup
            # VPC CNI enforces NetworkPolicies only when told to (its network-policy FAQ: opt-in).
            cni_config = {"enableNetworkPolicy": "true"} if network_policy else None
            self.addons = [self._addon(name, version, config) for name, version, config in (
                ("vpc-cni", versions.vpc_cni, cni_config), ("kube-proxy", versions.kube_proxy, None),
                ("coredns", versions.coredns, None),
                (POD_IDENTITY_AGENT, versions.pod_identity_agent, None))]
            # CoreDNS reports DEGRADED until a node runs it; create it once the system nodes exist.
            self.addons[2].node.add_dependency(nodegroup)
            self._connect(cluster.cluster_security_group_id, security_group)
            self._acknowledge_cluster(cluster, nodegroup)
        kubectl_provider = self.cluster.kubectl_provider
        if kubectl_provider is not None:
            acknowledge_kubectl_provider(kubectl_provider)
        for index, arn in enumerate(admin_role_arns):
            eks.AccessEntry(self, f"Admin{index}", cluster=self.cluster, principal=arn,
                            access_policies=[eks.AccessPolicy.from_access_policy_name(
                                CLUSTER_ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER)])

    def _connect(self, cluster_security_group_id: str, efa: ec2.ISecurityGroup) -> None:
        """System nodes sit in the EKS-created cluster group, HyperPod nodes in the EFA group: let the two
        reach each other (DNS, webhooks, metrics, kubelet), still with nothing open to the outside."""
        ec2.CfnSecurityGroupIngress(self, "SystemFromHyperPod", group_id=cluster_security_group_id,
                                    source_security_group_id=efa.security_group_id, ip_protocol="-1",
                                    description="HyperPod nodes to system nodes and control plane")
        ec2.CfnSecurityGroupIngress(self, "HyperPodFromSystem", group_id=efa.security_group_id,
                                    source_security_group_id=cluster_security_group_id, ip_protocol="-1",
                                    description="System nodes and control plane to HyperPod nodes")

    def _addon(self, name: str, version: str | None, configuration: dict[str, str] | None = None) -> eks_l1.CfnAddon:
        return self.ownership.addon(self, f"Addon-{name}", addon_name=name, cluster_name=self.cluster_name,
                                    addon_version=version,
                                    configuration_values=json.dumps(configuration) if configuration else None)

    def _acknowledge_cluster(self, cluster: eks.Cluster, system_nodes: eks.Nodegroup) -> None:
        acknowledge(cluster, "EKS1",
                    "The kubectl provider Lambda runs inside the VPC and uses the private endpoint; the public one is "
                    "for the admins' kubectl and the ops commands (preflight, verify, bench) run from outside, and "
                    "accepts only IAM-authenticated calls mapped through access entries (mode API).")
        acknowledge(cluster.role, "IAM4", "AmazonEKSClusterPolicy is the policy EKS documents for the cluster role.",
                    [managed_policy("AmazonEKSClusterPolicy")])
        acknowledge(system_nodes.role, "IAM4",
                    "The three policies EKS documents for managed node group roles.",
                    [managed_policy(p) for p in ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly",
                                                 "AmazonEKS_CNI_Policy")])


def acknowledge_kubectl_provider(provider: object) -> None:
    """The kubectl provider's Lambdas are aws-cdk-lib's; their findings are explained, not changed."""
    assert isinstance(provider, Construct)
    handler = provider.node.find_child("Handler")
    on_event = provider.node.find_child("Provider").node.find_child("framework-onEvent")
    condition = handler.node.find_child("HasEcrPublic")
    assert isinstance(condition, CfnCondition)
    ecr_public = json.dumps({"Fn::If": [logical_id(condition), {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},
        {"Ref": "AWS::NoValue"}]}, separators=(",", ":"))
    lambda_policies = [managed_policy("service-role/AWSLambdaBasicExecutionRole"),
                       managed_policy("service-role/AWSLambdaVPCAccessExecutionRole")]
    acknowledge(role_of(handler), "IAM4",
                "aws-cdk-lib's kubectl handler: Lambda logging/VPC access and ECR pulls for OCI Helm charts, as "
                "aws-cdk-lib defines them.",
                [*lambda_policies, managed_policy("AmazonEC2ContainerRegistryReadOnly"), f"Policy::{ecr_public}"])
    acknowledge(role_of(on_event), "IAM4", "aws-cdk-lib's custom resource framework Lambda: logging and VPC access.",
                lambda_policies)
    acknowledge(role_of(on_event), "IAM5",
                "The provider framework invokes any version of the kubectl handler function (ARN:*).",
                [f"Resource::{arn_of(handler)}:*"])
    acknowledge(handler, "L1",
                "aws-cdk-lib pins the kubectl handler's runtime to the one its kubectl/helm layer is built for.")
