#!/usr/bin/env python3
"""The hyperpod-dpd CDK app: one stack with a HyperPod EKS cluster serving DPD endpoints.

Run it with the CDK CLI (``cdk synth``, ``cdk deploy``) or directly (``python app.py``), which
reads cdk.json's context itself so both write the same cloud assembly. Options are CDK context:

    spec=PATH[,PATH...]        endpoint spec files          (default: the embedded Llama 3.3 70B example)
    region=REGION              stack region                 (default: the first spec's S3 region, else us-west-2)
    availability_zone_id=ID    AZ ID of the GPU capacity    (default: usw2-az2)
    stack_name=NAME            (default: HyperPodDpd)
    model_bucket=NAME          the specs' bucket exists     (default: the stack creates it, retained)
    admin_role_arns=ARN[,ARN]  EKS cluster admins           (default: none)
    dependency_chart=DIR       prepared HyperPod dependency chart (scripts/prepare_hyperpod_chart.sh)
    training_plan_arn=ARN      reserved capacity for every instance group
    hyperpod_cluster_name=NAME (default: <stack_name>-hp)
    eks_cluster=NAME + oidc_issuer_url=URL + oidc_provider_arn=ARN
                               use an existing EKS cluster (with an existing VPC); optional
                               cluster_security_group_id=SG
    vpc_id=ID + eks_subnets=AZ=SUBNET,... + hyperpod_subnets=AZID=SUBNET,...   use an existing VPC
    observability=false        leave out the observability add-on, DPD alerts and log alarms (default: on)
    amp_workspace_arn=ARN      an existing AMP workspace for metrics and alert rules (default: a new one)
    observability_log_group=NAME   log group holding the inference pods' output, shipped by you (default: the
                               stack installs Container Insights' log shipping and watches its application group)
    grafana_workspace_id=g-... import the DPD dashboards into this Amazon Managed Grafana workspace
    benchmark=false            leave out the IAM role and ServiceAccount of `hyperpod-dpd bench` (default: on)
    aggregated_baseline=true   host each endpoint's aggregated twin on one more node (default: off)
    allow_internet_facing_load_balancers=true   lift the deny on internet-facing load balancers (default: denied)
    eks_endpoint_access=private|public|CIDR[,CIDR]  the EKS API endpoint: private only, public from anywhere,
                               or public from these CIDRs (default: public, every call IAM-authenticated)
    network_policies=true      NetworkPolicies around the model pods, enforced by the VPC CNI (default: off)
    eks_creator_admin=false    no cluster-admin entry for the cluster's creator (default: true; decide before
                               the first deploy, a change replaces the cluster)
    kubernetes_version=1.34    a new EKS cluster's Kubernetes version (1.33 or 1.34; default: 1.34)
    eks_support_type=EXTENDED  a new cluster's upgrade policy: EXTENDED or STANDARD (default: EXTENDED)
    inference_addon_version=V  the inference operator add-on version (default: the one whose CRD ships)
    preinstalled_addons=A,B    on an existing cluster, add-ons it runs already; the stack creates none of
                               them (names as 'aws eks list-addons' prints them)
    weights_staging_hours=N    how long a deploy waits for Hugging Face weights to be staged (default: 4)

Every key is checked before anything is built: an unknown key (a typo) or an empty value is an
error, all of them reported together, exit status 2. Nothing is looked up in an AWS account: the
stack synthesizes offline, without credentials.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyperpod_dpd import _node

# Before any aws_cdk import: jsii must start the Node.js that ships with the package. The call is
# idempotent; as a statement it also keeps import sorting from moving aws_cdk above this line.
_node.ensure_node()

import aws_cdk as cdk  # noqa: E402
import yaml  # noqa: E402

from hyperpod_dpd import DpdSpec, Problem, S3Source, SpecError  # noqa: E402
from hyperpod_dpd.contracts.stack_defaults import (  # noqa: E402
    DEFAULT_AVAILABILITY_ZONE_ID,
    DEFAULT_REGION,
    DEFAULT_STACK_NAME,
)
from hyperpod_dpd.spec.defaults import default_spec  # noqa: E402
from hyperpod_dpd.validation import load_checked_spec  # noqa: E402
from hyperpod_dpd_cdk import (  # noqa: E402
    ClusterEndpointAccess,
    ExistingEksCluster,
    ExistingVpc,
    HyperPodDpdStack,
    ObservabilityOptions,
)
from hyperpod_dpd_cdk._private.cdk_cli import CLI_VERSION_ENV, cli_too_old, minimum_cli_version  # noqa: E402
from hyperpod_dpd_cdk.versions import KUBERNETES_VERSION, AddonVersions, SupportType  # noqa: E402
from hyperpod_dpd_cdk.weights_staging import DEFAULT_WAIT  # noqa: E402

HERE = Path(__file__).resolve().parent
MANIFESTS_DIR = "manifests"
OBSERVABILITY_DIR = "observability"


@dataclass(frozen=True)
class ContextKey:
    """One ``-c key=value`` option of the app: its name and the form of its value."""

    name: str
    value: str
    choices: tuple[str, ...] = ()


# Every context key the app reads, one a line (the module docstring says what each does). A key
# that is neither here nor CDK's own is refused with the nearest name, so a typo never falls back
# to a default silently.
CONTEXT_KEYS = (
    ContextKey("spec", "PATH[,PATH...]"),
    ContextKey("region", "REGION"),
    ContextKey("availability_zone_id", "AZ_ID"),
    ContextKey("stack_name", "NAME"),
    ContextKey("model_bucket", "NAME"),
    ContextKey("admin_role_arns", "ARN[,ARN...]"),
    ContextKey("dependency_chart", "DIR"),
    ContextKey("training_plan_arn", "ARN"),
    ContextKey("hyperpod_cluster_name", "NAME"),
    ContextKey("eks_cluster", "NAME"),
    ContextKey("oidc_issuer_url", "URL"),
    ContextKey("oidc_provider_arn", "ARN"),
    ContextKey("cluster_security_group_id", "SG"),
    ContextKey("vpc_id", "VPC_ID"),
    ContextKey("eks_subnets", "AZ=SUBNET[,...]"),
    ContextKey("hyperpod_subnets", "AZ_ID=SUBNET[,...]"),
    ContextKey("observability", "true|false", ("true", "false")),
    ContextKey("amp_workspace_arn", "ARN"),
    ContextKey("observability_log_group", "NAME"),
    ContextKey("grafana_workspace_id", "ID"),
    ContextKey("benchmark", "true|false", ("true", "false")),
    ContextKey("aggregated_baseline", "true|false", ("true", "false")),
    ContextKey("allow_internet_facing_load_balancers", "true|false", ("true", "false")),
    ContextKey("eks_endpoint_access", "private|public|CIDR[,CIDR...]"),
    ContextKey("network_policies", "true|false", ("true", "false")),
    ContextKey("eks_creator_admin", "true|false", ("true", "false")),
    ContextKey("kubernetes_version", "1.33|1.34"),
    ContextKey("eks_support_type", "EXTENDED|STANDARD"),
    ContextKey("inference_addon_version", "VERSION"),
    ContextKey("preinstalled_addons", "ADDON[,ADDON...]"),
    ContextKey("weights_staging_hours", "HOURS"),
)


def is_cdk_context_key(key: str) -> bool:
    """CDK's own keys: feature flags (``@aws-cdk/...``), ``aws:cdk:...`` settings and cached lookups (``a:b=c``)."""
    return key.startswith("@") or ":" in key


def context_problems(context: Mapping[str, Any]) -> list[Problem]:
    """Every problem with the app's context at once: unknown keys (with the nearest known one) and empty values."""
    known = {key.name: key for key in CONTEXT_KEYS}
    problems = []
    for key, value in context.items():
        if is_cdk_context_key(key):
            continue
        if key not in known:
            near = difflib.get_close_matches(key, known, n=1)
            problems.append(Problem(field=key, value=value, message="is not a context key of this app",
                                    fix=f"did you mean -c {near[0]}=...?" if near else
                                    f"use one of: {', '.join(sorted(known))}"))
        elif value is None or (isinstance(value, str) and not value.strip()):
            problems.append(Problem(field=key, value=value, message="is empty (an unset shell variable?); an "
                                    "empty value would silently mean the default",
                                    fix=f"-c {key}={known[key].value}, or leave the key out for the default"))
        elif known[key].choices and str(value).lower() not in known[key].choices:
            problems.append(Problem(field=key, value=value, message=f"is not {' or '.join(known[key].choices)}",
                                    fix=f"-c {key}={known[key].value.split('|')[0]}, or leave the key out"))
    return problems


def cdk_json_context(path: Path = HERE / "cdk.json") -> dict[str, Any]:
    """The ``context`` of cdk.json (feature flags and any defaults you add there)."""
    context: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")).get("context", {})
    return context


def _list(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [part.strip() for part in str(value).split(",") if part.strip()]


def _pairs(value: Any, *, field: str) -> dict[str, str]:
    """``a=1,b=2`` as a mapping; a malformed item is a :class:`SpecError` naming the context key."""
    pairs: dict[str, str] = {}
    for item in _list(value):
        key, sep, val = item.partition("=")
        if not sep or not key or not val:
            raise SpecError([Problem(field=field, value=item, message="is not KEY=VALUE",
                                                  fix=f"-c {field}=KEY=VALUE,KEY=VALUE")])
        pairs[key.strip()] = val.strip()
    return pairs


def _vpc(app: cdk.App) -> tuple[ExistingVpc | None, dict[str, str] | None]:
    ctx = app.node.try_get_context
    if not ctx("vpc_id"):
        return None, None
    eks_subnets = _pairs(ctx("eks_subnets"), field="eks_subnets")
    vpc = ExistingVpc(vpc_id=str(ctx("vpc_id")), availability_zones=tuple(eks_subnets),
                      private_subnet_ids=tuple(eks_subnets.values()))
    return vpc, _pairs(ctx("hyperpod_subnets"), field="hyperpod_subnets")


def _specs(app: cdk.App) -> list[DpdSpec]:
    """The spec files, each checked as ``hyperpod-dpd validate`` checks it; every file's problems together."""
    paths = _list(app.node.try_get_context("spec"))
    if not paths:
        return [default_spec()]
    specs, problems = [], []
    for path in paths:
        try:
            specs.append(load_checked_spec(path).spec)
        except SpecError as error:
            problems += [dataclasses.replace(p, field=f"{path}: {p.field}") for p in error.problems]
    if problems:
        raise SpecError(problems)
    return specs


def _observability(app: cdk.App) -> ObservabilityOptions | bool:
    """``observability=false`` turns it off; the other keys tune it."""
    ctx = app.node.try_get_context
    if not _flag(app, "observability", default=True):
        return False
    return ObservabilityOptions(amp_workspace_arn=ctx("amp_workspace_arn") or None,
                                log_group_name=ctx("observability_log_group") or None,
                                grafana_workspace_id=ctx("grafana_workspace_id") or None)


def fresh_folder(folder: Path) -> Path:
    """An empty ``folder``: files of endpoints no longer in the stack must not linger beside the current ones."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def write_observability_files(stack: HyperPodDpdStack, outdir: Path) -> list[Path]:
    """Each endpoint's alert rules and Grafana dashboard, for your own Prometheus and Grafana."""
    from hyperpod_dpd.observability import write_observability  # noqa: PLC0415 - only when synthesizing
    from hyperpod_dpd.observability.dashboard import MissingExtra  # noqa: PLC0415

    try:
        return write_observability(stack.endpoint_specs, fresh_folder(outdir / OBSERVABILITY_DIR))
    except MissingExtra as error:
        print(f"note: no dashboards written: {error}", file=sys.stderr)
        return []


def _flag(app: cdk.App, key: str, *, default: bool) -> bool:
    """A true/false context key; anything else is a :class:`SpecError` naming it."""
    value = app.node.try_get_context(key)
    text = str(value if value is not None else default).lower()
    if text not in ("true", "false"):
        other = "false" if default else "true"
        raise SpecError([Problem(field=key, value=value, message="is not true or false",
                                 fix=f"-c {key}={other}, or omit it for {str(default).lower()}")])
    return text == "true"


def _support_type(app: cdk.App) -> SupportType:
    value = str(app.node.try_get_context("eks_support_type") or SupportType.EXTENDED.value)
    try:
        return SupportType(value.upper())
    except ValueError:
        raise SpecError([Problem(field="eks_support_type", value=value, message="is not EXTENDED or STANDARD",
                                 fix="-c eks_support_type=STANDARD, or omit it for EXTENDED")]) from None


def _staging_wait(app: cdk.App) -> cdk.Duration:
    value = app.node.try_get_context("weights_staging_hours")
    if value is None or value == "":
        return DEFAULT_WAIT
    try:
        return cdk.Duration.minutes(round(float(value) * 60))
    except ValueError:
        raise SpecError([Problem(field="weights_staging_hours", value=value, message="is not a number of hours",
                                 fix="-c weights_staging_hours=6")]) from None


def _region(app: cdk.App, specs: Sequence[DpdSpec]) -> str:
    region = app.node.try_get_context("region")
    if region:
        return str(region)
    for spec in specs:
        if isinstance(spec.model.source, S3Source) and spec.model.source.region:
            return spec.model.source.region
    return DEFAULT_REGION


def build(context: Mapping[str, Any] | None = None, *, outdir: str | None = None) -> tuple[cdk.App, HyperPodDpdStack]:
    """The app and its one stack; raises :class:`SpecError` for bad input."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    problems = context_problems(app.node.get_all_context())
    if problems:
        raise SpecError(problems, source="-c key=value and cdk.json", what="CDK context")
    ctx = app.node.try_get_context
    specs = _specs(app)
    region = _region(app, specs)
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")  # set by the CLI when credentials exist; never looked up
    existing = None
    if ctx("eks_cluster"):
        existing = ExistingEksCluster(cluster_name=str(ctx("eks_cluster")),
                                      oidc_issuer_url=str(ctx("oidc_issuer_url") or ""),
                                      oidc_provider_arn=ctx("oidc_provider_arn") or None,
                                      cluster_security_group_id=ctx("cluster_security_group_id") or None)
        if not existing.oidc_issuer_url:
            raise SpecError([Problem(
                field="oidc_issuer_url", value=None, message="is required with eks_cluster",
                fix="-c oidc_issuer_url=$(aws eks describe-cluster --name NAME "
                    "--query cluster.identity.oidc.issuer --output text)")])
    vpc, hyperpod_subnets = _vpc(app)
    stack = HyperPodDpdStack(
        app, str(ctx("stack_name") or DEFAULT_STACK_NAME), endpoints=specs, vpc=vpc,
        hyperpod_subnet_ids=hyperpod_subnets,
        env=cdk.Environment(account=account, region=region),
        availability_zone_id=str(ctx("availability_zone_id") or DEFAULT_AVAILABILITY_ZONE_ID),
        model_bucket_name=ctx("model_bucket") or None, existing_cluster=existing,
        admin_role_arns=_list(ctx("admin_role_arns")), dependency_chart_dir=ctx("dependency_chart") or None,
        training_plan_arn=ctx("training_plan_arn") or None, hyperpod_cluster_name=ctx("hyperpod_cluster_name") or None,
        description="SageMaker HyperPod (EKS) with Disaggregated Prefill and Decode endpoints (hyperpod-dpd)",
        observability=_observability(app), benchmark=_flag(app, "benchmark", default=True),
        aggregated_baseline=_flag(app, "aggregated_baseline", default=False),
        allow_internet_facing_load_balancers=_flag(app, "allow_internet_facing_load_balancers", default=False),
        eks_endpoint_access=(ClusterEndpointAccess.parse(str(ctx("eks_endpoint_access")))
                             if ctx("eks_endpoint_access") else None),
        cluster_creator_admin=_flag(app, "eks_creator_admin", default=True),
        network_policies=_flag(app, "network_policies", default=False),
        kubernetes_version=str(ctx("kubernetes_version") or KUBERNETES_VERSION), support_type=_support_type(app),
        preinstalled_addons=_list(ctx("preinstalled_addons")), weights_staging_timeout=_staging_wait(app),
        addon_versions=AddonVersions(**({"inference": str(ctx("inference_addon_version"))}
                                        if ctx("inference_addon_version") else {})))
    return app, stack


def write_manifests(stack: HyperPodDpdStack, outdir: Path) -> list[Path]:
    """Each endpoint's Kubernetes objects as YAML; CloudFormation references stay as ``{Ref: ...}``."""
    folder = fresh_folder(outdir / MANIFESTS_DIR)
    written = []
    for endpoint in stack.endpoints:
        path = folder / f"{endpoint.spec.namespace}-{endpoint.spec.name}.yaml"
        objects = stack.resolve(endpoint.manifests())
        header = ("# Rendered by app.py for reading; `cdk deploy` applies it. {Ref: ...}/{Fn::GetAtt: ...} are\n"
                  "# CloudFormation values (the model bucket name) filled in at deploy time.\n")
        path.write_text(header + yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
        written.append(path)
    for staging in {id(s): s for s in stack.weights_staging.values()}.values():  # huggingface sources
        path = folder / f"{staging.chart.namespace}-{staging.job_name}.yaml"
        path.write_text(yaml.safe_dump_all(stack.resolve(staging.chart.to_json()), sort_keys=False), encoding="utf-8")
        written.append(path)
    for twin in stack.aggregated_twins:  # -c aggregated_baseline=true: the baseline of `hyperpod-dpd bench`
        metadata = twin.document["metadata"]
        path = folder / f"{metadata['namespace']}-{metadata['name']}.yaml"
        path.write_text(yaml.safe_dump_all(stack.resolve([twin.document]), sort_keys=False), encoding="utf-8")
        written.append(path)
    return written


def _direct_context(argv: Sequence[str]) -> dict[str, Any]:
    """cdk.json's context plus ``-c key=value`` arguments, for ``python app.py`` without the CLI."""
    context = cdk_json_context()
    args = list(argv)
    for i, arg in enumerate(args):
        if arg in ("-c", "--context") and i + 1 < len(args) and "=" in args[i + 1]:
            key, value = args[i + 1].split("=", 1)
            context[key] = value
    return context


def main(argv: Sequence[str] = ()) -> int:
    under_cli = "CDK_CONTEXT_JSON" in os.environ or CLI_VERSION_ENV in os.environ
    too_old = cli_too_old(os.environ, minimum_cli_version())
    if too_old:
        print(f"error: {too_old}", file=sys.stderr)
        return 2
    try:
        if under_cli:
            app, stack = build()
        else:
            app, stack = build(_direct_context(argv), outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
        assembly = app.synth()
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    written = write_manifests(stack, Path(assembly.directory))
    observed = write_observability_files(stack, Path(assembly.directory))
    if not under_cli:  # the CLI prints its own summary; warnings are printed by synth() either way
        print(f"cloud assembly: {assembly.directory}", file=sys.stderr)
        for path in written:
            print(f"manifest: {path}", file=sys.stderr)
        for path in observed:
            print(f"observability: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
