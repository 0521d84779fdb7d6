"""What a deployed stack says about itself: its CloudFormation outputs, read into one typed value.

The stack writes the outputs with the key names and JSON fields defined here; ``bench`` and ``verify``
read them back from ``--stack NAME`` (CloudFormation ``DescribeStacks``, through
:func:`hyperpod_dpd.clients.aws.describe_stack`) or ``--outputs-file FILE`` (what
``cdk deploy --outputs-file FILE`` writes, keyed by stack name). So a deployed name is derived once,
in the stack, and every command uses that value instead of re-deriving it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd.errors import Problem, SpecError

# Stack-level output keys (the CfnOutput ids at the stack's root are the keys verbatim).
REGION = "Region"
EKS_CLUSTER = "EksClusterName"
HYPERPOD_CLUSTER = "HyperPodClusterName"
HYPERPOD_CLUSTER_ARN = "HyperPodClusterArn"
MODEL_BUCKET = "ModelBucketName"
AMP_WORKSPACE = "AmpWorkspaceArn"
SYSTEM_NODE_SELECTOR = "SystemNodeSelector"
# One output per endpoint: the key starts with this prefix, the value is the JSON of ``endpoint_output``.
ENDPOINT_PREFIX = "DpdEndpoint"
ENDPOINT_SCHEMA = 1

REQUIRED = (REGION, EKS_CLUSTER, HYPERPOD_CLUSTER, HYPERPOD_CLUSTER_ARN, MODEL_BUCKET)


def endpoint_output_key(name: str) -> str:
    """The output key of endpoint ``name`` (CloudFormation keys are alphanumeric)."""
    return ENDPOINT_PREFIX + "".join(part.capitalize() for part in name.split("-"))


@dataclass(frozen=True, kw_only=True)
class DeployedModel:
    """Where the endpoint reads its weights: ``s3://bucket/prefix/`` in ``region``."""

    bucket: str
    prefix: str
    region: str


@dataclass(frozen=True, kw_only=True)
class DeployedTwin:
    """The aggregated twin of an endpoint (``-c aggregated_baseline=true``)."""

    name: str
    router_service: str
    instance_group: str


@dataclass(frozen=True, kw_only=True)
class DeployedEndpoint:
    """One endpoint as the stack deployed it.

    :param model: ``None`` for FSx, Hugging Face and volume sources.
    :param benchmark_service_account: ``None`` when the stack left out the benchmark (``-c benchmark=false``).
    """

    name: str
    namespace: str
    router_service: str
    router_namespace: str
    instance_groups: Mapping[str, str]
    model: DeployedModel | None = None
    benchmark_service_account: str | None = None
    benchmark_role_arn: str | None = None
    aggregated: DeployedTwin | None = None


@dataclass(frozen=True, kw_only=True)
class DeployedStack:
    """Everything ``bench`` and ``verify`` need to know about a deployed stack."""

    stack_name: str
    region: str
    eks_cluster_name: str
    hyperpod_cluster_name: str
    hyperpod_cluster_arn: str
    model_bucket: str
    endpoints: tuple[DeployedEndpoint, ...]
    amp_workspace_arn: str | None = None
    system_node_selector: Mapping[str, str] | None = None
    source: str = ""

    def endpoint(self, name: str) -> DeployedEndpoint:
        """The endpoint called ``name``; a :class:`SpecError` naming the stack's endpoints otherwise."""
        for endpoint in self.endpoints:
            if endpoint.name == name:
                return endpoint
        known = ", ".join(e.name for e in self.endpoints) or "none"
        raise SpecError([Problem(field="name", value=name, message=f"is not an endpoint of stack "
                                 f"{self.stack_name!r} ({self.source}; it hosts: {known})",
                                 fix="pass the spec file the stack was deployed with, or the right --stack")])


def endpoint_output(*, name: str, namespace: str, router_service: str, router_namespace: str,
                    instance_groups: Mapping[str, str], model: Mapping[str, str] | None,
                    benchmark: Mapping[str, str] | None, aggregated: Mapping[str, str] | None) -> dict[str, Any]:
    """The JSON object the stack writes for one endpoint (values may be CDK tokens)."""
    return {"schema": ENDPOINT_SCHEMA, "name": name, "namespace": namespace, "routerService": router_service,
            "routerNamespace": router_namespace, "instanceGroups": dict(instance_groups),
            "model": dict(model) if model is not None else None,
            "benchmark": dict(benchmark) if benchmark is not None else None,
            "aggregated": dict(aggregated) if aggregated is not None else None}


def output_error(field: str, value: Any, message: str, fix: str) -> SpecError:
    return SpecError([Problem(field=field, value=value, message=message, fix=fix)])


def _endpoint(key: str, text: str, *, where: str) -> DeployedEndpoint:
    try:
        data = json.loads(text)
        if data.get("schema") != ENDPOINT_SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}")
        # CDK's toJsonString leaves out null values: the optional parts may be absent.
        model = data.get("model")
        benchmark = data.get("benchmark") or {}
        twin = data.get("aggregated")
        return DeployedEndpoint(
            name=str(data["name"]), namespace=str(data["namespace"]), router_service=str(data["routerService"]),
            router_namespace=str(data["routerNamespace"]), instance_groups=dict(data["instanceGroups"]),
            model=DeployedModel(bucket=model["bucket"], prefix=model["prefix"], region=model["region"])
            if model else None,
            benchmark_service_account=benchmark.get("serviceAccount"), benchmark_role_arn=benchmark.get("roleArn"),
            aggregated=DeployedTwin(name=twin["name"], router_service=twin["routerService"],
                                    instance_group=twin["instanceGroup"]) if twin else None)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise output_error(where, key, f"holds an endpoint output this version cannot read ({err})",
                   "deploy the stack with this version of hyperpod-dpd") from None


NO_SELECTOR = "none"


def _selector(text: str | None) -> dict[str, str] | None:
    """``k=v,k=v``; :data:`NO_SELECTOR` is no selector, a missing output ``None`` (the command's default)."""
    if text is None:
        return None
    pairs = (item.partition("=") for item in text.split(",") if item.strip() and item.strip() != NO_SELECTOR)
    return {key.strip(): value.strip() for key, _, value in pairs}


def from_outputs(stack_name: str, outputs: Mapping[str, str], *, source: str,
                 option: str = "--outputs-file") -> DeployedStack:
    """A :class:`DeployedStack` from the stack's outputs (key to value).

    :param source: where they came from (a file, ``stack NAME in REGION``). :param option: the option to blame.
    """
    missing = [key for key in REQUIRED if not outputs.get(key)]
    if missing:
        raise output_error(option, stack_name,
                           f"has no output {', '.join(missing)} ({source}): not a hyperpod-dpd stack, "
                   "or one deployed by an older version", "pass the hyperpod-dpd stack (cdk deploy prints its "
                   "name), redeployed with this version")
    endpoints = tuple(_endpoint(key, value, where=option) for key, value in sorted(outputs.items())
                      if key.startswith(ENDPOINT_PREFIX))
    if not endpoints:
        raise output_error(option, stack_name, f"has no endpoint outputs (DpdEndpoint...) ({source})",
                   "redeploy the stack with this version of hyperpod-dpd")
    return DeployedStack(
        stack_name=stack_name, region=outputs[REGION], eks_cluster_name=outputs[EKS_CLUSTER],
        hyperpod_cluster_name=outputs[HYPERPOD_CLUSTER], hyperpod_cluster_arn=outputs[HYPERPOD_CLUSTER_ARN],
        model_bucket=outputs[MODEL_BUCKET], amp_workspace_arn=outputs.get(AMP_WORKSPACE) or None,
        system_node_selector=_selector(outputs.get(SYSTEM_NODE_SELECTOR)), endpoints=endpoints, source=source)


@dataclass(frozen=True, kw_only=True)
class DeployedSource:
    """Where a command reads what the stack deployed: ``--outputs-file`` (read here) or ``--stack`` (read from
    CloudFormation by :func:`hyperpod_dpd.clients.aws.read_stack`), or neither.

    :param outputs_file: the JSON ``cdk deploy --outputs-file FILE`` wrote. :default: - none
    :param stack: the stack's name; with ``outputs_file``, which stack of the file. :default: - none (the only
        stack of ``outputs_file``)
    :param region: the stack's region. :default: - the profile's or AWS_REGION
    :param profile: the AWS named profile that reads it. :default: - the default credential chain
    """

    outputs_file: str | None = None
    stack: str | None = None
    region: str | None = None
    profile: str | None = None


def read_outputs_file(path: str | Path, *, stack: str | None = None) -> DeployedStack:
    """The stack in ``cdk deploy --outputs-file`` JSON (``{stack name: {key: value}}``).

    :param stack: which stack of the file. :default: - the only one in the file
    """
    field = "--outputs-file"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise output_error(field, str(path), f"cannot be read: {err.strerror or err}",
                   "pass the file `cdk deploy --outputs-file FILE` wrote") from None
    except ValueError as err:
        raise output_error(field, str(path), f"is not JSON ({err})",
                   "pass the file `cdk deploy --outputs-file FILE` wrote") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise output_error(field, str(path), "is not {stack name: {output: value}}",
                   "pass the file `cdk deploy --outputs-file FILE` wrote")
    if not data:  # `cdk deploy` that failed, or deployed no stack, leaves `{}` behind
        raise output_error(field, str(path), "holds no stack outputs ({}): the deploy that wrote it did not finish",
                           "pass the file a successful `cdk deploy --outputs-file FILE` wrote")
    if stack is None:
        if len(data) != 1:
            raise output_error("--stack", None,
                               f"is needed: {path} holds {len(data)} stacks ({', '.join(sorted(data))})",
                       "pass --stack NAME")
        (stack,) = data
    if stack not in data:
        raise output_error("--stack", stack, f"is not in {path} (it holds: {', '.join(sorted(data)) or 'nothing'})",
                   "pass one of the stacks in the file")
    return from_outputs(stack, {str(k): str(v) for k, v in data[stack].items()}, source=str(path))


STACK, OPTION, GUESSED = "from the stack", "from the command line", "guessed from the spec"


@dataclass(frozen=True)
class Resolved:
    """One name a command uses, and where it came from (:data:`STACK`, :data:`OPTION` or :data:`GUESSED`)."""

    what: str
    value: str
    origin: str


def resolved(what: str, *, option: str | None, stack: str | None, guess: str) -> Resolved:
    """An explicit option wins, then the stack's output, then the guess from the spec."""
    if option is not None:
        return Resolved(what, option, OPTION)
    if stack is not None:
        return Resolved(what, stack, STACK)
    return Resolved(what, guess, GUESSED)


def render_resolved(values: list[Resolved], *, deployed: DeployedStack | None) -> str:
    """The names, one a line with their origin; a note when some were guessed and how to stop guessing."""
    width = max(len(v.what) for v in values)
    head = f"names used (stack outputs: {deployed.source}):" if deployed is not None else "names used:"
    lines = [head, *(f"  {v.what.ljust(width)}  {v.value}  ({v.origin})" for v in values)]
    if any(v.origin == GUESSED for v in values):
        lines.append("  guessed values assume the spec is what was deployed; pass --stack NAME or --outputs-file "
                     "FILE to use the stack's outputs")
    return "\n".join(lines)


def guessed_note(values: list[Resolved]) -> str | None:
    """One line naming the values guessed from the spec, or ``None`` when nothing was guessed."""
    guessed = [f"{v.what} {v.value}" for v in values if v.origin == GUESSED]
    if not guessed:
        return None
    return (f"note: guessed from the spec: {'; '.join(guessed)}. Pass --stack NAME or --outputs-file FILE "
            "to use what the stack deployed")
