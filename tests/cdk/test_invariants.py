"""Fine-grained checks of what must hold in every synthesized stack: placement, EFA, buckets, order, trust."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk.cdk_support import (
    EXISTING_OIDC_PROVIDER,
    HYPERPOD_SUBNETS,
    Synthesized,
    logical_id,
    policy_statements,
    trust_policy,
)
from cdk.cdk_template_queries import (
    by_addon,
    by_type,
    cfn_json_value,
    depends_on,
    direct_dependencies,
    references,
    rendered,
)

from hyperpod_dpd_cdk.inference_operator import ALB_SA, CONTROLLER_SA, KEDA_SA, S3_CSI_SA

APPS = ["default", "multi", "existing-cluster"]


def hyperpod(s: Synthesized) -> tuple[str, dict[str, Any]]:
    return s.one("AWS::SageMaker::Cluster")


# --- one AZ for every HyperPod node -------------------------------------------------------------

def test_new_vpc_puts_hyperpod_in_one_subnet_created_by_az_id(default_app: Synthesized) -> None:
    _, cluster = hyperpod(default_app)
    subnets = cluster["Properties"]["VpcConfig"]["Subnets"]
    assert len(subnets) == 1
    subnet = default_app.template["Resources"][subnets[0]["Ref"]]
    assert subnet["Type"] == "AWS::EC2::Subnet"
    assert subnet["Properties"]["AvailabilityZoneId"] == "usw2-az2"
    assert subnet["Properties"]["MapPublicIpOnLaunch"] is False
    assert "AvailabilityZone" not in subnet["Properties"]


@pytest.mark.parametrize("name", APPS)
def test_no_instance_group_overrides_the_single_subnet(all_apps: dict[str, Synthesized], name: str) -> None:
    _, cluster = hyperpod(all_apps[name])
    for group in cluster["Properties"]["InstanceGroups"]:
        assert "OverrideVpcConfig" not in group, group["InstanceGroupName"]


def test_existing_vpc_uses_the_subnet_of_the_chosen_az_id(multi_app: Synthesized) -> None:
    _, cluster = hyperpod(multi_app)
    assert cluster["Properties"]["VpcConfig"]["Subnets"] == [HYPERPOD_SUBNETS["usw2-az2"]]


def test_hyperpod_subnet_routes_to_nat_and_s3(default_app: Synthesized) -> None:
    _, cluster = hyperpod(default_app)
    subnet_id = cluster["Properties"]["VpcConfig"]["Subnets"][0]["Ref"]
    tables = [a["Properties"]["RouteTableId"]["Ref"] for a in
              by_type(default_app.template, "AWS::EC2::SubnetRouteTableAssociation").values()
              if a["Properties"]["SubnetId"] == {"Ref": subnet_id}]
    assert len(tables) == 1
    routes = [r["Properties"] for r in by_type(default_app.template, "AWS::EC2::Route").values()
              if r["Properties"]["RouteTableId"] == {"Ref": tables[0]}]
    assert [r["DestinationCidrBlock"] for r in routes if "NatGatewayId" in r] == ["0.0.0.0/0"]
    (endpoint,) = by_type(default_app.template, "AWS::EC2::VPCEndpoint").values()
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert {"Ref": tables[0]} in endpoint["Properties"]["RouteTableIds"]


def test_eks_control_plane_spans_two_azs_and_excludes_the_hyperpod_subnet(default_app: Synthesized) -> None:
    _, eks = default_app.one("AWS::EKS::Cluster")
    subnet_ids = [s["Ref"] for s in eks["Properties"]["ResourcesVpcConfig"]["SubnetIds"]]
    zones = {json.dumps(default_app.template["Resources"][s]["Properties"]["AvailabilityZone"]) for s in subnet_ids}
    assert len(zones) >= 2
    _, cluster = hyperpod(default_app)
    assert cluster["Properties"]["VpcConfig"]["Subnets"][0]["Ref"] not in subnet_ids


# --- EFA security group -------------------------------------------------------------------------

def efa_group(s: Synthesized) -> str:
    _, cluster = hyperpod(s)
    (group,) = cluster["Properties"]["VpcConfig"]["SecurityGroupIds"]
    return str(group["Fn::GetAtt"][0])


@pytest.mark.parametrize("name", APPS)
def test_efa_group_allows_all_traffic_to_and_from_itself(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    sg = efa_group(s)
    self_ref = {"Fn::GetAtt": [sg, "GroupId"]}
    ingress = [r["Properties"] for r in by_type(s.template, "AWS::EC2::SecurityGroupIngress").values()
               if r["Properties"]["GroupId"] == self_ref]
    egress = [r["Properties"] for r in by_type(s.template, "AWS::EC2::SecurityGroupEgress").values()
              if r["Properties"]["GroupId"] == self_ref]
    assert any(r["IpProtocol"] == "-1" and r.get("SourceSecurityGroupId") == self_ref for r in ingress)
    assert any(r["IpProtocol"] == "-1" and r.get("DestinationSecurityGroupId") == self_ref for r in egress)
    # allow_all_outbound=False: no inline egress that would make CDK drop the self rule
    assert "SecurityGroupEgress" not in s.template["Resources"][sg]["Properties"]


@pytest.mark.parametrize("name", APPS)
def test_nothing_is_open_to_the_world(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    for resource_id, resource in s.template["Resources"].items():
        properties = resource.get("Properties", {})
        rules = []
        if resource["Type"] == "AWS::EC2::SecurityGroupIngress":
            rules = [properties]
        elif resource["Type"] == "AWS::EC2::SecurityGroup":
            rules = properties.get("SecurityGroupIngress", [])
        for rule in rules:
            assert "CidrIp" not in rule and "CidrIpv6" not in rule, resource_id


@pytest.mark.parametrize("name", APPS)
def test_efa_group_is_attached_to_hyperpod_and_the_eks_control_plane(all_apps: dict[str, Synthesized],
                                                                    name: str) -> None:
    s = all_apps[name]
    sg = efa_group(s)
    eks = s.resources("AWS::EKS::Cluster")
    for cluster in eks.values():  # none when the cluster is imported
        assert {"Fn::GetAtt": [sg, "GroupId"]} in cluster["Properties"]["ResourcesVpcConfig"]["SecurityGroupIds"]


def test_existing_cluster_group_and_efa_group_reach_each_other(existing_cluster_app: Synthesized) -> None:
    s = existing_cluster_app
    sg = {"Fn::GetAtt": [efa_group(s), "GroupId"]}
    pairs = {(json.dumps(r["Properties"]["GroupId"]), json.dumps(r["Properties"]["SourceSecurityGroupId"]))
             for r in by_type(s.template, "AWS::EC2::SecurityGroupIngress").values()}
    assert (json.dumps(sg), json.dumps("sg-0eee0000000000005")) in pairs
    assert (json.dumps("sg-0eee0000000000005"), json.dumps(sg)) in pairs


def test_efa_group_only_admits_itself_and_the_eks_cluster_group(default_app: Synthesized) -> None:
    sg = efa_group(default_app)
    eks_id, _ = default_app.one("AWS::EKS::Cluster")
    allowed = [{"Fn::GetAtt": [sg, "GroupId"]}, {"Fn::GetAtt": [eks_id, "ClusterSecurityGroupId"]}]
    sources = [r["Properties"]["SourceSecurityGroupId"]
               for r in by_type(default_app.template, "AWS::EC2::SecurityGroupIngress").values()
               if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg, "GroupId"]}]
    assert sources and all(source in allowed for source in sources)


# --- buckets --------------------------------------------------------------------------------------

def model_bucket_id(s: Synthesized) -> str:
    return logical_id(s.stack.model_bucket.bucket)


def test_model_bucket_is_retained_versioned_encrypted_private_and_logged(default_app: Synthesized) -> None:
    bucket = default_app.template["Resources"][model_bucket_id(default_app)]
    assert bucket["DeletionPolicy"] == "Retain"
    assert bucket["UpdateReplacePolicy"] == "Retain"
    props = bucket["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "AES256"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    log_bucket = props["LoggingConfiguration"]["DestinationBucketName"]["Ref"]
    assert default_app.template["Resources"][log_bucket]["DeletionPolicy"] == "Retain"
    # The only bucket whose objects are deleted with the stack is the lifecycle scripts bucket, ours.
    (auto_delete,) = default_app.resources("Custom::S3AutoDeleteObjects").values()
    lifecycle = logical_id(default_app.stack.lifecycle.bucket)
    assert auto_delete["Properties"]["BucketName"] == {"Ref": lifecycle}


def test_lifecycle_bucket_is_versioned_and_emptied_on_destroy(default_app: Synthesized) -> None:
    bucket = default_app.template["Resources"][logical_id(default_app.stack.lifecycle.bucket)]
    assert bucket["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    assert bucket["DeletionPolicy"] == "Delete"


def test_model_bucket_policy_denies_plain_http(default_app: Synthesized) -> None:
    bucket = model_bucket_id(default_app)
    (policy,) = [p for p in by_type(default_app.template, "AWS::S3::BucketPolicy").values()
                 if p["Properties"]["Bucket"] == {"Ref": bucket}]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
               for s in statements)
    assert not any(s["Effect"] == "Allow" and s.get("Principal") in ("*", {"AWS": "*"}) for s in statements)


def test_existing_bucket_is_not_created_and_the_chart_points_at_it(multi_app: Synthesized) -> None:
    assert multi_app.stack.model_bucket.created is False
    for endpoint in multi_app.stack.endpoints:
        source = endpoint.spec.model.source
        assert getattr(source, "bucket", None) == "my-weights"


def test_every_bucket_is_tls_only_and_private(default_app: Synthesized) -> None:
    buckets = default_app.resources("AWS::S3::Bucket")
    policies = {p["Properties"]["Bucket"]["Ref"]: p
                for p in by_type(default_app.template, "AWS::S3::BucketPolicy").values()}
    for resource_id, bucket in buckets.items():
        assert bucket["Properties"]["PublicAccessBlockConfiguration"]["BlockPublicPolicy"] is True, resource_id
        assert "BucketEncryption" in bucket["Properties"], resource_id
        assert resource_id in policies, f"{resource_id} has no TLS-only policy"


# --- dependency order -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", APPS)
def test_charts_then_hyperpod_then_operator_then_endpoints(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    t = s.template
    hp, _ = hyperpod(s)
    charts = list(s.resources("Custom::AWSCDK-EKS-HelmChart"))
    assert charts
    for chart in charts:
        assert depends_on(t, hp, chart), f"HyperPod cluster does not wait for {chart}"
    operator = by_addon(t, "amazon-sagemaker-hyperpod-inference")
    for prerequisite in ("cert-manager", "aws-mountpoint-s3-csi-driver", "metrics-server"):
        addon = by_addon(t, prerequisite)
        assert hp in direct_dependencies(t, addon), f"{prerequisite} does not wait for HyperPod"
        assert addon in direct_dependencies(t, operator), f"operator does not wait for {prerequisite}"
    assert depends_on(t, operator, hp)
    endpoints = [k for k, v in s.resources("Custom::AWSCDK-EKS-KubernetesResource").items()
                 if "InferenceEndpointConfig" in json.dumps(v["Properties"]["Manifest"])]
    assert len(endpoints) == len(s.stack.endpoints)
    for endpoint in endpoints:
        assert operator in direct_dependencies(t, endpoint)
        assert not depends_on(t, hp, endpoint) and not depends_on(t, operator, endpoint)


def test_hyperpod_waits_for_the_lifecycle_upload_and_its_role_policy(default_app: Synthesized) -> None:
    t = default_app.template
    hp, _ = hyperpod(default_app)
    (upload,) = default_app.resources("Custom::CDKBucketDeployment")
    assert depends_on(t, hp, upload)
    policy = default_app.stack.get_logical_id(
        default_app.stack.execution_role.policy.node.default_child)  # type: ignore[arg-type]
    assert policy in direct_dependencies(t, hp)


def test_namespaced_endpoint_waits_for_its_namespace(multi_app: Synthesized) -> None:
    t = multi_app.template
    namespaces = {k for k, v in multi_app.resources("Custom::AWSCDK-EKS-KubernetesResource").items()
                  if '"kind":"Namespace"' in json.dumps(v["Properties"]["Manifest"]).replace('\\"', '"')}
    assert len(namespaces) == 1
    (qwen,) = [k for k, v in multi_app.resources("Custom::AWSCDK-EKS-KubernetesResource").items()
               if "qwen-dpd" in json.dumps(v["Properties"]["Manifest"])
               and "InferenceEndpointConfig" in json.dumps(v["Properties"]["Manifest"])]
    assert namespaces <= direct_dependencies(t, qwen)


# --- IAM trust ------------------------------------------------------------------------------------

def irsa_subjects(s: Synthesized, role_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(operator, {key: value}) of every web-identity condition of a role, issuer replaced by ISSUER."""
    found = []
    for statement in s.template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
        if statement["Action"] == "sts:AssumeRoleWithWebIdentity":
            for operator, condition in statement["Condition"].items():
                found.append((operator, cfn_json_value(s.template, condition)))
    return found


@pytest.mark.parametrize("name", ["default", "existing-cluster"])
def test_irsa_roles_trust_exactly_their_service_account(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    operator = s.stack.operator
    for role, subject in ((operator.execution_role, CONTROLLER_SA), (operator.alb_role, ALB_SA),
                          (operator.keda_role, KEDA_SA), (operator.s3_csi_role, S3_CSI_SA)):
        conditions = irsa_subjects(s, logical_id(role))
        assert len(conditions) == 1, role.node.path
        operator_name, values = conditions[0]
        assert operator_name == "StringEquals"
        subs = {k: v for k, v in values.items() if k.endswith(":sub")}
        auds = {k: v for k, v in values.items() if k.endswith(":aud")}
        assert list(subs.values()) == [subject]
        assert list(auds.values()) == ["sts.amazonaws.com"]


def test_existing_cluster_trust_names_its_issuer(existing_cluster_app: Synthesized) -> None:
    s = existing_cluster_app
    values = irsa_subjects(s, logical_id(s.stack.operator.execution_role))[0][1]
    assert set(values) == {"oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7:sub",
                           "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7:aud"}


def test_operator_execution_role_is_also_trusted_by_sagemaker_only(default_app: Synthesized) -> None:
    role = default_app.template["Resources"][logical_id(default_app.stack.operator.execution_role)]
    services = [s["Principal"]["Service"] for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
                if "Service" in s.get("Principal", {})]
    assert services == ["sagemaker.amazonaws.com"]


@pytest.mark.parametrize("name", ["default", "multi"])
def test_s3_access_is_limited_to_the_model_prefixes(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    prefixes = sorted({e.spec.model.source.prefix for e in s.stack.endpoints})  # type: ignore[union-attr]
    for role in (s.stack.operator.s3_csi_role, s.stack.execution_role.role):
        for statement in policy_statements(s, role):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if not any(a.startswith("s3:") for a in actions):
                continue
            assert set(actions) <= {"s3:GetObject", "s3:ListBucket"}, actions
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            text = json.dumps(resources)
            if "s3:GetObject" in actions:
                for resource in resources:
                    joined = json.dumps(resource)
                    assert any(f"/{p}/*" in joined for p in [*prefixes, "lifecycle"]), joined
            elif role is s.stack.operator.s3_csi_role:
                # Mountpoint lists from the mount prefix the operator chooses: names of the model bucket only.
                assert "Condition" not in statement
                expected = "my-weights" if name == "multi" else model_bucket_id(s)
                assert len(resources) == 1 and expected in text, text
            else:
                assert "s3:prefix" in json.dumps(statement["Condition"]), text


# --- the endpoints on their instance groups -------------------------------------------------------

@pytest.mark.parametrize("name", APPS)
def test_node_selectors_point_at_the_instance_groups(all_apps: dict[str, Synthesized], name: str) -> None:
    s = all_apps[name]
    _, cluster = hyperpod(s)
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    for resource in s.resources("Custom::AWSCDK-EKS-KubernetesResource").values():
        for obj in rendered(resource["Properties"]["Manifest"], placeholder="TOKEN"):
            if obj["kind"] != "InferenceEndpointConfig":
                continue
            pd = obj["spec"]["pdSpec"]
            for key, role in (("prefillSpec", "prefill"), ("decodingSpec", "decode")):
                group = pd[key]["nodeSelector"]["sagemaker.amazonaws.com/instance-group-name"]
                assert group == f"{obj['metadata']['name']}-{role}"
                assert groups[group]["InstanceType"] == obj["spec"]["instanceType"]


def test_instance_groups_follow_the_specs(multi_app: Synthesized) -> None:
    _, cluster = hyperpod(multi_app)
    groups = {g["InstanceGroupName"]: g for g in cluster["Properties"]["InstanceGroups"]}
    assert {n: g["InstanceCount"] for n, g in groups.items()} == {
        "dpd-test-prefill": 1, "dpd-test-decode": 1,
        "qwen-dpd-prefill": 3,  # autoscaled: nodes for max_replicas
        "qwen-dpd-decode": 1}
    for name, group in groups.items():
        assert group["ThreadsPerCore"] == 1
        # The connectivity test needs two nodes: only the three-node prefill group gets it.
        expected = ["InstanceStress", "InstanceConnectivity"] if group["InstanceCount"] >= 2 else ["InstanceStress"]
        assert group["OnStartDeepHealthChecks"] == expected, name
        assert group["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
        assert group["LifeCycleConfig"]["OnCreate"] == "on_create.sh"
    assert cluster["Properties"]["NodeRecovery"] == "Automatic"
    assert cluster["Properties"]["Orchestrator"]["Eks"]["ClusterArn"]


def test_existing_cluster_is_referenced_by_arn_not_created(existing_cluster_app: Synthesized) -> None:
    s = existing_cluster_app
    assert not s.resources("AWS::EKS::Cluster")
    _, cluster = hyperpod(s)
    arn = json.dumps(cluster["Properties"]["Orchestrator"]["Eks"]["ClusterArn"])
    assert "cluster/platform" in arn
    # IAM allows one provider per issuer: the cluster's own is trusted, none is created.
    assert not s.resources("AWS::IAM::OIDCProvider")
    assert EXISTING_OIDC_PROVIDER in json.dumps(trust_policy(s, s.stack.operator.execution_role))


def test_operator_addon_configuration(default_app: Synthesized) -> None:
    addon = default_app.template["Resources"][by_addon(default_app.template, "amazon-sagemaker-hyperpod-inference")]
    assert addon["Properties"]["AddonVersion"] == "v1.4.0-eksbuild.1"
    assert addon["Properties"]["ResolveConflicts"] == "OVERWRITE"
    config = rendered(addon["Properties"]["ConfigurationValues"], placeholder="TOKEN")
    assert set(config) == {"executionRoleArn", "tlsCertificateS3Bucket", "hyperpodClusterArn",
                           "jumpstartGatedModelDownloadRoleArn", "alb", "keda"}
    hp, _ = hyperpod(default_app)
    assert hp in set(references(addon["Properties"]["ConfigurationValues"]))


def test_core_addons_and_admin_access(default_app: Synthesized, multi_app: Synthesized) -> None:
    for name in ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent"):
        addon = default_app.template["Resources"][by_addon(default_app.template, name)]
        assert addon["Properties"]["ResolveConflicts"] == "OVERWRITE"
    entries = [e["Properties"] for e in by_type(multi_app.template, "AWS::EKS::AccessEntry").values()]
    assert any(e["PrincipalArn"] == "arn:aws:iam::111122223333:role/PlatformAdmin" for e in entries)


def test_cdk_json_feature_flags_are_loaded(default_app: Synthesized) -> None:
    # @aws-cdk/aws-ec2:restrictDefaultSecurityGroup (cdk.json) adds this custom resource; without the
    # flags the test app would not match what `cdk deploy` deploys.
    assert default_app.app.node.try_get_context("@aws-cdk/aws-ec2:restrictDefaultSecurityGroup") is True
    assert default_app.resources("Custom::VpcRestrictDefaultSG")
