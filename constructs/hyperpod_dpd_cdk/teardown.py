"""``cdk destroy`` that leaves nothing behind: delete-time barriers and the log groups the stack causes.

The operator's AWS Load Balancer Controller creates load balancers, target groups and security groups,
and the operator a SageMaker endpoint, outside CloudFormation; the aws-eks-v2 kubectl handler deletes the
endpoint manifest without waiting for them (it logs and ignores delete errors). Left alone,
CloudFormation then removes the add-on that would have cleaned up, and their network interfaces block
the subnets and the VPC. :class:`TeardownBarrier` holds the delete until they are gone (handler:
``assets/teardown/index.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import jsii
from aws_cdk import ArnFormat, Aws, CustomResource, Duration, IListProducer, IResolveContext, Lazy, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, load_balancer_ingress
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd_cdk._late import late_list
from hyperpod_dpd_cdk._private.nag import acknowledge, arn_of, managed_policy, policy_wildcard_findings, role_of
from hyperpod_dpd_cdk.observability import CLUSTER_LOG_PREFIX, container_insights_log_groups, hyperpod_log_group_name

HANDLER_DIR = Path(__file__).resolve().parent / "assets" / "teardown"
# The provider framework's waiter may run at most one hour (a custom resource's ServiceTimeout, 1-3600 s).
PROVIDER_TIMEOUT = Duration.minutes(55)
# The handler fails with the leftovers' ids before the framework's own, wordless, timeout.
DEFAULT_DEADLINE = Duration.minutes(50)
# How long the operator and its controller get to clean up themselves before the barrier deletes.
DEFAULT_GRACE = Duration.minutes(10)
POLL_INTERVAL = Duration.seconds(30)
# Retention of every log group the stack creates or causes; all are deleted with the stack.
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
# aws-load-balancer-controller pkg/deploy/tracking/provider.go and docs/deploy/security_groups.md
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
INGRESS_STACK_TAG = "ingress.k8s.aws/stack"
ALB_RESOURCE_TAG = "elbv2.k8s.aws/resource"
BACKEND_SG = "backend-sg"
# The stack tag value the deletes require when no endpoint is hosted: no Ingress is named so, nothing matches.
NO_INGRESS = "none/none"
GUARDDUTY_TAG = "GuardDutyManaged"
# aws-cdk-lib's one log retention function per stack (LogRetention's singleton id).
RETENTION_SINGLETON = "LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a"


@dataclass(frozen=True, kw_only=True)
class TeardownTiming:
    """How long a barrier waits on delete.

    :param grace: the owner's own cleanup time before the barrier deletes. :default: 10 minutes
    :param deadline: when it fails, naming what is left. :default: 50 minutes (the framework allows 55)
    """

    grace: Duration = DEFAULT_GRACE
    deadline: Duration = DEFAULT_DEADLINE


class TeardownHandler(Construct):
    """The barrier Lambda (``on_event`` and ``is_complete``) and its provider, one per stack."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.log_group = logs.LogGroup(self, "Logs", retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY)
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             description="hyperpod-dpd: delete-time barrier (operator and GuardDuty leftovers)",
                             managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                                 "service-role/AWSLambdaBasicExecutionRole")])
        code = lambda_.Code.from_asset(str(HANDLER_DIR))
        self.on_event = lambda_.Function(
            self, "OnEvent", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.on_event", code=code,
            role=self.role, timeout=Duration.minutes(2), log_group=self.log_group,
            description="hyperpod-dpd: delete-time barrier, start")
        self.is_complete = lambda_.Function(
            self, "IsComplete", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.is_complete", code=code,
            role=self.role, timeout=Duration.minutes(5), log_group=self.log_group,
            description="hyperpod-dpd: delete-time barrier, poll and clean up")
        self.provider = cr.Provider(self, "Provider", on_event_handler=self.on_event,
                                    is_complete_handler=self.is_complete, query_interval=POLL_INTERVAL,
                                    total_timeout=PROVIDER_TIMEOUT, log_group=self.log_group)
        self._acknowledge()

    def barrier(self, scope: Construct, id: str, *, kind: str, properties: dict[str, object],
                timing: TeardownTiming, statements: Sequence[iam.PolicyStatement], why: str) -> CustomResource:
        """One barrier resource; its permissions are a policy of their own, so the shared functions never
        depend on the resources the barriers name (the cluster, the VPC) and every order stays acyclic."""
        policy = iam.Policy(scope, f"{id}Policy", roles=[self.role], statements=list(statements))
        acknowledge(policy, "IAM5", why, policy_wildcard_findings(policy))
        resource = CustomResource(scope, id, service_token=self.provider.service_token,
                                  resource_type="Custom::HyperPodDpdTeardown",
                                  properties={"Kind": kind, "GraceSeconds": timing.grace.to_seconds(),
                                              "DeadlineSeconds": timing.deadline.to_seconds(), **properties})
        resource.node.add_dependency(policy)
        return resource

    def _acknowledge(self) -> None:
        lambda_policy = [managed_policy("service-role/AWSLambdaBasicExecutionRole")]
        acknowledge(self.role, "IAM4", "AWSLambdaBasicExecutionRole only lets the handler write its own logs.",
                    lambda_policy)
        framework = self.provider.node
        for name in ("framework-onEvent", "framework-isComplete", "framework-onTimeout"):
            function = framework.find_child(name)
            acknowledge(role_of(function), "IAM4", "aws-cdk-lib's provider framework Lambda: its own logs only.",
                        lambda_policy)
            acknowledge(role_of(function), "IAM5",
                        "The provider framework invokes any version of the barrier functions (ARN:*).",
                        [f"Resource::{arn_of(self.on_event)}:*", f"Resource::{arn_of(self.is_complete)}:*"])
            acknowledge(function, "L1", "aws-cdk-lib pins the provider framework's Node.js runtime.")
        machine = framework.find_child("waiter-state-machine")
        acknowledge(machine, "SF2", "The waiter only polls the barrier every 30 s on delete; its steps are in the "
                    "barrier's log group, X-Ray adds nothing.")
        acknowledge(machine, "SF1", "aws-cdk-lib's waiter state machine; each poll's outcome is logged by the "
                    "barrier functions in their log group.")
        acknowledge(machine, "IAM5", "The waiter invokes any version of the provider framework's functions (ARN:*).",
                    policy_wildcard_findings(machine.node.find_child("Role").node.find_child("DefaultPolicy")))


@jsii.implements(IListProducer)
class _Ingresses:
    """The Ingress stacks as they are whenever resolved: the cdk-nag acknowledgment resolves the policy at
    construction, before :meth:`TeardownBarrier.add_endpoints`, so a cached (stable) value would be stale."""

    def __init__(self, produce: Callable[[], list[str]]) -> None:
        self._produce = produce

    def produce(self, context: IResolveContext) -> list[str]:
        del context
        return self._produce()


class TeardownBarrier(Construct):
    """Between the endpoint manifests and the operator add-on: on delete, waits until what the operator and
    its AWS Load Balancer Controller made for *these* endpoints is gone (load balancers, target groups and
    security groups tagged with the cluster and one of the endpoints' Ingress stacks, the SageMaker
    endpoints), deletes what they left after ``timing.grace``, and fails at ``timing.deadline`` with the
    ids and the commands. Make the add-on a dependency of it, and it a dependency of each manifest.

    The controller tags what it makes for an Ingress ``elbv2.k8s.aws/cluster=<cluster>`` and
    ``ingress.k8s.aws/stack=<namespace>/<ingress>`` (aws-load-balancer-controller
    ``pkg/deploy/tracking/provider.go``); the operator's Ingress for a DPD endpoint is
    :func:`~hyperpod_dpd.contracts.operator.load_balancer_ingress` in ``hyperpod-inference-system``. So
    another workload's load balancers on a shared cluster, which carry other stack tags, are neither waited
    for nor deleted, and the deletes' IAM requires both tags.

    :param handler: the stack's :class:`TeardownHandler`. :param cluster_name: the EKS cluster.
    :param endpoints: the endpoints (and twins) whose SageMaker endpoints and Ingresses it waits for;
        :meth:`add_endpoints` adds more. :default: - none
    :param owns_cluster: the stack created the cluster, so the controller's shared backend security group
        (``k8s-traffic-<cluster>-<hash>``, tag ``elbv2.k8s.aws/resource=backend-sg``) is the stack's to
        delete too; on a cluster someone else runs it is shared with their load balancers and never
        touched. :default: False
    :param node_security_group_ids: the groups of the nodes' network interfaces, where the controller adds
        rules naming its groups; with ``owns_cluster`` the barrier may revoke those rules (only those) so
        the groups can be deleted. :default: - none
    :param timing: :default: - ``TeardownTiming()``
    """

    def __init__(self, scope: Construct, id: str, *, handler: TeardownHandler, cluster_name: str,
                 endpoints: Sequence[DpdSpec] = (), owns_cluster: bool = False,
                 node_security_group_ids: Sequence[str] = (), timing: TeardownTiming | None = None) -> None:
        super().__init__(scope, id)
        timing = timing or TeardownTiming()
        self.endpoint_names: list[str] = []
        self.ingress_stacks: list[str] = []
        self.add_endpoints(endpoints)
        stack = Stack.of(self)
        sagemaker = [f"arn:{Aws.PARTITION}:sagemaker:{Aws.REGION}:{Aws.ACCOUNT_ID}:{kind}/*"
                     for kind in ("endpoint", "endpoint-config", "model")]
        balancing = [stack.format_arn(service="elasticloadbalancing", resource=kind, resource_name="*")
                     for kind in ("loadbalancer", "targetgroup")]
        security_groups = stack.format_arn(service="ec2", resource="security-group", resource_name="*")
        # Service Authorization Reference (cfn-lint's copy, AdditionalSpecs/Policies.json): DeleteLoadBalancer
        # (loadbalancer/*) and DeleteTargetGroup (targetgroup) support aws:ResourceTag/${TagKey}, as does
        # DeleteSecurityGroup (security-group); the Describe calls have no resource types, so no scoping.
        statements = [
            iam.PolicyStatement(
                actions=["elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeTargetGroups",
                         "elasticloadbalancing:DescribeTags", "ec2:DescribeSecurityGroups",
                         "ec2:DescribeSecurityGroupRules", "ec2:DescribeNetworkInterfaces"], resources=["*"]),
            iam.PolicyStatement(
                actions=["elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:DeleteTargetGroup",
                         "ec2:DeleteSecurityGroup"], resources=[*balancing, security_groups],
                conditions={"StringEquals": {
                    f"aws:ResourceTag/{ALB_CLUSTER_TAG}": cluster_name,
                    f"aws:ResourceTag/{INGRESS_STACK_TAG}": Lazy.uncached_list(
                        _Ingresses(lambda: sorted(self.ingress_stacks) or [NO_INGRESS]))}}),
            iam.PolicyStatement(actions=["eks:DescribeCluster"], resources=[
                stack.format_arn(service="eks", resource="cluster", resource_name=cluster_name)]),
            iam.PolicyStatement(actions=["sagemaker:DescribeEndpoint", "sagemaker:DescribeEndpointConfig",
                                         "sagemaker:DescribeModel", "sagemaker:ListTags"], resources=sagemaker),
            iam.PolicyStatement(
                actions=["sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig", "sagemaker:DeleteModel"],
                resources=sagemaker, conditions={"StringEquals": {"aws:ResourceTag/CreatedBy": "HyperPodInference"}}),
        ]
        if owns_cluster:
            statements.append(iam.PolicyStatement(
                actions=["ec2:DeleteSecurityGroup"], resources=[security_groups],
                conditions={"StringEquals": {f"aws:ResourceTag/{ALB_CLUSTER_TAG}": cluster_name,
                                             f"aws:ResourceTag/{ALB_RESOURCE_TAG}": BACKEND_SG}}))
            if node_security_group_ids:
                # RevokeSecurityGroupIngress acts on a security-group resource (Service Authorization Reference).
                statements.append(iam.PolicyStatement(
                    actions=["ec2:RevokeSecurityGroupIngress"], resources=[
                        stack.format_arn(service="ec2", resource="security-group", resource_name=group)
                        for group in node_security_group_ids]))
        self.resource = handler.barrier(
            self, "Resource", kind="operator", timing=timing, statements=statements,
            why="Describe calls of ELB and EC2 have no resource-level permissions; deletes require the "
                "controller's elbv2.k8s.aws/cluster tag with this cluster's name and its ingress.k8s.aws/stack tag "
                "with one of these endpoints' Ingresses (or, on a cluster the stack created, its backend-sg tag), "
                "or (SageMaker) the operator's CreatedBy=HyperPodInference tag; the names are the controller's "
                "and the operator's.",
            properties={"ClusterName": cluster_name,
                        "EndpointNames": late_list(lambda: sorted(self.endpoint_names)),
                        "IngressStacks": late_list(lambda: sorted(self.ingress_stacks)),
                        "DeleteBackendSecurityGroup": owns_cluster})

    def add_endpoints(self, specs: Sequence[DpdSpec]) -> None:
        """Wait for these endpoints too: their SageMaker endpoint and the operator's Ingress for each."""
        for spec in specs:
            if spec.endpoint_name and spec.endpoint_name not in self.endpoint_names:
                self.endpoint_names.append(spec.endpoint_name)
            ingress = f"{OPERATOR_NAMESPACE}/{load_balancer_ingress(spec)}"
            if ingress not in self.ingress_stacks:
                self.ingress_stacks.append(ingress)


class GuardDutyCleanup(Construct):
    """Between the EKS cluster and the VPC: on delete, removes the ``guardduty-data`` interface endpoint and
    ``GuardDutyManagedSecurityGroup-*`` group GuardDuty Runtime Monitoring adds to a VPC with an EKS
    cluster (AWS's HyperPod Terraform does the same at destroy). Only for a VPC the stack creates.

    :param handler: the stack's :class:`TeardownHandler`. :param vpc_id: the stack's VPC.
    :param timing: :default: - ``TeardownTiming(grace=0 s)``: nothing else removes them
    """

    def __init__(self, scope: Construct, id: str, *, handler: TeardownHandler, vpc_id: str,
                 timing: TeardownTiming | None = None) -> None:
        super().__init__(scope, id)
        timing = timing or TeardownTiming(grace=Duration.seconds(0))
        stack = Stack.of(self)
        vpc_arn = stack.format_arn(service="ec2", resource="vpc", resource_name=vpc_id)
        # Service Authorization Reference (cfn-lint's copy, AdditionalSpecs/Policies.json): vpc-endpoint has no
        # ec2:Vpc key (aws:ResourceTag/${TagKey}, ec2:VpceServiceName, ec2:Region, ...), security-group has it.
        # GuardDuty's own service-linked role deletes its endpoints on the GuardDutyManaged tag
        # (AmazonGuardDutyServiceRolePolicy, Sid GuardDutyModifyDeleteVpcEndpointPolicy); the handler picks only
        # those in this VPC.
        statements = [
            iam.PolicyStatement(actions=["ec2:DescribeVpcEndpoints", "ec2:DescribeSecurityGroups",
                                         "ec2:DescribeNetworkInterfaces"], resources=["*"]),
            iam.PolicyStatement(
                actions=["ec2:DeleteVpcEndpoints"],
                resources=[stack.format_arn(service="ec2", resource="vpc-endpoint", resource_name="*")],
                conditions={"Null": {f"aws:ResourceTag/{GUARDDUTY_TAG}": "false"}}),
            iam.PolicyStatement(
                actions=["ec2:DeleteSecurityGroup"],
                resources=[stack.format_arn(service="ec2", resource="security-group", resource_name="*")],
                conditions={"StringEquals": {"ec2:Vpc": vpc_arn}})]
        self.resource = handler.barrier(
            self, "Resource", kind="guardduty", timing=timing, statements=statements,
            why="GuardDuty names its endpoint and group itself; endpoint deletes require GuardDuty's "
                "GuardDutyManaged tag, group deletes this VPC (ec2:Vpc), and describe calls have no resource-level "
                "permissions.",
            properties={"VpcId": vpc_id})


class CausedLogGroups(Construct):
    """Retention and removal for log groups AWS creates on the stack's behalf, outside the template:
    the EKS control plane's ``/aws/eks/<cluster>/cluster`` and HyperPod's
    ``/aws/sagemaker/Clusters/<name>/<id>`` (where the observability add-on ships container logs too).
    Each is created if missing and kept ``LOG_RETENTION``; the retention resources delete them with the
    stack, and :attr:`sweep` (make the HyperPod cluster depend on it) deletes whatever the HyperPod nodes
    wrote after that, once the cluster is gone.

    :param handler: the stack's :class:`TeardownHandler`.
    :param hyperpod_cluster_name: :param hyperpod_cluster_arn: the HyperPod cluster.
    :param eks_cluster_name: a cluster the stack creates (an existing cluster's logs are not the stack's).
        :default: - none
    :param container_insights: the stack installs the ``amazon-cloudwatch-observability`` add-on on
        ``eks_cluster_name``, so the groups its agents create (:func:`container_insights_log_groups`, none of
        them in the template but ``application``) are swept too, by exact name, once the add-on and HyperPod
        are gone. On an existing cluster they hold other workloads' logs and are never touched.
        :default: False
    """

    def __init__(self, scope: Construct, id: str, *, handler: TeardownHandler, hyperpod_cluster_name: str,
                 hyperpod_cluster_arn: str, eks_cluster_name: str | None = None,
                 container_insights: bool = False) -> None:
        super().__init__(scope, id)
        self.names = [hyperpod_log_group_name(hyperpod_cluster_name, hyperpod_cluster_arn)]
        if eks_cluster_name is not None:
            self.names.insert(0, f"/aws/eks/{eks_cluster_name}/cluster")
        self.retentions = [logs.LogRetention(self, f"Retention{i}", log_group_name=name, retention=LOG_RETENTION,
                                             removal_policy=RemovalPolicy.DESTROY)
                           for i, name in enumerate(self.names)]
        prefix = f"{CLUSTER_LOG_PREFIX}{hyperpod_cluster_name}/"
        # Without eks_cluster_name the cluster is not the stack's, and neither are its Container Insights groups.
        self.swept_names = container_insights_log_groups(eks_cluster_name) if eks_cluster_name is not None \
            and container_insights else []

        def log_group_arn(name: str) -> str:
            return Stack.of(self).format_arn(service="logs", resource="log-group", resource_name=name,
                                             arn_format=ArnFormat.COLON_RESOURCE_NAME)

        # The ARNs end in ``:*`` (the group's streams), as aws-cdk-lib's LogRetention grants DeleteLogGroup.
        statements = [
            iam.PolicyStatement(actions=["logs:DescribeLogGroups"], resources=["*"]),
            iam.PolicyStatement(actions=["logs:DeleteLogGroup"], resources=[
                log_group_arn(f"{prefix}*"), *(log_group_arn(f"{name}:*") for name in self.swept_names)])]
        properties: dict[str, object] = {"LogGroupPrefixes": [prefix]}
        if self.swept_names:
            properties["LogGroupNames"] = self.swept_names
        self.sweep = handler.barrier(self, "Sweep", kind="logs", timing=TeardownTiming(grace=Duration.seconds(0)),
                                     statements=statements, properties=properties,
                                     why="HyperPod names the log group after the cluster id; only groups under "
                                         "this cluster's prefix, and the Container Insights groups of the cluster "
                                         "the stack created (by name), may be deleted. DescribeLogGroups is not "
                                         "scoped.")
        retention = Stack.of(self).node.try_find_child(RETENTION_SINGLETON)
        if retention is not None:
            role = retention.node.find_child("ServiceRole")
            acknowledge(role, "IAM4", "aws-cdk-lib's log retention function: AWSLambdaBasicExecutionRole for its own "
                        "logs.", [managed_policy("service-role/AWSLambdaBasicExecutionRole")])
            acknowledge(role, "IAM5", "aws-cdk-lib's log retention function sets retention on (and deletes) exactly "
                        "the log groups named here; their streams (:*) are in the ARN.",
                        policy_wildcard_findings(role.node.find_child("DefaultPolicy")))
