"""Template queries shared by the CDK tests: references, transitive dependencies, CfnJson values."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

Template = dict[str, Any]


def references(value: Any) -> Iterator[str]:
    """Logical ids a property value points at (``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` of ``${X}``)."""
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str) and not value["Ref"].startswith("AWS::"):
            yield value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            yield target[0] if isinstance(target, list) else str(target).split(".")[0]
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def direct_dependencies(template: Template, logical_id: str) -> set[str]:
    resource = template["Resources"][logical_id]
    depends = resource.get("DependsOn", [])
    depends = [depends] if isinstance(depends, str) else depends
    found = set(depends) | set(references(resource.get("Properties", {})))
    return {d for d in found if d in template["Resources"]}


def depends_on(template: Template, source: str, target: str) -> bool:
    """Whether CloudFormation creates ``target`` before ``source`` (DependsOn or references, transitively)."""
    seen: set[str] = set()
    todo = [source]
    while todo:
        current = todo.pop()
        for dependency in direct_dependencies(template, current):
            if dependency == target:
                return True
            if dependency not in seen:
                seen.add(dependency)
                todo.append(dependency)
    return False


def by_type(template: Template, type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def rendered(value: Any, placeholder: str = "ISSUER") -> Any:
    """A ``Fn::Join`` of JSON text (as ``CfnJson`` and manifests produce) parsed, tokens replaced."""
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        text = separator.join(p if isinstance(p, str) else placeholder for p in parts)
        return json.loads(text)
    if isinstance(value, str):
        return json.loads(value)
    raise AssertionError(f"not JSON text: {value!r}")


def cfn_json_value(template: Template, condition: Any) -> dict[str, Any]:
    """The mapping behind ``{"Fn::GetAtt": [<CfnJson>, "Value"]}``."""
    logical_id = condition["Fn::GetAtt"][0]
    resource = template["Resources"][logical_id]
    assert resource["Type"] == "Custom::AWSCDKCfnJson"
    value: dict[str, Any] = rendered(resource["Properties"]["Value"])
    return value


def by_addon(template: Template, name: str) -> str:
    matches = [k for k, v in by_type(template, "AWS::EKS::Addon").items() if v["Properties"]["AddonName"] == name]
    assert len(matches) == 1, f"add-on {name}: {matches}"
    return matches[0]


def stand_in(template: Template, value: Any) -> Any:
    """``value`` as CloudFormation would resolve it at deploy time, with stand-ins for what only a deploy knows.

    ``Ref`` of a named bucket is its name (as CloudFormation returns it); other ``Ref``s and
    ``Fn::GetAtt``s become readable stand-ins (an ARN for IAM roles) that name the logical id.
    """
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, list):
        return [stand_in(template, v) for v in value]
    if "Ref" in value:
        target = value["Ref"]
        if target.startswith("AWS::"):
            return {"AWS::Region": "us-west-2", "AWS::AccountId": "111122223333", "AWS::Partition": "aws",
                    "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "stand-in-stack"}[target]
        properties = template["Resources"][target].get("Properties", {})
        return properties.get("BucketName") or f"{target}-stand-in"
    if "Fn::GetAtt" in value:
        target, attribute = value["Fn::GetAtt"]
        if template["Resources"][target]["Type"] == "AWS::IAM::Role" and attribute == "Arn":
            return f"arn:aws:iam::111122223333:role/{target}"
        return f"arn:aws:stand-in:us-west-2:111122223333:{target}/{attribute}"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(stand_in(template, p)) for p in parts)
    raise AssertionError(f"no stand-in for {value!r}")


def outputs_file(template: Template, stack_name: str) -> dict[str, dict[str, str]]:
    """What ``cdk deploy --outputs-file`` would write for this template: ``{stack: {output key: value}}``."""
    return {stack_name: {key: str(stand_in(template, output["Value"]))
                         for key, output in template.get("Outputs", {}).items()}}
