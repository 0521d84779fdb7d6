"""What the CDK tests share besides fixtures: the synthesized-app record, inputs and constants.

Tests import it as ``cdk.cdk_support`` (pyproject's ``pythonpath`` puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
from aws_cdk import assertions
from aws_cdk import aws_iam as iam
from constructs import IConstruct

from hyperpod_dpd import DpdSpec, HuggingFaceSource
from hyperpod_dpd.spec import AutoscalingSpec, CloudWatchTrigger
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ClusterEndpointAccess, ExistingVpc, HyperPodDpdStack

REPO = Path(__file__).resolve().parents[2]
REGION = "us-west-2"
EXISTING_VPC = ExistingVpc(
    vpc_id="vpc-0123456789abcdef0", availability_zones=("us-west-2a", "us-west-2b"),
    private_subnet_ids=("subnet-0aaa0000000000001", "subnet-0bbb0000000000002"),
    private_subnet_route_table_ids=("rtb-0aaa0000000000001", "rtb-0bbb0000000000002"))
EXISTING_OIDC_PROVIDER = ("arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/"
                          "EXAMPLED539D4633E53DE1B7")
ADMIN_NETWORK_ACCESS = ClusterEndpointAccess.public_from("203.0.113.0/24")
HYPERPOD_SUBNETS = {"usw2-az2": "subnet-0ccc0000000000003", "usw2-az1": "subnet-0ddd0000000000004"}


def load_app_module() -> ModuleType:
    """The app's module (``app.py`` at the repository root only launches it)."""
    return importlib.import_module("hyperpod_dpd_cdk.app")


@dataclass
class Synthesized:
    app: cdk.App
    stack: HyperPodDpdStack
    template: dict[str, Any]
    assertions: assertions.Template

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    def one(self, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(type_)
        assert len(found) == 1, f"expected one {type_}, found {sorted(found)}"
        return next(iter(found.items()))


def logical_id(construct: IConstruct) -> str:
    """The logical id of an L1, or of an L2's default child."""
    element = construct if isinstance(construct, cdk.CfnElement) else construct.node.default_child
    assert isinstance(element, cdk.CfnElement)
    return cdk.Stack.of(element).get_logical_id(element)


def trust_policy(s: Synthesized, role: iam.IRole) -> Any:
    return s.template["Resources"][logical_id(role)]["Properties"]["AssumeRolePolicyDocument"]


def policy_statements(s: Synthesized, role: iam.IRole) -> list[dict[str, Any]]:
    """Every statement of the role's inline policies (the ``DefaultPolicy`` CDK writes)."""
    role_id = logical_id(role)
    return [statement for policy in s.resources("AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]]


def synthesize(app: cdk.App, stack: HyperPodDpdStack) -> Synthesized:
    assembly = app.synth()
    template = assembly.get_stack_artifact(stack.artifact_id).template
    return Synthesized(app=app, stack=stack, template=template,
                       assertions=assertions.Template.from_json(template))


HF_REVISION = "6f6073b423013f6a7d4d9f39144961bfbfbc386b"
WEIGHTS_KEY_ARN = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
HF_SECRET_ARN = "arn:aws:secretsmanager:us-west-2:111122223333:secret:hf-read-token-AbCdEf"
HF_TOKEN_SENTINEL = "hf_THIS_TOKEN_MUST_NEVER_APPEAR"


def hf_source(spec: DpdSpec, model_id: str, **source: Any) -> DpdSpec:
    """``spec`` serving ``model_id`` from the Hugging Face Hub (the stack stages it)."""
    return dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=HuggingFaceSource(
        model_id=model_id, **source)))


def with_bucket(spec: DpdSpec, bucket: str) -> DpdSpec:
    """``spec`` reading its weights from ``bucket`` (same prefix)."""
    return dataclasses.replace(spec, model=dataclasses.replace(
        spec.model, source=dataclasses.replace(spec.model.source, bucket=bucket)))


def second_spec() -> DpdSpec:
    """A second endpoint: own namespace, an autoscaled prefill role, weights under another prefix."""
    base = default_spec()
    return dataclasses.replace(
        base, name="qwen-dpd", namespace="inference", endpoint_name="qwen-dpd",
        prefill=dataclasses.replace(base.prefill, replicas=1, autoscaling=AutoscalingSpec(
            min_replicas=1, max_replicas=3, triggers=(CloudWatchTrigger(
                name="requests", namespace="AWS/ApplicationELB", metric_name="RequestCount",
                target_value=100.0),))),
        model=dataclasses.replace(base.model, source=dataclasses.replace(
            base.model.source, bucket="my-weights", prefix="other/Llama-3.3-70B-Instruct")))


def is_cdk_lambda_role_dependency(template: dict, match: object) -> bool:
    """W3005 that aws-cdk-lib itself emits and we verified is harmless.

    aws-cdk-lib's ``Function`` (and ``CustomResourceProvider``, and the provider framework's waiter state
    machine) adds ``DependsOn: [<its role>, <its
    role's DefaultPolicy>]`` so the policy exists before the first invocation; the role half
    duplicates the ``Fn::GetAtt`` in ``Properties.Role``. ``aws_eks_v2.Cluster`` likewise lists the
    subnets it also references. CloudFormation treats the duplicate as a no-op; the constructs are
    aws-cdk-lib's, so the warning is accepted for exactly these two shapes and nothing else.
    """
    if match.rule.id != "W3005":  # type: ignore[attr-defined]
        return False
    path = list(match.path)  # type: ignore[attr-defined]
    resource = template["Resources"].get(str(path[1])) if len(path) > 1 else None
    if resource is None:
        return False
    message = match.message  # type: ignore[attr-defined]
    if resource["Type"] == "AWS::Lambda::Function" and "/Properties/Role'" in message:
        return True
    if resource["Type"] == "AWS::StepFunctions::StateMachine" and "/Properties/RoleArn'" in message:
        return True  # the provider framework's waiter state machine, built the same way
    return resource["Type"] == "AWS::EKS::Cluster" and "/Properties/ResourcesVpcConfig/SubnetIds/" in message
