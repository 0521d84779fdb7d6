"""Weights staging on an existing cluster, and across stack updates.

Built without synthesizing (the chart, the construct tree and the logical ids are enough), so each test
costs one stack construction.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import CfnElement
from cdk import cdk_support

from hyperpod_dpd.contracts.operator import INSTANCE_GROUP_LABEL, SYSTEM_POOL
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ExistingEksCluster, HyperPodDpdStack
from hyperpod_dpd_cdk.weights_staging import OS_LABEL, WeightsStaging

LLAMA = "meta-llama/Llama-3.3-70B-Instruct"
STATEFUL = ("AWS::S3::Bucket", "AWS::KMS::Key", "AWS::EKS::Cluster", "AWS::SageMaker::Cluster", "AWS::EC2::VPC",
            "AWS::SecretsManager::Secret")


def build(cdk_context: dict[str, Any], *, existing: bool = False, hours: float = 4) -> HyperPodDpdStack:
    app = cdk.App(context=cdk_context)
    spec = cdk_support.hf_source(default_spec(), LLAMA, revision=cdk_support.HF_REVISION,
                                 token_secret_arn=cdk_support.HF_SECRET_ARN)
    options: dict[str, Any] = {}
    if existing:
        options = {"vpc": cdk_support.EXISTING_VPC, "hyperpod_subnet_ids": cdk_support.HYPERPOD_SUBNETS,
                   "existing_cluster": ExistingEksCluster(
                       cluster_name="platform",
                       oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
                       oidc_provider_arn=cdk_support.EXISTING_OIDC_PROVIDER)}
    return HyperPodDpdStack(app, "Staged", env=cdk.Environment(region=cdk_support.REGION), endpoints=[spec],
                            benchmark=False, observability=False, weights_staging_timeout=cdk.Duration.hours(hours),
                            **options)


def affinity(stack: HyperPodDpdStack) -> dict[str, Any]:
    staging = stack.weights_staging["dpd-test"]
    job = next(o for o in stack.resolve(staging.chart.to_json()) if o["kind"] == "Job")
    result: dict[str, Any] = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return result


def expressions(terms: list[dict[str, Any]]) -> list[tuple[str, str, tuple[str, ...]]]:
    return sorted((e["key"], e["operator"], tuple(e.get("values", ()))) for t in terms for e in t["matchExpressions"])


def test_on_an_existing_cluster_the_job_can_schedule_on_any_linux_node_but_hyperpods(
        cdk_context: dict[str, Any]) -> None:
    stack = build(cdk_context, existing=True)
    assert stack.eks.system_nodes is None, "an existing cluster has no system pool of the stack's"
    node = affinity(stack)
    required = expressions(node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"])
    assert required == sorted([(INSTANCE_GROUP_LABEL, "DoesNotExist", ()), (OS_LABEL, "In", ("linux",))])
    assert not any(key in SYSTEM_POOL for key, _, _ in required), "no cluster but the stack's has that label"
    (preferred,) = node["preferredDuringSchedulingIgnoredDuringExecution"]
    assert expressions([preferred["preference"]]) == [(k, "In", (v,)) for k, v in sorted(SYSTEM_POOL.items())]
    staging = stack.weights_staging["dpd-test"]
    warnings = [m.data for m in staging.node.metadata if m.type == "aws:cdk:warning"]
    assert any("StagingNeedsCpuNode" in str(w) and "not a HyperPod node" in str(w) for w in warnings), warnings


def test_on_a_new_cluster_the_system_pool_is_still_preferred(cdk_context: dict[str, Any]) -> None:
    stack = build(cdk_context)
    node = affinity(stack)
    (preferred,) = node["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["weight"] == 100
    assert expressions([preferred["preference"]]) == [(k, "In", (v,)) for k, v in sorted(SYSTEM_POOL.items())]
    staging = stack.weights_staging["dpd-test"]
    assert not [m for m in staging.node.metadata if m.type == "aws:cdk:warning"]


def logical_ids(stack: HyperPodDpdStack) -> dict[str, str]:
    """Every CloudFormation element's logical id, by its type (or kind of element)."""
    ids = {}
    for element in stack.node.find_all():
        if isinstance(element, CfnElement):
            kind = getattr(element, "cfn_resource_type", type(element).__name__)
            ids[stack.resolve(element.logical_id)] = kind
    return ids


def test_a_new_wait_time_gives_new_wait_resources_and_keeps_everything_else(cdk_context: dict[str, Any]) -> None:
    before, after = build(cdk_context, hours=4), build(cdk_context, hours=6)
    old, new = logical_ids(before), logical_ids(after)
    first, second = before.weights_staging["dpd-test"], after.weights_staging["dpd-test"]
    changed = {before.resolve(first.handle.logical_id), before.resolve(first.wait.logical_id),
               before.resolve(first.manifest.node.default_child.logical_id)}  # type: ignore[union-attr]
    assert set(old) - set(new) == changed, "only the handle, the wait and the Job manifest are replaced"
    assert len(set(new) - set(old)) == len(changed)
    assert first.job_name != second.job_name, "a Job's pod template cannot change: the Job gets a new name"
    assert first.service_account_name != second.service_account_name
    assert before.resolve(first.role.node.default_child.logical_id) in new  # type: ignore[union-attr]
    for logical, kind in old.items():
        if kind in STATEFUL:
            assert logical in new, (logical, kind)


def test_the_same_inputs_give_the_same_ids(cdk_context: dict[str, Any]) -> None:
    first, second = build(cdk_context), build(cdk_context)
    assert logical_ids(first) == logical_ids(second)
    assert first.weights_staging["dpd-test"].digest == second.weights_staging["dpd-test"].digest


def test_the_wait_and_the_job_agree_on_the_deadline(cdk_context: dict[str, Any]) -> None:
    stack = build(cdk_context, hours=6)
    staging: WeightsStaging = stack.weights_staging["dpd-test"]
    assert stack.resolve(staging.wait.timeout) == str(6 * 3600)
    job = next(o for o in stack.resolve(staging.chart.to_json()) if o["kind"] == "Job")
    assert job["spec"]["activeDeadlineSeconds"] == 6 * 3600
