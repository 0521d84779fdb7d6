"""The hyperpod-dpd CDK app: its context keys, how they become one ``HyperPodDpdStack``, and ``main``.

The repository's ``app.py`` launches :func:`main`; its usage text is :func:`context_usage`. Every key is
checked before anything is built: an unknown key (a typo) or an empty value is an error, all of them
reported together. Nothing is looked up in an AWS account: the stack synthesizes offline.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import yaml

from hyperpod_dpd import DpdSpec, Problem, S3Source, SpecError
from hyperpod_dpd.contracts.aws_names import REGION_NAME
from hyperpod_dpd.contracts.stack_defaults import (
    DEFAULT_AVAILABILITY_ZONE_ID,
    DEFAULT_REGION,
    DEFAULT_STACK_NAME,
)
from hyperpod_dpd.errors import EXIT_INTERNAL, internal_error_line
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.loading import DASH
from hyperpod_dpd.validation import load_checked_spec
from hyperpod_dpd.validation.run import CheckedSpec
from hyperpod_dpd_cdk._private.cdk_cli import CLI_VERSION_ENV, cli_too_old, minimum_cli_version
from hyperpod_dpd_cdk.eks_cluster import ExistingEksCluster
from hyperpod_dpd_cdk.exposure import ClusterEndpointAccess
from hyperpod_dpd_cdk.network import ExistingVpc
from hyperpod_dpd_cdk.observability import ObservabilityOptions
from hyperpod_dpd_cdk.stack import HyperPodDpdStack
from hyperpod_dpd_cdk.versions import KUBERNETES_VERSION, AddonVersions, SupportType
from hyperpod_dpd_cdk.weights_staging import DEFAULT_WAIT, MAX_WAIT

MANIFESTS_DIR = "manifests"
OBSERVABILITY_DIR = "observability"
# CloudFormation's CreateStack StackName: "must start with an alphabetic character and can't be longer than 128
# characters", letters, digits and hyphens; aws-cdk-lib's Stack checks the same pattern (core/lib/stack.ts,
# validateStackName) and raises through jsii.
STACK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
STACK_NAME_MAX = 128


@dataclass(frozen=True)
class ContextKey:
    """One ``-c key=value`` option of the app: its name, the form of its value, its default and what it does."""

    name: str
    value: str
    default: str
    help: str
    choices: tuple[str, ...] = ()


FLAG = ("true", "false")

# Every context key the app reads, one a line: the app's usage text (root app.py) and the table in
# docs/stack.md are made from it. A key that is neither here nor CDK's own is refused with the nearest
# name, so a typo never falls back to a default silently.
CONTEXT_KEYS = (
    ContextKey("spec", "PATH[,PATH...]", "the embedded Llama 3.3 70B example",
               "endpoint spec files, comma-separated (one cluster, several endpoints)"),
    ContextKey("region", "REGION", "the first spec's S3 region, else `us-west-2`",
               "the stack's region; the account is never looked up"),
    ContextKey("availability_zone_id", "AZ_ID", "`usw2-az2`", "the AZ ID of your GPU capacity"),
    ContextKey("stack_name", "NAME", "`HyperPodDpd`", "the stack's name"),
    ContextKey("model_bucket", "NAME", "the stack creates the bucket the specs name (retained)",
               "that bucket exists already: use it (it must be the specs' bucket)"),
    ContextKey("admin_role_arns", "ARN[,ARN...]", "none", "EKS cluster admins"),
    ContextKey("dependency_chart", "DIR", "device plugins only",
               "the prepared HyperPod dependency chart (`scripts/prepare_hyperpod_chart.sh`)"),
    ContextKey("training_plan_arn", "ARN", "on-demand capacity", "reserved capacity for every instance group"),
    ContextKey("hyperpod_cluster_name", "NAME", "`<stack_name>-hp`", "the HyperPod cluster's name"),
    ContextKey("eks_cluster", "NAME", "a new cluster",
               "an existing EKS cluster, in an existing VPC (`vpc_id`); needs `oidc_issuer_url` and "
               "`oidc_provider_arn`"),
    ContextKey("oidc_issuer_url", "URL", "none", "with `eks_cluster`: its OIDC issuer"),
    ContextKey("oidc_provider_arn", "ARN", "none",
               "with `eks_cluster`: its IAM OIDC provider (required: IAM holds one provider per issuer)"),
    ContextKey("cluster_security_group_id", "SG", "none",
               "with `eks_cluster`: its cluster security group (the kubectl provider then runs in the VPC)"),
    ContextKey("existing_namespaces", "NAMESPACE[,NAMESPACE...]", "none",
               "with `eks_cluster`: the specs' namespaces that exist already; used as they are, never created or "
               "deleted (any other is created, and a deploy fails on one that exists)"),
    ContextKey("vpc_id", "VPC_ID", "a new VPC", "an existing VPC, with `eks_subnets` and `hyperpod_subnets`"),
    ContextKey("eks_subnets", "AZ=SUBNET[,...]", "none", "with `vpc_id`: the EKS subnets, by AZ name"),
    ContextKey("hyperpod_subnets", "AZ_ID=SUBNET[,...]", "none", "with `vpc_id`: the HyperPod subnets, by AZ ID"),
    ContextKey("observability", "true|false", "`true`", "`false` leaves out the observability add-on, AMP "
               "workspace, DPD alerts, log alarms and alert topic", FLAG),
    ContextKey("amp_workspace_arn", "ARN", "a new workspace",
               "an existing AMP workspace for metrics and alert rules (its Alertmanager routing stays yours)"),
    ContextKey("observability_log_group", "NAME",
               "Container Insights' application group (the stack ships the pods' output there)",
               "the log group holding the inference pods' output, when you ship it yourself"),
    ContextKey("grafana_workspace_id", "ID", "none",
               "an Amazon Managed Grafana workspace (`g-...`) to import the DPD dashboards into"),
    ContextKey("benchmark", "true|false", "`true`",
               "`false` leaves out the IAM role and ServiceAccount of `hyperpod-dpd bench`", FLAG),
    ContextKey("aggregated_baseline", "true|false", "`false`", "`true` hosts each endpoint's aggregated twin "
               "(`<name>-agg`) on one more one-node instance group, for `bench --aggregated`", FLAG),
    ContextKey("allow_internet_facing_load_balancers", "true|false", "`false`",
               "`true` lifts the deny on internet-facing load balancers from the ALB controller's and a new "
               "cluster's roles (a warning follows; see docs/security.md)", FLAG),
    ContextKey("eks_endpoint_access", "private|public|CIDR[,CIDR...]", "public and private",
               "the EKS API endpoint: `private` only, `public` from anywhere, or public from these CIDRs only "
               "(every call is IAM-authenticated)"),
    ContextKey("network_policies", "true|false", "`false`", "`true` applies NetworkPolicies around the model "
               "pods and turns on the VPC CNI's enforcement (unverified on HyperPod nodes)", FLAG),
    ContextKey("eks_creator_admin", "true|false", "`true`", "`false` gives the cluster's creator no "
               "cluster-admin entry (decide before the first deploy: a change replaces the cluster)", FLAG),
    ContextKey("kubernetes_version", "1.33|1.34", "`1.34`", "a new EKS cluster's Kubernetes version"),
    ContextKey("eks_support_type", "EXTENDED|STANDARD", "`EXTENDED`",
               "a new cluster's upgrade policy (see docs/zero-to-endpoint.md for the cost)"),
    ContextKey("inference_addon_version", "VERSION", "the version whose CRD ships in the package",
               "another inference operator add-on version (a warning says the checks know only the shipped CRD)"),
    ContextKey("preinstalled_addons", "ADDON[,ADDON...]", "none",
               "on an existing cluster, prerequisite add-ons it runs already, as EKS add-ons or installed otherwise "
               "(a Helm cert-manager), named as `aws eks list-addons` prints them; the stack creates none of them "
               "(an undeclared self-managed copy fails the deploy; none is adopted)"),
    ContextKey("bundled_load_balancer_controller", "true|false", "`true`",
               "`false` on an existing cluster that runs its own AWS Load Balancer Controller: the inference "
               "add-on then installs none (and the stack creates no role for one)", FLAG),
    ContextKey("bundled_keda", "true|false", "`true`",
               "`false` on an existing cluster that runs its own KEDA: the inference add-on then installs none",
               FLAG),
    ContextKey("weights_staging_hours", "HOURS", "`4`",
               "how long a deploy waits for a `huggingface` source to be staged into the model bucket"),
    ContextKey("engine_check", "true|false", "`false`", "`true` also runs each spec's roles through vLLM's own "
               "start-up checks, as `hyperpod-dpd validate --engine` does (needs `make engine`)", FLAG),
)


def context_usage() -> str:
    """The keys as the app's usage text: ``key=VALUE`` and, indented below, what it does and its default."""
    lines = []
    for key in CONTEXT_KEYS:
        lines += [f"    {key.name}={key.value}",
                  *textwrap.wrap(f"{key.help}; default: {key.default}".replace("`", ""), width=100,
                                 initial_indent=" " * 8, subsequent_indent=" " * 8)]
    return "\n".join(lines)


def context_table() -> str:
    """The keys as docs/stack.md's table (a ``|`` inside a cell is escaped, as Markdown tables need)."""
    def row(*cells: str) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return "\n".join([row("Key", "Value", "Default", "Meaning"), "| --- | --- | --- | --- |",
                      *(row(f"`{key.name}`", f"`{key.value}`", key.default, key.help) for key in CONTEXT_KEYS)])


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


def cdk_json_context(path: Path) -> dict[str, Any]:
    """The ``context`` of cdk.json (feature flags and any defaults you add there)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SpecError([Problem(field=str(path), value=None, message=f"cannot be read as JSON: {err}",
                                 fix="restore cdk.json from the repository, or correct the JSON")]) from None
    context = data.get("context", {}) if isinstance(data, dict) else None
    if not isinstance(context, dict):
        raise SpecError([Problem(field=f"{path}: context", value=context, message="is not a JSON object",
                                 fix='write "context": {"key": "value", ...}')])
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


def _vpc(context: Mapping[str, Any]) -> tuple[ExistingVpc | None, dict[str, str] | None]:
    ctx = context.get
    if not ctx("vpc_id"):
        return None, None
    eks_subnets = _pairs(ctx("eks_subnets"), field="eks_subnets")
    vpc = ExistingVpc(vpc_id=str(ctx("vpc_id")), availability_zones=tuple(eks_subnets),
                      private_subnet_ids=tuple(eks_subnets.values()))
    return vpc, _pairs(ctx("hyperpod_subnets"), field="hyperpod_subnets")


def _specs(context: Mapping[str, Any]) -> list[DpdSpec]:
    """The spec files, each checked as ``hyperpod-dpd validate`` checks it; every file's problems together."""
    paths = _list(context.get("spec"))
    if not paths:
        return [default_spec()]
    if DASH in paths:  # the CDK CLI starts the app with no standard input: "-" would read an empty spec
        raise SpecError([Problem(field="spec", value=DASH, message="reads standard input, which the CDK CLI does "
                                 "not pass to the app", fix="write the spec to a file and pass -c spec=FILE; "
                                 "'hyperpod-dpd synth -' reads standard input")], source="-c spec", what="CDK context")
    specs, problems = [], []
    engine = _flag(context, "engine_check", default=False)
    for path in paths:
        try:  # SLO autoscaling's capacities are computed and pinned by the construct (HyperPodDpd)
            checked = load_checked_spec(path)
            specs.append(checked.spec)
            found = _engine_problems(checked, path) if engine else []
        except SpecError as error:
            found = list(error.problems)
        problems += [dataclasses.replace(p, field=f"{path}: {p.field}") for p in found]
    if problems:
        raise SpecError(problems)
    return specs


def _engine_problems(checked: CheckedSpec, path: str) -> list[Problem]:
    """vLLM's own refusals of the spec's roles (``-c engine_check=true``); no engine venv is a problem too."""
    from hyperpod_dpd.oracle import EngineUnavailable, config_json_of, engine_verdicts  # noqa: PLC0415 - 10 s+
    from hyperpod_dpd.spec.loading import load_spec_data  # noqa: PLC0415

    try:
        verdicts = engine_verdicts(checked.spec, checked.architecture, config_json_of(load_spec_data(path), path))
    except EngineUnavailable as err:
        return [Problem(field="engine_check", value="true", message="cannot run vLLM's own checks",
                        fix=str(err))]
    return [found for verdict in verdicts if (found := verdict.problem()) is not None]


def _observability(context: Mapping[str, Any]) -> ObservabilityOptions | bool:
    """``observability=false`` turns it off; the other keys tune it."""
    ctx = context.get
    if not _flag(context, "observability", default=True):
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


def _flag(context: Mapping[str, Any], key: str, *, default: bool) -> bool:
    """A true/false context key; anything else is a :class:`SpecError` naming it."""
    value = context.get(key)
    text = str(value if value is not None else default).lower()
    if text not in ("true", "false"):
        other = "false" if default else "true"
        raise SpecError([Problem(field=key, value=value, message="is not true or false",
                                 fix=f"-c {key}={other}, or omit it for {str(default).lower()}")])
    return text == "true"


def _support_type(context: Mapping[str, Any]) -> SupportType:
    value = str(context.get("eks_support_type") or SupportType.EXTENDED.value)
    try:
        return SupportType(value.upper())
    except ValueError:
        raise SpecError([Problem(field="eks_support_type", value=value, message="is not EXTENDED or STANDARD",
                                 fix="-c eks_support_type=STANDARD, or omit it for EXTENDED")]) from None


def _staging_wait(context: Mapping[str, Any]) -> cdk.Duration:
    """The hours as a Duration; what a Duration cannot hold (nan, infinities, negative hours, more hours than the
    wait condition's limit) is refused here, before jsii raises on it; the stack checks the range."""
    value = context.get("weights_staging_hours")
    if value is None or value == "":
        return DEFAULT_WAIT
    try:
        hours = float(value)
    except (TypeError, ValueError):
        hours = math.nan
    if not 0 <= hours <= MAX_WAIT.to_hours():
        raise SpecError([Problem(field="weights_staging_hours", value=value,
                                 message=f"is not a number of hours from 0.25 to {MAX_WAIT.to_hours():g}",
                                 fix="-c weights_staging_hours=6")])
    return cdk.Duration.minutes(round(hours * 60))


def _region(context: Mapping[str, Any], specs: Sequence[DpdSpec]) -> str:
    region = context.get("region")
    if region:
        if not REGION_NAME.match(str(region)):
            raise SpecError([Problem(field="region", value=region, message="is not an AWS region name",
                                     fix="-c region=us-west-2, or leave it out for the first spec's S3 region")])
        return str(region)
    for spec in specs:
        if isinstance(spec.model.source, S3Source) and spec.model.source.region:
            return spec.model.source.region
    return DEFAULT_REGION


def _stack_name(context: Mapping[str, Any]) -> str:
    name = str(context.get("stack_name") or DEFAULT_STACK_NAME)
    if not STACK_NAME.match(name) or len(name) > STACK_NAME_MAX:
        raise SpecError([Problem(field="stack_name", value=name,
                                 message=f"is not a CloudFormation stack name (a letter, then letters, digits and "
                                         f"hyphens, at most {STACK_NAME_MAX} characters)",
                                 fix=f"-c stack_name={DEFAULT_STACK_NAME}, or leave it out")])
    return name


def build(context: Mapping[str, Any] | None = None, *, outdir: str | None = None) -> tuple[cdk.App, HyperPodDpdStack]:
    """The app and its one stack; raises :class:`SpecError` for bad input."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    name, options = stack_options(app.node.get_all_context())
    return app, HyperPodDpdStack(app, name, **options)


def stack_options(context: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The stack's name and keyword arguments, every context value read and checked; :class:`SpecError` if bad.

    Nothing is constructed here, so a bad value is refused before jsii can raise on it.
    """
    problems = context_problems(context)
    if problems:
        raise SpecError(problems, source="-c key=value and cdk.json", what="CDK context")
    ctx = context.get
    name = _stack_name(context)
    specs = _specs(context)
    region = _region(context, specs)
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")  # set by the CLI when credentials exist; never looked up
    existing = None
    if ctx("eks_cluster"):
        existing = ExistingEksCluster(cluster_name=str(ctx("eks_cluster")),
                                      oidc_issuer_url=str(ctx("oidc_issuer_url") or ""),
                                      oidc_provider_arn=ctx("oidc_provider_arn") or None,
                                      cluster_security_group_id=ctx("cluster_security_group_id") or None,
                                      namespaces=tuple(_list(ctx("existing_namespaces") or "")))
        if not existing.oidc_issuer_url:
            raise SpecError([Problem(
                field="oidc_issuer_url", value=None, message="is required with eks_cluster",
                fix="-c oidc_issuer_url=$(aws eks describe-cluster --name NAME "
                    "--query cluster.identity.oidc.issuer --output text)")])
    vpc, hyperpod_subnets = _vpc(context)
    return name, dict(
        endpoints=specs, vpc=vpc, hyperpod_subnet_ids=hyperpod_subnets,
        env=cdk.Environment(account=account, region=region),
        availability_zone_id=str(ctx("availability_zone_id") or DEFAULT_AVAILABILITY_ZONE_ID),
        model_bucket_name=ctx("model_bucket") or None, existing_cluster=existing,
        admin_role_arns=_list(ctx("admin_role_arns")), dependency_chart_dir=ctx("dependency_chart") or None,
        training_plan_arn=ctx("training_plan_arn") or None, hyperpod_cluster_name=ctx("hyperpod_cluster_name") or None,
        description="SageMaker HyperPod (EKS) with Disaggregated Prefill and Decode endpoints (hyperpod-dpd)",
        observability=_observability(context), benchmark=_flag(context, "benchmark", default=True),
        aggregated_baseline=_flag(context, "aggregated_baseline", default=False),
        allow_internet_facing_load_balancers=_flag(context, "allow_internet_facing_load_balancers", default=False),
        eks_endpoint_access=(ClusterEndpointAccess.parse(str(ctx("eks_endpoint_access")))
                             if ctx("eks_endpoint_access") else None),
        cluster_creator_admin=_flag(context, "eks_creator_admin", default=True),
        network_policies=_flag(context, "network_policies", default=False),
        kubernetes_version=str(ctx("kubernetes_version") or KUBERNETES_VERSION), support_type=_support_type(context),
        preinstalled_addons=_list(ctx("preinstalled_addons")), weights_staging_timeout=_staging_wait(context),
        bundled_load_balancer_controller=_flag(context, "bundled_load_balancer_controller", default=True),
        bundled_keda=_flag(context, "bundled_keda", default=True),
        addon_versions=AddonVersions(**({"inference": str(ctx("inference_addon_version"))}
                                        if ctx("inference_addon_version") else {})))


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
    for policies in stack.network_policies:  # -c network_policies=true
        objects = stack.resolve(policies.chart.to_json())
        path = folder / f"{objects[0]['metadata']['namespace']}-{policies.chart.node.id}.yaml"
        path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
        written.append(path)
    for twin in stack.aggregated_twins:  # -c aggregated_baseline=true: the baseline of `hyperpod-dpd bench`
        metadata = twin.document["metadata"]
        path = folder / f"{metadata['namespace']}-{metadata['name']}.yaml"
        path.write_text(yaml.safe_dump_all(stack.resolve([twin.document]), sort_keys=False), encoding="utf-8")
        written.append(path)
    return written


def _direct_context(argv: Sequence[str], cdk_json: Path) -> dict[str, Any]:
    """cdk.json's context plus ``-c key=value`` arguments, for ``python app.py`` without the CLI."""
    context = cdk_json_context(cdk_json)
    args = list(argv)
    for i, arg in enumerate(args):
        if arg in ("-c", "--context") and i + 1 < len(args) and "=" in args[i + 1]:
            key, value = args[i + 1].split("=", 1)
            context[key] = value
    return context


def main(argv: Sequence[str] = (), *, cdk_json: Path = Path("cdk.json")) -> int:
    """Synthesize the app (under the CDK CLI, or directly with ``cdk_json``'s context); 2 for bad input."""
    under_cli = "CDK_CONTEXT_JSON" in os.environ or CLI_VERSION_ENV in os.environ
    too_old = cli_too_old(os.environ, minimum_cli_version())
    if too_old:
        print(f"error: {too_old}", file=sys.stderr)
        return 2
    try:
        if under_cli:
            app, stack = build()
        else:
            app, stack = build(_direct_context(argv, cdk_json), outdir=os.environ.get("CDK_OUTDIR", "cdk.out"))
        assembly = app.synth()
        written = write_manifests(stack, Path(assembly.directory))
        observed = write_observability_files(stack, Path(assembly.directory))
    except SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # ours or jsii's, that no check turned into a problem: a bug
        print(f"error: {internal_error_line(error)}", file=sys.stderr)
        return EXIT_INTERNAL
    if not under_cli:  # the CLI prints its own summary; warnings are printed by synth() either way
        print(f"cloud assembly: {assembly.directory}", file=sys.stderr)
        for path in written:
            print(f"manifest: {path}", file=sys.stderr)
        for path in observed:
            print(f"observability: {path}", file=sys.stderr)
    return 0

