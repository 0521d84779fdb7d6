"""What a live account needs for ``cdk deploy`` to bring the operator and the nodes up.

Each test pins one thing AWS's own HyperPod stacks do and an earlier version of this stack did not:
the operator's role name, the FSx CSI driver, the nodes' ENI permissions, the load balancer
controller's upstream policy, the order of add-ons and policies, and the versions.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_eks_v2 as eks
from cdk.cdk_support import Synthesized, logical_id, policy_statements
from cdk.cdk_template_queries import by_addon, by_type, depends_on, direct_dependencies

from hyperpod_dpd_cdk._private.alb_policy import controller_statements, known_versions, policy_document
from hyperpod_dpd_cdk.exposure import DENY_SID
from hyperpod_dpd_cdk.inference_operator import EXECUTION_ROLE_PREFIX, execution_role_name
from hyperpod_dpd_cdk.versions import ALB_CONTROLLER_VERSION, INFERENCE_ADDON_VERSION, KUBERNETES_VERSION

APPS = ["default", "multi", "existing-cluster"]


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def resources_of(statement: dict[str, Any]) -> list[Any]:
    resource = statement["Resource"]
    return resource if isinstance(resource, list) else [resource]


# --- the operator's execution role ------------------------------------------------------------------

@pytest.mark.parametrize("name", APPS)
def test_execution_role_has_the_name_the_addon_and_managed_policy_accept(
        all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    role = s.template["Resources"][logical_id(s.stack.operator.execution_role)]
    role_name = role["Properties"]["RoleName"]
    assert role_name.startswith(f"{EXECUTION_ROLE_PREFIX}-")
    assert len(role_name) <= 64
    addon = s.template["Resources"][by_addon(s.template, "amazon-sagemaker-hyperpod-inference")]
    assert logical_id(s.stack.operator.execution_role) in json.dumps(addon["Properties"]["ConfigurationValues"])


def test_execution_role_names_are_unique_per_stack_and_region() -> None:
    names = {execution_role_name(stack, region)
             for stack in ("HyperPodDpd", "HyperPodDpd2", "AVeryLongStackNameThatIsStillValidForCloudFormation")
             for region in ("us-west-2", "ap-southeast-4")}
    assert len(names) == 6
    assert all(n.startswith(EXECUTION_ROLE_PREFIX) and len(n) <= 64 for n in names)


# --- the FSx for Lustre CSI driver ------------------------------------------------------------------

@pytest.mark.parametrize("name", APPS)
def test_fsx_csi_driver_is_installed_before_the_operator(all_apps: dict[str, Synthesized], name: str) -> None:
    template = all_apps[name].template
    fsx = by_addon(template, "aws-fsx-csi-driver")
    operator = by_addon(template, "amazon-sagemaker-hyperpod-inference")
    assert fsx in direct_dependencies(template, operator)
    hyperpod, _ = all_apps[name].one("AWS::SageMaker::Cluster")
    assert depends_on(template, fsx, hyperpod), "the driver's node pods need the HyperPod nodes' cluster"


# --- the HyperPod execution role: ENIs in the customer VPC ------------------------------------------

@pytest.mark.parametrize("name", ["default", "multi"])
def test_node_role_may_manage_eni_permissions_in_its_vpc_subnet_and_group(
        all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    statements = policy_statements(s, s.stack.execution_role.role)
    (eni,) = [st for st in statements if "ec2:CreateNetworkInterfacePermission" in actions_of(st)]
    assert set(actions_of(eni)) == {"ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterfacePermission"}
    text = json.dumps(resources_of(eni))
    assert "Resource::*" not in text and '"*"' not in text
    for kind in ("instance/*", "network-interface/*", ":vpc/", ":subnet/", ":security-group/"):
        assert kind in text, kind
    efa = logical_id(s.stack.security_group)
    assert efa in text
    if name == "multi":
        assert "vpc-0123456789abcdef0" in text and "subnet-0ccc0000000000003" in text
    # These reads have no resource-level permissions (CDK merges them with the other "*" actions).
    unscoped = {a for st in statements if resources_of(st) == ["*"] for a in actions_of(st)}
    assert {"ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSecurityGroups"} <= unscoped


# --- the AWS Load Balancer Controller -----------------------------------------------------------------

def test_controller_version_is_one_aws_cdk_lib_knows() -> None:
    assert eks.AlbControllerVersion.V2_13_2.version == ALB_CONTROLLER_VERSION
    assert ALB_CONTROLLER_VERSION in known_versions()
    with pytest.raises(ValueError, match=r"no AWS Load Balancer Controller policy for v9\.9\.9"):
        policy_document("v9.9.9")


def partition_literal(value: Any) -> str:
    """``{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":..."]]}`` as the ``arn:aws:...`` text."""
    if isinstance(value, str):
        return value
    separator, parts = value["Fn::Join"]
    return str(separator).join("aws" if part == {"Ref": "AWS::Partition"} else part for part in parts)


def grants(statements: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (action, resource, condition) a policy allows, however CDK merged its statements."""
    return {(action, partition_literal(resource), json.dumps(st.get("Condition"), sort_keys=True))
            for st in statements for action in actions_of(st) for resource in resources_of(st)}


def test_controller_role_holds_upstreams_policy_for_its_version(default_app: Synthesized) -> None:
    statements = policy_statements(default_app, default_app.stack.operator.alb_role)
    upstream = policy_document()["Statement"]
    # Upstream's statements unchanged, plus only the stack's deny on internet-facing load balancers.
    ours = [st for st in statements if st.get("Sid") == DENY_SID]
    assert len(ours) == 1 and ours[0]["Effect"] == "Deny"
    assert grants([st for st in statements if st.get("Sid") != DENY_SID]) == grants(upstream)
    assert len(controller_statements()) == len(upstream)
    # v2.13 tags the listeners and rules it creates (feature gate ListenerRulesTagging, on by default).
    tagging = [st for st in statements if actions_of(st) == ["elasticloadbalancing:AddTags"]
               or "elasticloadbalancing:AddTags" in actions_of(st)]
    tagged = json.dumps([resources_of(st) for st in tagging])
    for kind in ("listener/app/*/*/*", "listener/net/*/*/*", "listener-rule/app/*/*/*", "listener-rule/net/*/*/*"):
        assert kind in tagged, kind
    # The controller may not rewrite the ownership tag of what it manages (upstream's RequestTag Null=true).
    guarded = [st for st in statements if "ec2:DeleteTags" in actions_of(st)]
    assert guarded and all(st["Condition"]["Null"]["aws:RequestTag/elbv2.k8s.aws/cluster"] == "true"
                           for st in guarded)
    assert "arn:aws:" not in json.dumps(statements), "ARNs must follow the stack's partition"


# --- order: add-ons after their roles' policies, HyperPod after its route ---------------------------

@pytest.mark.parametrize("name", APPS)
def test_addons_wait_for_their_roles_inline_policies(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    operator = s.stack.operator
    template = s.template
    inference = by_addon(template, "amazon-sagemaker-hyperpod-inference")
    for role in (operator.execution_role, operator.alb_role, operator.keda_role):
        policy = logical_id(role.node.find_child("DefaultPolicy"))
        assert policy in direct_dependencies(template, inference), policy
    s3_csi = by_addon(template, "aws-mountpoint-s3-csi-driver")
    assert logical_id(operator.s3_csi_role.node.find_child("DefaultPolicy")) in direct_dependencies(template, s3_csi)


def test_hyperpod_cluster_waits_for_its_subnets_route(default_app: Synthesized) -> None:
    hyperpod, _ = default_app.one("AWS::SageMaker::Cluster")
    for route in default_app.stack.network.hyperpod_routes:
        assert logical_id(route) in direct_dependencies(default_app.template, hyperpod)
    kinds = {r.cfn_resource_type for r in default_app.stack.network.hyperpod_routes}
    assert kinds == {"AWS::EC2::Route", "AWS::EC2::SubnetRouteTableAssociation"}


# --- deep health checks need the dependency chart ----------------------------------------------------

def test_device_plugins_only_mode_requests_no_deep_health_checks(default_app: Synthesized) -> None:
    _, cluster = default_app.one("AWS::SageMaker::Cluster")
    for group in cluster["Properties"]["InstanceGroups"]:
        assert "OnStartDeepHealthChecks" not in group, group["InstanceGroupName"]
    warning = [m for m in default_app.app.synth().get_stack_artifact(default_app.stack.artifact_id).messages
               if "NoHealthMonitoringAgent" in json.dumps(m.entry.data)]
    assert warning and "no deep health checks" in str(warning[0].entry.data)


# --- versions and encryption --------------------------------------------------------------------------

def test_versions_are_in_support(default_app: Synthesized) -> None:
    (cluster,) = by_type(default_app.template, "AWS::EKS::Cluster").values()
    assert cluster["Properties"]["Version"] == KUBERNETES_VERSION == "1.34"
    addon = default_app.template["Resources"][by_addon(default_app.template, "amazon-sagemaker-hyperpod-inference")]
    assert addon["Properties"]["AddonVersion"] == INFERENCE_ADDON_VERSION == "v1.4.0-eksbuild.1"
    layers = by_type(default_app.template, "AWS::Lambda::LayerVersion").values()
    assert any(layer["Properties"].get("Description", "").startswith("/opt/kubectl/kubectl 1.34.")
               for layer in layers)


def test_kubernetes_secrets_are_envelope_encrypted_with_a_rotated_key(default_app: Synthesized) -> None:
    (cluster,) = by_type(default_app.template, "AWS::EKS::Cluster").values()
    (encryption,) = cluster["Properties"]["EncryptionConfig"]
    assert encryption["Resources"] == ["secrets"]
    key = default_app.template["Resources"][encryption["Provider"]["KeyArn"]["Fn::GetAtt"][0]]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain"
