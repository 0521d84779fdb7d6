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
