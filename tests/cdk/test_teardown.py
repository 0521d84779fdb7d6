"""``cdk destroy`` order in the synthesized template: CloudFormation deletes in reverse dependency order, so
endpoint -> barrier -> operator add-on -> HyperPod -> EKS -> GuardDuty cleanup -> VPC must be a chain of
dependencies; and every log group the stack causes has a retention and is deleted with it."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from cdk.cdk_support import REGION, Synthesized, logical_id, synthesize
from cdk.cdk_template_queries import by_addon, by_type, depends_on

from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, load_balancer_ingress
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import HyperPodDpdStack
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


# Condition keys of the resource types these actions act on, from the Service Authorization Reference (cfn-lint's
# copy, cfnlint/data/AdditionalSpecs/Policies.json, ec2 and elasticloadbalancing "Resources"): an Allow conditioned
# on any other key never matches.
SUPPORTED_KEYS = {
    "vpc-endpoint": {"aws:RequestTag/", "aws:ResourceTag/", "aws:TagKeys", "ec2:Attribute", "ec2:Region",
                     "ec2:ResourceTag/", "ec2:VpceMultiRegion", "ec2:VpcePrivateDnsPreference",
                     "ec2:VpcePrivateDnsSpecifiedDomains", "ec2:VpceServiceName", "ec2:VpceServiceOwner",
                     "ec2:VpceServiceRegion"},
    "security-group": {"aws:RequestTag/", "aws:ResourceTag/", "aws:TagKeys", "ec2:IsLaunchTemplateResource",
                       "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/", "ec2:SecurityGroupID", "ec2:Vpc"},
    "loadbalancer": {"aws:ResourceTag/", "elasticloadbalancing:ResourceTag/"},
    "targetgroup": {"aws:ResourceTag/", "elasticloadbalancing:ResourceTag/"},
}
ACTS_ON = {"ec2:DeleteVpcEndpoints": ["vpc-endpoint"], "ec2:DeleteSecurityGroup": ["security-group"],
           "ec2:RevokeSecurityGroupIngress": ["security-group"],
           "elasticloadbalancing:DeleteLoadBalancer": ["loadbalancer"],
           "elasticloadbalancing:DeleteTargetGroup": ["targetgroup"]}


def barrier_statements(s: Synthesized, kind: str) -> list[dict[str, Any]]:
    policy = depends_on_policy(s, barrier(s, kind))
    return list(s.template["Resources"][policy]["Properties"]["PolicyDocument"]["Statement"])


def depends_on_policy(s: Synthesized, resource: str) -> str:
    found = [d for d in s.template["Resources"][resource].get("DependsOn", [])
             if s.template["Resources"][d]["Type"] == "AWS::IAM::Policy"]
    assert len(found) == 1, found
    return found[0]


def actions(statement: dict[str, Any]) -> list[str]:
    value = statement["Action"]
    return [value] if isinstance(value, str) else list(value)


def key_supported(key: str, action: str) -> bool:
    stem = key.split("/", 1)[0] + "/" if "/" in key else key
    return all(stem in SUPPORTED_KEYS[kind] for kind in ACTS_ON[action])


@pytest.mark.parametrize("name", ["default", "existing-cluster"])
def test_every_delete_condition_key_is_one_its_action_supports(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    kinds = ["operator", "guardduty"] if name == "default" else ["operator"]
    for kind in kinds:
        for statement in barrier_statements(s, kind):
            for action in actions(statement):
                if action not in ACTS_ON:
                    continue
                keys = [k for op in statement.get("Condition", {}).values() for k in op]
                assert keys or "*" not in str(statement["Resource"]), f"{action} on any resource, unconditioned"
                for key in keys:
                    assert key_supported(key, action), f"{kind}: {action} cannot be conditioned on {key}"


def test_guardduty_endpoint_deletes_key_on_guarddutys_own_tag(default_app: Synthesized) -> None:
    statements = barrier_statements(default_app, "guardduty")
    endpoint = [st for st in statements if "ec2:DeleteVpcEndpoints" in actions(st)]
    assert len(endpoint) == 1 and actions(endpoint[0]) == ["ec2:DeleteVpcEndpoints"]
    # AmazonGuardDutyServiceRolePolicy, Sid GuardDutyModifyDeleteVpcEndpointPolicy: the same condition.
    assert endpoint[0]["Condition"] == {"Null": {"aws:ResourceTag/GuardDutyManaged": "false"}}


def operator_delete_statement(s: Synthesized) -> dict[str, Any]:
    found = [st for st in barrier_statements(s, "operator") if "elasticloadbalancing:DeleteLoadBalancer" in actions(st)]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("name", ["default", "multi", "existing-cluster"])
def test_deletes_require_the_cluster_tag_and_one_of_this_stacks_ingresses(all_apps: dict[str, Synthesized],
                                                                         name: str) -> None:
    s = all_apps[name]
    expected = sorted(f"{OPERATOR_NAMESPACE}/{load_balancer_ingress(spec)}" for spec in s.stack.endpoint_specs)
    condition = operator_delete_statement(s)["Condition"]["StringEquals"]
    assert condition["aws:ResourceTag/ingress.k8s.aws/stack"] == expected
    assert condition["aws:ResourceTag/elbv2.k8s.aws/cluster"] == s.template["Resources"][barrier(s, "operator")][
        "Properties"]["ClusterName"]
    assert s.template["Resources"][barrier(s, "operator")]["Properties"]["IngressStacks"] == expected


def test_on_an_existing_cluster_the_shared_backend_group_and_others_rules_are_never_touched(
        existing_cluster_app: Synthesized) -> None:
    s = existing_cluster_app
    assert s.template["Resources"][barrier(s, "operator")]["Properties"]["DeleteBackendSecurityGroup"] is False
    for statement in barrier_statements(s, "operator"):
        assert "ec2:RevokeSecurityGroupIngress" not in actions(statement)
        assert "elbv2.k8s.aws/resource" not in str(statement.get("Condition", {}))


def test_on_its_own_cluster_the_barrier_may_revoke_only_on_the_node_groups(default_app: Synthesized) -> None:
    s = default_app
    assert s.template["Resources"][barrier(s, "operator")]["Properties"]["DeleteBackendSecurityGroup"] is True
    revoke = [st for st in barrier_statements(s, "operator") if "ec2:RevokeSecurityGroupIngress" in actions(st)]
    assert len(revoke) == 1
    text = str(revoke[0]["Resource"])
    assert logical_id(s.stack.security_group) in text and "ClusterSecurityGroupId" in text
    assert "security-group/*" not in text
    backend = [st for st in barrier_statements(s, "operator")
               if st.get("Condition", {}).get("StringEquals", {}).get("aws:ResourceTag/elbv2.k8s.aws/resource")]
    assert [actions(st) for st in backend] == [["ec2:DeleteSecurityGroup"]]
    assert backend[0]["Condition"]["StringEquals"]["aws:ResourceTag/elbv2.k8s.aws/resource"] == "backend-sg"


def test_the_aggregated_twin_is_waited_for_too(cdk_context: dict[str, Any],
                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("twin-teardown")))
    stack = HyperPodDpdStack(app, "WithTwin", env=cdk.Environment(region=REGION), endpoints=[default_spec()],
                             aggregated_baseline=True, benchmark=False, observability=False)
    s = synthesize(app, stack)
    properties = s.template["Resources"][barrier(s, "operator")]["Properties"]
    assert properties["EndpointNames"] == ["dpd-test", "dpd-test-agg"]
    assert properties["IngressStacks"] == [f"{OPERATOR_NAMESPACE}/alb-dpd-test-agg-default",
                                           f"{OPERATOR_NAMESPACE}/alb-dpd-test-default"]
    assert operator_delete_statement(s)["Condition"]["StringEquals"][
        "aws:ResourceTag/ingress.k8s.aws/stack"] == properties["IngressStacks"]
