"""Who can reach the cluster from the network: the load balancer scheme guard, the subnet tags and the
EKS API endpoint, read from the synthesized templates."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_s3 as s3
from cdk.cdk_support import (
    ADMIN_NETWORK_ACCESS,
    EXISTING_VPC,
    HYPERPOD_SUBNETS,
    Synthesized,
    logical_id,
    policy_statements,
)

from hyperpod_dpd import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import (
    ClusterEndpointAccess,
    ExistingEksCluster,
    HyperPodDpdStack,
    HyperPodEksCluster,
    InferenceOperator,
)

DENY = {"Sid": "DenyInternetFacingLoadBalancers", "Effect": "Deny",
        "Action": "elasticloadbalancing:CreateLoadBalancer", "Resource": "*",
        "Condition": {"StringEquals": {"elasticloadbalancing:Scheme": "internet-facing"}}}


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {tag["Key"]: tag["Value"] for tag in resource["Properties"].get("Tags", [])}


def test_alb_controller_may_not_create_internet_facing_load_balancers(all_apps: dict[str, Synthesized]) -> None:
    for name, synthesized in all_apps.items():
        statements = policy_statements(synthesized, synthesized.stack.operator.alb_role)
        assert DENY in statements, name
        # Upstream's policy is otherwise intact: its CreateLoadBalancer allow is still there.
        assert any(s["Effect"] == "Allow" and "elasticloadbalancing:CreateLoadBalancer" in s["Action"]
                   for s in statements), name


def _operator_alone(then: Callable[[InferenceOperator], None] = lambda _: None,
                    **props: Any) -> tuple[InferenceOperator, dict[str, Any], cdk.App]:
    app = cdk.App()
    stack = cdk.Stack(app, "Operator", env=cdk.Environment(region="us-west-2"))
    bucket = s3.Bucket.from_bucket_name(stack, "Weights", "my-weights")
    operator = InferenceOperator(
        stack, "InferenceOperator", cluster_name="platform",
        oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
        hyperpod_cluster_arn="arn:aws:sagemaker:us-west-2:111122223333:cluster/abc", model_bucket=bucket,
        model_prefixes=["m"], log_bucket=s3.Bucket.from_bucket_name(stack, "Logs", "my-logs"), **props)
    then(operator)
    template = app.synth().get_stack_artifact(stack.artifact_id)
    return operator, {"template": template.template, "messages": template.messages}, app


def test_opting_out_lifts_the_deny_and_warns() -> None:
    _, denied, _ = _operator_alone()
    _, allowed, _ = _operator_alone(allow_internet_facing_load_balancers=True)

    def statements(found: dict[str, Any]) -> list[Any]:
        return [s for r in found["template"]["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                for s in r["Properties"]["PolicyDocument"]["Statement"]]

    assert DENY in statements(denied)
    assert DENY not in statements(allowed)
    warnings = [str(m.entry.data) for m in allowed["messages"] if "InternetFacingAllowed" in str(m.entry.data)]
    assert warnings and "open to the internet" in warnings[0] and "endpoint_name" in warnings[0]
    assert not [m for m in denied["messages"] if "InternetFacingAllowed" in str(m.entry.data)]


def test_the_context_key_reaches_the_stack(app_module: Any) -> None:
    with pytest.raises(SpecError) as error:
        app_module.build({"allow_internet_facing_load_balancers": "yes"})
    (problem,) = error.value.problems
    assert (problem.field, problem.value) == ("allow_internet_facing_load_balancers", "yes")


def test_public_subnets_carry_no_load_balancer_tag(default_app: Synthesized) -> None:
    subnets = default_app.resources("AWS::EC2::Subnet")
    public = {k: v for k, v in subnets.items() if v["Properties"].get("MapPublicIpOnLaunch")}
    private = {k: v for k, v in subnets.items() if "PrivateSubnet" in k}
    assert len(public) == 2 and len(private) == 2
    for resource in public.values():
        assert not any(key.startswith("kubernetes.io/role/") for key in _tags(resource))
    for resource in private.values():
        assert _tags(resource)["kubernetes.io/role/internal-elb"] == "1"


# --- the EKS API endpoint ------------------------------------------------------------------------------


def _cluster(synthesized: Synthesized) -> dict[str, Any]:
    _, cluster = synthesized.one("AWS::EKS::Cluster")
    return cluster["Properties"]


def test_default_endpoint_is_public_and_private_and_the_creator_is_admin(default_app: Synthesized) -> None:
    props = _cluster(default_app)
    config = props["ResourcesVpcConfig"]
    assert (config["EndpointPublicAccess"], config["EndpointPrivateAccess"]) == (True, True)
    assert "PublicAccessCidrs" not in config  # EKS's default: 0.0.0.0/0
    assert "BootstrapClusterCreatorAdminPermissions" not in props["AccessConfig"]  # EKS's default: true


def test_public_endpoint_narrowed_to_cidrs_and_no_creator_admin(multi_app: Synthesized) -> None:
    props = _cluster(multi_app)
    config = props["ResourcesVpcConfig"]
    assert (config["EndpointPublicAccess"], config["EndpointPrivateAccess"]) == (True, True)
    assert config["PublicAccessCidrs"] == list(ADMIN_NETWORK_ACCESS.public_cidrs)
    assert props["AccessConfig"]["BootstrapClusterCreatorAdminPermissions"] is False


@pytest.mark.parametrize(("text", "expected"), [
    ("private", ClusterEndpointAccess.private_only()),
    ("public", ClusterEndpointAccess()),
    ("203.0.113.0/24, 198.51.100.7/32", ClusterEndpointAccess.public_from("203.0.113.0/24", "198.51.100.7/32")),
])
def test_endpoint_access_context_values(text: str, expected: ClusterEndpointAccess) -> None:
    assert ClusterEndpointAccess.parse(text) == expected


def test_private_only_maps_to_eks_private() -> None:
    access = ClusterEndpointAccess.private_only()
    assert (access.to_eks().__dict__ == cdk.aws_eks_v2.EndpointAccess.PRIVATE.__dict__, access.describe()) == (
        True, "private only")
    assert not list(access.problems("eks_endpoint_access"))


def test_bad_endpoint_access_names_the_field_value_and_fix(app_module: Any) -> None:
    with pytest.raises(SpecError) as error:
        app_module.build({"eks_endpoint_access": "203.0.113.7/24,10.0.0.0/8,2001:db8::/32"})
    found = {(p.field, str(p.value)): p for p in error.value.problems}
    assert set(found) == {("eks_endpoint_access", "203.0.113.7/24"), ("eks_endpoint_access", "2001:db8::/32")}
    assert "host bits" in found[("eks_endpoint_access", "203.0.113.7/24")].fix


def test_endpoint_access_does_not_apply_to_an_existing_cluster() -> None:
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(
            cdk.App(), "Bad", env=cdk.Environment(region="us-west-2"), endpoints=[default_spec()],
            vpc=EXISTING_VPC, hyperpod_subnet_ids=HYPERPOD_SUBNETS,
            existing_cluster=ExistingEksCluster(cluster_name="platform", oidc_issuer_url="https://oidc.example/id/X",
                                                oidc_provider_arn="arn:aws:iam::111122223333:oidc-provider/x"),
            eks_endpoint_access=ClusterEndpointAccess.private_only())
    (problem,) = error.value.problems
    assert (problem.field, problem.value) == ("eks_endpoint_access", "private only")
    assert "update-cluster-config" in problem.fix


def test_data_capture_to_the_default_location_is_granted() -> None:
    _, synthesized, _ = _operator_alone(then=InferenceOperator.allow_data_capture)
    template = synthesized["template"]
    found = [s for r in template["Resources"].values() if r["Type"] in ("AWS::IAM::Policy", "AWS::S3::BucketPolicy")
             for s in r["Properties"]["PolicyDocument"]["Statement"]
             if s.get("Action") == "s3:PutObject" and "data-capture/*" in str(s["Resource"])]
    principals = sorted(str(s.get("Principal", {}).get("Service", "role")) for s in found)
    assert principals == ["logdelivery.elasticloadbalancing.amazonaws.com", "role"]


# --- NetworkPolicies (opt-in) ----------------------------------------------------------------------------


def _network_policies(synthesized: Synthesized) -> list[dict[str, Any]]:
    found = []
    for resource in synthesized.resources("Custom::AWSCDK-EKS-KubernetesResource").values():
        manifest = resource["Properties"]["Manifest"]
        if isinstance(manifest, str) and '"NetworkPolicy"' in manifest:
            found += [doc for doc in json.loads(manifest) if doc["kind"] == "NetworkPolicy"]
    return found


def _cni_configuration(synthesized: Synthesized) -> Any:
    (cni,) = [r for r in synthesized.resources("AWS::EKS::Addon").values()
              if r["Properties"]["AddonName"] == "vpc-cni"]
    return cni["Properties"].get("ConfigurationValues")


def test_network_policies_are_off_by_default(default_app: Synthesized) -> None:
    assert _network_policies(default_app) == []
    assert _cni_configuration(default_app) is None


def test_network_policies_opted_in_are_applied_and_enforced(multi_app: Synthesized) -> None:
    policies = _network_policies(multi_app)
    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in policies) == [
        ("default", "dpd-test-model-pods"), ("inference", "qwen-dpd-model-pods")]
    assert json.loads(_cni_configuration(multi_app)) == {"enableNetworkPolicy": "true"}


def test_network_policies_on_an_existing_cluster_warn_they_are_not_enforced(
        existing_cluster_app: Synthesized) -> None:
    assert len(_network_policies(existing_cluster_app)) == 1
    messages = existing_cluster_app.app.synth().get_stack_artifact(existing_cluster_app.stack.artifact_id).messages
    warnings = [str(m.entry.data) for m in messages if "NetworkPolicyNotEnforced" in str(m.entry.data)]
    assert warnings and "enableNetworkPolicy=true" in warnings[0]


@pytest.mark.parametrize("allowed", [False, True])
def test_a_new_clusters_role_denies_internet_facing_unless_opted_out(allowed: bool) -> None:
    """The control plane's legacy cloud provider creates Service load balancers as the cluster role."""
    app = cdk.App()
    stack = cdk.Stack(app, "Cluster", env=cdk.Environment(region="us-west-2"))
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2)
    built = HyperPodEksCluster(stack, "Eks", vpc=vpc,
                               subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
                               security_group=ec2.SecurityGroup(stack, "Efa", vpc=vpc),
                               allow_internet_facing_load_balancers=allowed)
    template = app.synth().get_stack_artifact(stack.artifact_id).template
    assert isinstance(built.cluster, eks.Cluster)
    role = logical_id(built.cluster.role)
    assert template["Resources"][role]["Type"] == "AWS::IAM::Role"
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"] for s in r["Properties"]["PolicyDocument"]["Statement"]]
    assert (DENY in statements) is not allowed
