"""``cdk destroy`` order in the synthesized template: CloudFormation deletes in reverse dependency order, so
endpoint -> barrier -> operator add-on -> HyperPod -> EKS -> GuardDuty cleanup -> VPC must be a chain of
dependencies; and every log group the stack causes has a retention and is deleted with it."""

from __future__ import annotations

import pytest
from cdk_support import Synthesized, logical_id
from cdk_template_queries import by_addon, by_type, depends_on

from hyperpod_dpd_cdk.teardown import DEFAULT_DEADLINE, PROVIDER_TIMEOUT


def barrier(s: Synthesized, kind: str) -> str:
    found = [k for k, v in by_type(s.template, "Custom::HyperPodDpdTeardown").items()
             if v["Properties"]["Kind"] == kind]
    assert len(found) == 1, found
    return found[0]


def endpoint_manifests(s: Synthesized) -> list[str]:
    return [logical_id(e.manifest) for e in s.stack.endpoints]


def test_delete_order_endpoint_barrier_addon_cluster_network(default_app: Synthesized) -> None:
    t = default_app.template
    operator = barrier(default_app, "operator")
    addon = by_addon(t, "amazon-sagemaker-hyperpod-inference")
    hyperpod = default_app.one("AWS::SageMaker::Cluster")[0]
    eks = logical_id(default_app.stack.eks.cluster)
    guardduty = barrier(default_app, "guardduty")
    vpc = default_app.one("AWS::EC2::VPC")[0]
    for manifest in endpoint_manifests(default_app):
        assert depends_on(t, manifest, operator), "the endpoint must be deleted before the barrier runs"
    chain = [(operator, addon), (addon, hyperpod), (hyperpod, eks), (eks, guardduty), (guardduty, vpc)]
    for later, earlier in chain:
        assert depends_on(t, later, earlier), f"{later} must be deleted before {earlier}"
    for subnet in by_type(t, "AWS::EC2::Subnet"):
        assert depends_on(t, guardduty, subnet), "GuardDuty's endpoint must go before its subnets"


def test_the_barrier_names_the_cluster_and_every_registered_endpoint(multi_app: Synthesized) -> None:
    properties = multi_app.template["Resources"][barrier(multi_app, "operator")]["Properties"]
    assert properties["ClusterName"] == {"Ref": logical_id(multi_app.stack.eks.cluster)}
    assert properties["EndpointNames"] == sorted(s.endpoint_name for s in multi_app.stack.endpoint_specs
                                                 if s.endpoint_name)
    assert properties["DeadlineSeconds"] < PROVIDER_TIMEOUT.to_seconds() <= 3600


def test_the_barrier_fails_before_the_framework_times_out(default_app: Synthesized) -> None:
    assert DEFAULT_DEADLINE.to_seconds() + 60 <= PROVIDER_TIMEOUT.to_seconds()
    machines = by_type(default_app.template, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 1


def test_guardduty_cleanup_only_for_the_stacks_own_vpc(multi_app: Synthesized) -> None:
    kinds = [v["Properties"]["Kind"] for v in by_type(multi_app.template, "Custom::HyperPodDpdTeardown").values()]
    assert "guardduty" not in kinds  # an existing VPC's GuardDuty endpoint belongs to its owner


@pytest.mark.parametrize("name", ["default", "existing-cluster"])
def test_caused_log_groups_have_retention_and_are_deleted(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    retentions = by_type(s.template, "Custom::LogRetention")
    names = [str(v["Properties"]["LogGroupName"]) for v in retentions.values()]
    assert any("/aws/sagemaker/Clusters/" in n for n in names)
    assert any("/aws/eks/" in n for n in names) == (name == "default"), "an existing cluster's logs are not ours"
    for resource in retentions.values():
        assert resource["Properties"]["RetentionInDays"] == 30  # LOG_RETENTION, ONE_MONTH
        assert resource["Properties"]["RemovalPolicy"] == "destroy"
    hyperpod = s.one("AWS::SageMaker::Cluster")[0]
    assert depends_on(s.template, hyperpod, barrier(s, "logs")), "the sweep must run after HyperPod is gone"


def test_stack_created_log_groups_all_expire_and_none_outlive_the_stack(default_app: Synthesized) -> None:
    for key, group in by_type(default_app.template, "AWS::Logs::LogGroup").items():
        assert "RetentionInDays" in group["Properties"], key
        if key.startswith("Teardown"):
            assert group["DeletionPolicy"] == "Delete", key


def test_the_model_bucket_survives(default_app: Synthesized) -> None:
    bucket = logical_id(default_app.stack.model_bucket.bucket)
    assert default_app.template["Resources"][bucket]["DeletionPolicy"] == "Retain"
