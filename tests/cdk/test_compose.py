"""The constructs compose inside a stack of your own, as docs/stack.md shows."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import cdk_nag
from aws_cdk import assertions

from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import (
    AccessLogBucket,
    DpdEndpoint,
    EfaSecurityGroup,
    HyperPodCluster,
    HyperPodDependencies,
    HyperPodEksCluster,
    HyperPodExecutionRole,
    HyperPodNetwork,
    InferenceOperator,
    LifecycleScripts,
    ModelBucket,
    instance_groups_for,
)
from hyperpod_dpd_cdk.hyperpod_cluster import group_name


def test_constructs_compose_in_your_own_stack(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region="us-west-2"))
    spec = default_spec()

    logs = AccessLogBucket(stack, "Logs").bucket
    weights = ModelBucket(stack, "Weights", log_bucket=logs, bucket_name=spec.model.source.bucket).bucket
    network = HyperPodNetwork(stack, "Network", availability_zone_id="usw2-az2")
    efa = EfaSecurityGroup(stack, "Efa", vpc=network.vpc).security_group
    eks = HyperPodEksCluster(stack, "Eks", vpc=network.vpc, subnets=network.eks_subnets, security_group=efa)
    scripts = LifecycleScripts(stack, "Lifecycle", log_bucket=logs)
    role = HyperPodExecutionRole(stack, "NodeRole", lifecycle=scripts, model_bucket=weights,
                                 model_prefixes=["Llama-3.3-70B-Instruct"], eks_cluster_arn=eks.cluster_arn,
                                 vpc_id=network.vpc.vpc_id, subnet_ids=[network.hyperpod_subnet.subnet_id],
                                 security_group_id=efa.security_group_id)
    deps = HyperPodDependencies(stack, "Deps", cluster=eks.cluster, region=stack.region)
    hyperpod = HyperPodCluster(stack, "HyperPod", cluster_name="platform-hp", eks_cluster_arn=eks.cluster_arn,
                               subnet=network.hyperpod_subnet, security_group=efa, execution_role=role.role,
                               lifecycle=scripts, instance_groups=instance_groups_for([spec]))
    for dependency in (*deps.charts, scripts.deployment, role.policy):
        hyperpod.node.add_dependency(dependency)
    operator = InferenceOperator(stack, "Operator", cluster_name=eks.cluster_name, oidc_issuer_url=eks.oidc_issuer_url,
                                 hyperpod_cluster_arn=hyperpod.cluster_arn, model_bucket=weights,
                                 model_prefixes=["Llama-3.3-70B-Instruct"], log_bucket=logs)
    operator.after(hyperpod)
    DpdEndpoint(stack, "Llama", cluster=eks.cluster, spec=spec, after=(operator.addon,),
                group_names={r: group_name(spec, r) for r, _ in spec.roles()})

    template = assertions.Template.from_stack(stack)
    assert cdk_nag.AwsSolutionsChecks().validate_scope(app).violations == []
    template.resource_count_is("AWS::SageMaker::Cluster", 1)
    template.has_resource_properties("AWS::SageMaker::Cluster", {"ClusterName": "platform-hp"})
    template.resource_count_is("Custom::AWSCDK-EKS-KubernetesResource", 1)
