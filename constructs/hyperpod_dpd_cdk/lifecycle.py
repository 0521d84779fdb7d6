"""The HyperPod lifecycle scripts (an S3 asset) and the instance groups' execution role."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Aws, Fn, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from hyperpod_dpd_cdk._late import at_synthesis
from hyperpod_dpd_cdk._private.nag import acknowledge, arn_of, managed_policy, pseudo
from hyperpod_dpd_cdk.model_bucket import grant_bucket_key, secure_bucket

DEFAULT_SCRIPTS_DIR = Path(__file__).parent / "assets" / "lifecycle"
ON_CREATE = "on_create.sh"
LIFECYCLE_PREFIX = "lifecycle"
# Why the execution role's IAM5 findings are acceptable (every prefix read, the unscoped reads).
EXECUTION_ROLE_REASON = (
    "Objects are read only under the lifecycle prefix and the endpoints' model prefixes (prefix/*); "
    "ecr:GetAuthorizationToken and the VPC, DHCP-options and security-group reads have no "
    "resource-level permissions; the worker, health-agent and operator images come from AWS-owned "
    "ECR repositories in several accounts; HyperPod creates the node instances and their ENIs "
    "(ids unknown in advance) in this account and region; AMI-update rollback may read any alarm "
    "of the account.")


class LifecycleScripts(Construct):
    """A ``sagemaker-`` bucket holding the on-create script, uploaded from a local folder.

    The name starts with ``sagemaker-`` as the HyperPod API asks for ``SourceS3Uri``; it is
    deterministic (stack name, account, region) so the bucket is destroyed with the stack. It is
    versioned (a node that joins later runs the script it was created with, and an overwrite can be
    traced); aws-cdk-lib's auto-delete removes every version on ``cdk destroy`` so the deletion succeeds.

    :param log_bucket: where the bucket's access logs go.
    :param scripts_dir: a folder with ``on_create.sh`` (and anything it calls).
        :default: - the packaged script, which moves containerd and kubelet onto /opt/sagemaker
    """

    def __init__(self, scope: Construct, id: str, *, log_bucket: s3.IBucket,
                 scripts_dir: str | Path | None = None) -> None:
        super().__init__(scope, id)
        folder = Path(scripts_dir) if scripts_dir is not None else DEFAULT_SCRIPTS_DIR
        slug = re.sub(r"[^a-z0-9-]", "-", Stack.of(self).stack_name.lower())[:20].strip("-")
        self.bucket = secure_bucket(
            self, "Bucket", log_bucket=log_bucket, log_prefix="lifecycle-bucket/", versioned=True,
            removal_policy=RemovalPolicy.DESTROY, auto_delete_objects=True,
            bucket_name=Fn.join("-", ["sagemaker", slug, "lcs", Aws.ACCOUNT_ID, Aws.REGION]))
        self.deployment = s3deploy.BucketDeployment(
            self, "Upload", sources=[s3deploy.Source.asset(str(folder))], destination_bucket=self.bucket,
            destination_key_prefix=f"{LIFECYCLE_PREFIX}/", retain_on_delete=False, prune=True)
        self._acknowledge_deployment()
        self.source_s3_uri = f"s3://{self.bucket.bucket_name}/{LIFECYCLE_PREFIX}"
        self.on_create = ON_CREATE
        self.prefix = LIFECYCLE_PREFIX


    def _acknowledge_deployment(self) -> None:
        role = self.deployment.handler_role
        stack = Stack.of(self)
        function = role.node.scope
        assert function is not None
        acknowledge(role, "IAM4", "aws-cdk-lib's BucketDeployment Lambda writes its logs with the basic execution "
                    "role.", [managed_policy("service-role/AWSLambdaBasicExecutionRole")])
        acknowledge(role, "IAM5",
                    "BucketDeployment copies the asset from the CDK staging bucket into the lifecycle bucket and "
                    "prunes it there; aws-cdk-lib grants object-level wildcards on exactly those two buckets.",
                    ["Action::s3:GetBucket*", "Action::s3:GetObject*", "Action::s3:List*", "Action::s3:Abort*",
                     "Action::s3:DeleteObject*", f"Resource::{arn_of(self.bucket)}/*",
                     f"Resource::arn:{pseudo(stack, 'partition')}:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-"
                     f"{pseudo(stack, 'region')}/*"])
        acknowledge(function, "L1", "aws-cdk-lib sets the BucketDeployment runtime to the one its bundled AWS CLI "
                    "layer supports.")


class HyperPodExecutionRole(Construct):
    """The role HyperPod instances assume: the managed HyperPod policy and only the S3 reads they need.

    :param lifecycle: the scripts; the role may read their prefix.
    :param model_bucket: the weights bucket. :param model_prefixes: the prefixes the endpoints read.
    :param eks_cluster_arn: for the Pod Identity agent (``eks-auth:AssumeRoleForPodIdentity``).
    :param vpc_id: :param subnet_ids: :param security_group_id: where HyperPod attaches the nodes' ENIs;
        the ENI-permission actions are scoped to them, as AWS's reference stacks scope them.
    """

    def __init__(self, scope: Construct, id: str, *, lifecycle: LifecycleScripts, model_bucket: s3.IBucket,
                 model_prefixes: Sequence[str], eks_cluster_arn: str, vpc_id: str, subnet_ids: Sequence[str],
                 security_group_id: str) -> None:
        super().__init__(scope, id)
        role = iam.Role(
            self, "Resource", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker HyperPod DPD instance groups",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSageMakerClusterInstanceRolePolicy"),
                # HyperPod nodes run the VPC CNI with the node role (HyperPod requires VPC CNI).
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonEKS_CNI_Policy"),
            ])
        read_prefix(role, lifecycle.bucket, [lifecycle.prefix])
        self._model_bucket = model_bucket
        self._model_reads = PrefixReads(role, model_bucket, model_prefixes)
        role.add_to_policy(iam.PolicyStatement(actions=["eks-auth:AssumeRoleForPodIdentity"],
                                               resources=[eks_cluster_arn]))
        role.add_to_policy(iam.PolicyStatement(
            actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        # HyperPod attaches each node's ENI in this VPC with the instance role: the VPC CNI policy has the ENI
        # actions but not the ENI permissions or these reads (every AWS reference stack grants them).
        ec2_arn = f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        role.add_to_policy(iam.PolicyStatement(
            actions=["ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission"],
            resources=[f"{ec2_arn}:instance/*", f"{ec2_arn}:network-interface/*", f"{ec2_arn}:vpc/{vpc_id}",
                       *(f"{ec2_arn}:subnet/{s}" for s in subnet_ids),
                       f"{ec2_arn}:security-group/{security_group_id}"]))
        role.add_to_policy(iam.PolicyStatement(
            actions=["ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups"], resources=["*"]))
        # HyperPod reads the alarms that can roll back an AMI update.
        role.add_to_policy(iam.PolicyStatement(
            actions=["cloudwatch:DescribeAlarms"],
            resources=[f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{Aws.ACCOUNT_ID}:alarm:*"]))
        role.add_to_policy(iam.PolicyStatement(
            actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
            resources=[f"arn:{Aws.PARTITION}:ecr:*:*:repository/*"]))
        self.role = role
        # HyperPod checks its permissions when it creates nodes: the cluster must wait for this policy.
        policy = role.node.find_child("DefaultPolicy")
        assert isinstance(policy, iam.Policy)
        self.policy = policy
        acknowledge(role, "IAM4",
                    "AmazonSageMakerClusterInstanceRolePolicy is the policy HyperPod documents for instance groups; "
                    "AmazonEKS_CNI_Policy is what the VPC CNI needs on HyperPod nodes, which run it with this role.",
                    [managed_policy("AmazonSageMakerClusterInstanceRolePolicy"),
                     managed_policy("AmazonEKS_CNI_Policy")])
        acknowledge(role, "IAM5", EXECUTION_ROLE_REASON,
                    [f"Resource::{arn_of(lifecycle.bucket)}/{lifecycle.prefix}/*",
                     *prefix_findings(model_bucket, model_prefixes), "Resource::*",
                     "Resource::arn:<AWS::Partition>:ecr:*:*:repository/*",
                     "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:instance/*",
                     "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:network-interface/*",
                     "Resource::arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:*"])

    def add_model_prefixes(self, prefixes: Sequence[str]) -> None:
        """Let the nodes read these model prefixes too (an endpoint added after construction)."""
        self._model_reads.add(prefixes)
        acknowledge(self.role, "IAM5", EXECUTION_ROLE_REASON, prefix_findings(self._model_bucket, prefixes))


def prefix_findings(bucket: s3.IBucket, prefixes: Sequence[str]) -> list[str]:
    """IAM5 findings of :func:`read_prefix` for a bucket created in the stack (imported ones are literal ARNs)."""
    if bucket.node.default_child is None:
        partition = pseudo(Stack.of(bucket), "partition")
        return [f"Resource::arn:{partition}:s3:::{bucket.bucket_name}/{p.strip('/')}/*" for p in prefixes]
    return [f"Resource::{arn_of(bucket)}/{p.strip('/')}/*" for p in sorted({p.strip("/") for p in prefixes})]


def read_prefix(grantee: iam.IGrantable, bucket: s3.IBucket, prefixes: Sequence[str], *,
                list_whole_bucket: bool = False) -> None:
    """``s3:GetObject`` under each prefix and ``s3:ListBucket`` limited to those prefixes.

    :param list_whole_bucket: list any key of the bucket (object reads stay prefix-scoped), for
        clients that list from the bucket's root. :default: False
    """
    clean = sorted({p.strip("/") for p in prefixes})
    if not clean:
        return
    objects, conditions = _prefix_reads(bucket, clean, list_whole_bucket=list_whole_bucket)
    grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=objects))
    grantee.grant_principal.add_to_principal_policy(iam.PolicyStatement(
        actions=["s3:ListBucket"], resources=[bucket.bucket_arn], conditions=conditions))


def _prefix_reads(bucket: s3.IBucket, clean: Sequence[str], *,
                  list_whole_bucket: bool) -> tuple[list[str], dict[str, Any] | None]:
    """The object ARNs to read and the ``s3:ListBucket`` condition for the sorted, stripped ``clean`` prefixes."""
    # An empty prefix is the bucket's root: its objects and its whole listing.
    objects = [bucket.arn_for_objects(f"{p}/*" if p else "*") for p in clean]
    conditions = None if list_whole_bucket or "" in clean else {
        "StringLike": {"s3:prefix": [x for p in clean for x in (p, f"{p}/*")]}}
    return objects, conditions


# What a set of (sorted, stripped) prefixes grants: the object ARNs to read, the s3:ListBucket condition.
PrefixGrant = Callable[[Sequence[str]], tuple[list[str], dict[str, Any] | None]]


class PrefixReads:
    """:func:`read_prefix` for prefixes that may still grow: an endpoint added after construction.

    The statements take their place in the role's policy when the first prefix comes, and their
    resources and condition at synthesis, from every prefix added by then; so the policy reads exactly
    as if all the prefixes had been given at once.

    :param role: the grantee. :param bucket: the weights bucket. :param prefixes: the first prefixes.
    :param list_whole_bucket: as :func:`read_prefix`. :default: False
    :param grant: the objects and listing the prefixes give, instead. :default: - as :func:`read_prefix`
    """

    def __init__(self, role: iam.Role, bucket: s3.IBucket, prefixes: Sequence[str], *,
                 list_whole_bucket: bool = False, grant: PrefixGrant | None = None) -> None:
        self._role = role
        self._bucket = bucket
        self._grant = grant or (lambda clean: _prefix_reads(bucket, clean, list_whole_bucket=list_whole_bucket))
        self._prefixes: set[str] = set()
        self._statements: tuple[iam.PolicyStatement, iam.PolicyStatement] | None = None
        self.add(prefixes)
        at_synthesis(role, self._fill)

    def add(self, prefixes: Sequence[str]) -> None:
        """Read these prefixes too; the first ones give the statements their place in the policy."""
        self._prefixes |= {p.strip("/") for p in prefixes}
        if self._prefixes and self._statements is None:
            self._statements = (iam.PolicyStatement(actions=["s3:GetObject"]),
                                iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self._bucket.bucket_arn]))
            for statement in self._statements:
                self._role.add_to_principal_policy(statement)
            grant_bucket_key(self._bucket, self._role)

    def _fill(self) -> None:
        if self._statements is None:
            return
        objects, conditions = self._grant(sorted(self._prefixes))
        get_object, list_bucket = self._statements
        get_object.add_resources(*objects)
        for operator, values in (conditions or {}).items():
            list_bucket.add_condition(operator, values)
