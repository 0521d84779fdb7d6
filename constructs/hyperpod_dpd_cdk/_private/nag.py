"""cdk-nag v3 acknowledgments, one finding at a time, on the narrowest construct.

cdk-nag names a finding of the IAM4/IAM5 rules ``AwsSolutions-IAM5[Resource::<Logical.Arn>/prefix/*]``
and matches acknowledgments exactly, on the resource or an ancestor; these helpers spell those ids
so an acknowledgment covers exactly the finding it explains and nothing added later.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from aws_cdk import Acknowledgment, CfnElement, Stack, Token, Validations
from aws_cdk import aws_iam as iam
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, findings: Iterable[str] | None = None) -> None:
    """Acknowledge each listed finding of ``rule`` on ``scope``; the whole rule only when ``findings`` is None
    (rules without findings, such as S1 or L1). An empty list acknowledges nothing."""
    validations = Validations.of(scope)
    if findings is None:
        validations.acknowledge(Acknowledgment(id=f"{PACK}-{rule}", reason=reason))
        return
    for finding in findings:
        validations.acknowledge(Acknowledgment(id=f"{PACK}-{rule}[{finding}]", reason=reason))


def managed_policy(name: str) -> str:
    """The IAM4 finding of an AWS managed policy (``service-role/...`` names included)."""
    return f"Policy::arn:<AWS::Partition>:iam::aws:policy/{name}"


def arn_of(construct: IConstruct) -> str:
    """``<LogicalId.Arn>``, as cdk-nag prints a ``Fn::GetAtt`` of an L2's resource."""
    element = construct if isinstance(construct, CfnElement) else construct.node.default_child
    assert isinstance(element, CfnElement)
    return f"<{Stack.of(element).get_logical_id(element)}.Arn>"


def logical_id(construct: IConstruct) -> str:
    assert isinstance(construct, CfnElement)
    return Stack.of(construct).get_logical_id(construct)


def role_of(construct: IConstruct) -> iam.Role:
    role = construct.node.try_find_child("ServiceRole")
    assert isinstance(role, iam.Role)
    return role


def pseudo(stack: Stack, attribute: str) -> str:
    """A stack's region or partition as cdk-nag prints it: the literal when known, else ``<AWS::X>``."""
    value: str = getattr(stack, attribute)
    return f"<AWS::{attribute.capitalize()}>" if Token.is_unresolved(value) else value


def rendered(value: object) -> str:
    """A resolved CloudFormation value as cdk-nag prints it in a finding id: ``<Logical>`` for a Ref,
    ``<Logical.Attr>`` for a GetAtt, joins flattened, any other intrinsic as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            return f"<{arg}>"
        if key == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if key == "Fn::Join":
            return str(arg[0]).join(rendered(part) for part in arg[1])
    return json.dumps(value, separators=(",", ":"))


def policy_wildcard_findings(policy: IConstruct) -> list[str]:
    """The IAM5 finding ids of every resource with a ``*`` in an ``iam.Policy`` (or a role's DefaultPolicy)."""
    assert isinstance(policy, iam.Policy)
    document = Stack.of(policy).resolve(policy.document.to_json())
    findings: list[str] = []
    for statement in document["Statement"]:
        resources = statement.get("Resource", [])
        for resource in resources if isinstance(resources, list) else [resources]:
            text = rendered(resource)
            if "*" in text and f"Resource::{text}" not in findings:
                findings.append(f"Resource::{text}")
    return findings
