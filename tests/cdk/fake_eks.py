"""A shared EKS cluster on disk, the ``aws``/``kubectl``/``helm`` executables that act on it, and a CloudFormation.

The state is one JSON file: Kubernetes objects, Helm releases, EKS add-ons (and their software, which a
self-managed install or an add-on puts on the cluster), and whether the kubectl provider's role has its
access entry. Every call is recorded with its outcome. Run as a script (``fake_eks.py kubectl ...``) it
is the executable aws-cdk-lib's kubectl and helm handlers call; imported, it is the CloudFormation that
creates and deletes a synthesized template's resources in an order its dependencies allow, running the
handlers for the kubectl provider's custom resources.

Where CloudFormation may run things in parallel the order is chosen: adversarial (on create, the custom
resources first among those ready and access entries last; on delete, access entries first and the
custom resources last), so an ordering the template does not state is never saved by luck; or
fortunate (the other way round), to test what else goes wrong when the race is won.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE_ENV = "FAKE_EKS_STATE"
UNAUTHORIZED = "error: You must be logged in to the server (Unauthorized)"
KUBECTL_RESOURCE = "Custom::AWSCDK-EKS-KubernetesResource"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
CUSTOM = (KUBECTL_RESOURCE, HELM_CHART)
ACCESS_ENTRY = "AWS::EKS::AccessEntry"
CERT_MANAGER = "cert-manager"
REGION = "us-west-2"
ACCOUNT = "111122223333"


def empty_state() -> dict[str, Any]:
    return {"objects": {}, "releases": {}, "addons": {}, "software": {}, "authorized": False, "calls": []}


def object_key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    namespace = "" if obj["kind"] == "Namespace" else meta.get("namespace", "default")
    return f"{obj['kind']}/{namespace}/{meta['name']}"


# --- the executables -------------------------------------------------------------------------------


def _objects(path: str) -> Iterator[dict[str, Any]]:
    """The handler writes a manifest as concatenated JSON objects."""
    text, decoder, at = Path(path).read_text(), json.JSONDecoder(), 0
    while at < len(text):
        obj, at = decoder.raw_decode(text, at)
        yield obj


def _kubectl(state: dict[str, Any], args: list[str]) -> tuple[int, str]:
    verb, file = args[0], args[args.index("-f") + 1]
    objects = list(_objects(file))
    found = [object_key(o) for o in objects if object_key(o) in state["objects"]]
    if verb == "create" and found:
        return 1, f'Error from server (AlreadyExists): {found[0]} already exists'
    if verb == "delete":
        missing = [object_key(o) for o in objects if object_key(o) not in state["objects"]]
        for obj in objects:
            _delete_object(state, object_key(obj))
        return (1, f"Error from server (NotFound): {missing[0]} not found") if missing else (0, "deleted")
    for obj in objects:
        key = object_key(obj)
        owner = state["objects"].get(key, {}).get("owner", "ours")
        state["objects"][key] = {"owner": owner, "body": obj}
    return 0, f"{verb}d"


def _delete_object(state: dict[str, Any], key: str) -> None:
    """Deleting a namespace deletes everything in it, Helm's release records too."""
    state["objects"].pop(key, None)
    kind, _, name = key.split("/", 2)
    if kind == "Namespace":
        state["objects"] = {k: v for k, v in state["objects"].items() if k.split("/")[1] != name}
        state["releases"] = {k: v for k, v in state["releases"].items() if k.split("/")[0] != name}


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _helm(state: dict[str, Any], args: list[str]) -> tuple[int, str]:
    verb, release = args[0], args[1]
    key = f"{_option(args, '--namespace') or 'default'}/{release}"
    if verb == "uninstall":
        if state["releases"].pop(key, None) is None:
            return 1, f"Error: uninstall: Release not loaded: {release}: release: not found"
        return 0, f'release "{release}" uninstalled'
    values = _option(args, "--values")
    previous = state["releases"].get(key)
    state["releases"][key] = {
        "owner": previous["owner"] if previous else "ours", "chart": args[2],
        "values": json.loads(Path(values).read_text()) if values else None,
        "revision": previous["revision"] + 1 if previous else 1}
    return 0, f'Release "{release}" has been {"upgraded" if previous else "installed"}.'


def _aws(args: list[str]) -> tuple[int, str]:
    if args[:2] == ["s3", "cp"]:  # the chart asset: any zip the handler can extract
        with zipfile.ZipFile(args[3], "w") as archive:
            archive.writestr("Chart.yaml", "apiVersion: v2\nname: stand-in\nversion: 0.1.0\n")
    return 0, ""


def main(argv: list[str]) -> int:
    tool, args = argv[0], argv[1:]
    path = Path(os.environ[STATE_ENV])
    state = json.loads(path.read_text())
    if tool == "aws":
        code, output = _aws(args)
    elif not state["authorized"]:
        code, output = 1, UNAUTHORIZED
    else:
        code, output = (_kubectl if tool == "kubectl" else _helm)(state, args)
    touched = [object_key(o) for o in _objects(args[args.index("-f") + 1])] if tool == "kubectl" else []
    state["calls"].append({"tool": tool, "args": [a for a in args if not a.startswith("/")], "objects": touched,
                           "code": code, "output": output})
    path.write_text(json.dumps(state))
    print(output)
    return code


# --- CloudFormation ----------------------------------------------------------------------------------


def references(value: object) -> Iterator[str]:
    """The logical ids ``value`` refers to (Ref, Fn::GetAtt, Fn::Sub)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner
            elif key == "Fn::GetAtt":
                yield inner[0] if isinstance(inner, list) else inner.split(".")[0]
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                for part in text.split("${")[1:]:
                    yield part.split("}")[0].split(".")[0]
                yield from references(inner)
            else:
                yield from references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from references(inner)


PSEUDO = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com",
          "AWS::StackName": "Stack", "AWS::StackId": "stack-id"}


def resolve(value: Any, template: Mapping[str, Any]) -> Any:
    """Intrinsic functions as a deploy would give them, with placeholder names for what CloudFormation makes."""
    if isinstance(value, list):
        return [resolve(v, template) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            if arg in PSEUDO:
                return PSEUDO[arg]
            parameter = template.get("Parameters", {}).get(arg)
            return parameter.get("Default", arg) if parameter is not None else f"{arg.lower()}-id"
        if key == "Fn::GetAtt":
            name, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return f"{name.lower()}-{attribute.lower()}"
        if key == "Fn::Join":
            return resolve(arg[0], template).join(str(resolve(p, template)) for p in resolve(arg[1], template))
        if key == "Fn::Select":
            return resolve(arg[1], template)[int(resolve(arg[0], template))]
        if key == "Fn::Split":
            return str(resolve(arg[1], template)).split(arg[0])
        if key == "Fn::GetAZs":
            return [f"{REGION}a", f"{REGION}b"]
        if key == "Fn::If":
            return resolve(arg[1], template)
        if key == "Fn::Sub":
            text = arg[0] if isinstance(arg, list) else arg
            for name in set(references({"Fn::Sub": text})) | set(PSEUDO):
                text = text.replace("${" + name + "}", str(resolve({"Ref": name}, template)))
            return text
    return {k: resolve(v, template) for k, v in value.items()}


def as_strings(value: Any) -> Any:
    """CloudFormation hands a custom resource every scalar property as a string (``true``, ``600``)."""
    if isinstance(value, dict):
        return {k: as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_strings(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


@dataclass
class Deployment:
    """One stack's life on the fake cluster: what was created, what failed, in which order."""

    template: Mapping[str, Any]
    cluster: FakeCluster
    adversarial: bool = True
    created: list[str] = field(default_factory=list)
    failure: str | None = None
    log: list[tuple[str, str]] = field(default_factory=list)
    _dependencies: dict[str, set[str]] = field(default_factory=dict)

    def _rank(self, kind: str, logical_id: str, *, creating: bool) -> tuple[bool, bool, str]:
        """Adversarial: kubectl/helm before the access entry on create, after it on delete; fortunate: the
        other way round (what a lucky deploy would see)."""
        if creating == self.adversarial:  # the entry as late as possible, kubectl and helm as early
            return (kind not in CUSTOM, kind == ACCESS_ENTRY, logical_id)
        return (kind != ACCESS_ENTRY, kind in CUSTOM, logical_id)

    def dependencies(self, logical_id: str) -> set[str]:
        if logical_id not in self._dependencies:
            self._dependencies[logical_id] = self._find_dependencies(logical_id)
        return self._dependencies[logical_id]

    def _find_dependencies(self, logical_id: str) -> set[str]:
        resources = self.template["Resources"]
        resource = resources[logical_id]
        depends = resource.get("DependsOn", [])
        found = {depends} if isinstance(depends, str) else set(depends)
        found |= set(references(resource.get("Properties", {})))
        return {d for d in found if d in resources and d != logical_id}

    def create(self) -> bool:
        """Create every resource; on a failure, roll back what was created (as CloudFormation does)."""
        resources = self.template["Resources"]
        done: set[str] = set()
        while len(done) < len(resources):
            ready = [r for r in resources if r not in done and self.dependencies(r) <= done]
            ready.sort(key=lambda r: self._rank(resources[r]["Type"], r, creating=True))
            current = ready[0]
            try:
                self.cluster.apply(self.template, current, "Create")
            except Exception as error:  # a failed create rolls the stack back
                self.failure = f"{current}: {error}"
                self.log.append(("CreateFailed", current))
                self.delete()
                return False
            self.log.append(("Create", current))
            self.created.append(current)
            done.add(current)
        return True

    def delete(self) -> None:
        """Delete what was created, each resource only after everything that depends on it."""
        remaining = list(self.created)
        while remaining:
            ready = [r for r in remaining if not any(r in self.dependencies(o) for o in remaining if o != r)]
            ready.sort(key=lambda r: self._rank(self.template["Resources"][r]["Type"], r, creating=False))
            current = ready[0]
            self.cluster.apply(self.template, current, "Delete")
            self.log.append(("Delete", current))
            remaining.remove(current)
        self.created = []


class FakeCluster:
    """The cluster's state file and the EKS API; runs aws-cdk-lib's handlers against the fake executables."""

    def __init__(self, state_file: Path, handlers: Mapping[str, Callable[[dict[str, Any], object], object]],
                 state: dict[str, Any]) -> None:
        self.state_file = state_file
        self.handlers = handlers
        self.initial = copy.deepcopy(state)
        state_file.write_text(json.dumps(state))

    @property
    def state(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.state_file.read_text())
        return loaded

    def _write(self, state: dict[str, Any]) -> None:
        self.state_file.write_text(json.dumps(state))

    def apply(self, template: Mapping[str, Any], logical_id: str, request: str) -> None:
        resource = template["Resources"][logical_id]
        kind = resource["Type"]
        if kind not in (*CUSTOM, ACCESS_ENTRY, "AWS::EKS::Addon"):
            return  # nothing on the cluster
        properties = resolve(resource.get("Properties", {}), template)
        if kind in CUSTOM:
            self.handlers[kind]({"RequestType": request, "ResourceType": kind, "LogicalResourceId": logical_id,
                                 "ResourceProperties": as_strings(properties)}, None)
        elif kind == ACCESS_ENTRY and "kubectlprovider" in str(properties["PrincipalArn"]).lower():
            state = self.state
            state["authorized"] = request == "Create"
            self._write(state)
        elif kind == "AWS::EKS::Addon":
            self._addon(properties, request)

    def _addon(self, properties: Mapping[str, Any], request: str) -> None:
        """EKS ``CreateAddon``/``DeleteAddon``: a self-managed copy is overwritten only on ``OVERWRITE``; the
        software goes on delete unless ``PreserveOnDelete`` (with cert-manager, its CRDs' objects)."""
        state, name = self.state, properties["AddonName"]
        if request == "Create":
            if name in state["addons"]:
                raise RuntimeError(f"ResourceInUseException: add-on {name} already exists")
            if name in state["software"] and properties.get("ResolveConflicts") != "OVERWRITE":
                raise RuntimeError(f"ConflictException: {name} is installed already (resolveConflicts NONE)")
            state["addons"][name] = {"preserve": bool(properties.get("PreserveOnDelete"))}
            state["software"][name] = {"owner": "add-on", "by": "eks"}
        else:
            addon = state["addons"].pop(name)
            if not addon["preserve"]:
                state["software"].pop(name, None)
                if name == CERT_MANAGER:
                    state["objects"] = {k: v for k, v in state["objects"].items()
                                        if not k.startswith("Certificate/")}
        self._write(state)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
