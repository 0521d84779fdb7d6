"""``hyperpod-dpd verify [SPEC]``: is the deployed endpoint up, and does it route as intended?

Reports the HyperPod cluster's status and nodes per instance group, the InferenceEndpointConfig's
status conditions, the prefill and decode deployments (pods labelled
inference.sagemaker.aws.amazon.com/dpd-role), the router, and the KV roles the workers started
with ('pd_role': 'sender' on the prefiller, 'receiver' on the decoder). With --wait (the default) it polls
until everything is ready or --timeout passes, with progress on stderr. With --smoke it then sends a
short and a long prompt through the router (via the API server's service proxy) and reports the
status, time to first token and the path the router took (from its 'Conditional routing' log line).
The long prompt fails unless it was disaggregated and the decoders' external_kv_transfer prompt-token
counter rose (read from their /metrics through the pod proxy); 'smoke: alert inputs' then checks
that every vLLM series the alerts read is served. The long prompt is judged per decoder: it is sent
until each decode pod has received one (at most 2 x decoders + 2 times), and each must take at least
90% of its prompt tokens from the KV connector. --correctness (implies --smoke) also sends three
greedy, seeded prompts through the router and through an engine that computes the prefill itself
(the aggregated twin when the stack hosts one, else a decode pod through the pod proxy) and fails
when the answers differ.

The 'operator CRD' row compares the cluster's InferenceEndpointConfig CRD with the one this package
ships: it fails on a field the spec's manifest sets that the live CRD lacks, and lists fields added
or removed (--no-crd-diff leaves it out).

Who can call the model: the operator's Ingress must ask for, and get, an internal load balancer (FAIL
if internet-facing), with its listeners, security groups and source ranges; with AWS credentials the
ALB's scheme and security-group sources and the SageMaker endpoint's status (when endpoint_name is
set); and the NetworkPolicies where the router and the model pods run.

With --stack NAME or --outputs-file FILE the names come from what the stack deployed (its outputs):
the region, the HyperPod cluster, the endpoint's namespace, router Service and instance groups.
Without them the spec's names are used, and the HyperPod cluster is --cluster-name, else the only
HyperPod cluster in the region, else HyperPodDpd-hp (the CDK app's default). --dry-run prints the
names and where each came from, and contacts nothing.
Exit status: 0 when every check passed or was skipped, 1 when any failed, errored or timed out,
2 for usage errors.

Kubernetes RBAC: get inferenceendpointconfigs, deployments, services, ingresses; list pods,
networkpolicies; get pods/log in hyperpod-inference-system; create services/proxy there and get
pods/proxy in the endpoint's namespace for --smoke (and create pods/proxy for --correctness without
an aggregated twin); get customresourcedefinitions (cluster-scoped)
for the CRD row, which is SKIP without it.

The rules' inputs where the rules run: with AWS credentials and the stack's AMP workspace (its
AmpWorkspaceArn output, or --amp-workspace), one 'amp input' row per series an alert or dashboard
panel reads, with the labels the rules select on (taken from the rendered expressions): PASS when
the workspace holds it, FAIL when it is absent (the labels it is held under instead, why, and which
alerts go blind), SKIP when it cannot exist yet (no series of the namespace scraped, or a series
its exporter creates on a first event). IAM: aps:DescribeWorkspace and aps:QueryMetrics.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hyperpod_dpd.cli._argtypes import path, seconds
from hyperpod_dpd.cli._common import (
    add_aws_arguments,
    add_deployed_arguments,
    add_spec_argument,
    bucket_region,
    problems_error,
    read_deployed,
    read_spec,
)
from hyperpod_dpd.clients.amp import Send, urllib_send
from hyperpod_dpd.clients.aws import AwsClients, AwsUnavailable, session_clients
from hyperpod_dpd.clients.checks import Check, Status, errored, exit_status, skipped
from hyperpod_dpd.clients.kube import KubeApi, KubeError, load_kube
from hyperpod_dpd.clients.wait import Progress, Waiter
from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, router_service
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_HYPERPOD_CLUSTER
from hyperpod_dpd.contracts.stack_outputs import (
    GUESSED,
    OPTION,
    STACK,
    DeployedStack,
    Resolved,
    guessed_note,
    render_resolved,
)
from hyperpod_dpd.errors import SpecError, UsageError
from hyperpod_dpd.ops.exposure import exposure_checks
from hyperpod_dpd.ops.rule_inputs import amp_input_checks
from hyperpod_dpd.ops.smoke import CORRECTNESS, INPUTS, LONG, SHORT, run_correctness, run_smoke
from hyperpod_dpd.ops.table import render_json, render_table
from hyperpod_dpd.ops.verify import (
    CLUSTER,
    ENDPOINT,
    KV_ROLES,
    ROUTER,
    VerifyTargets,
    check_kv_roles,
    hint_for,
    probes,
)
from hyperpod_dpd.spec import DpdSpec

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

DEFAULT_TIMEOUT = 900
DEFAULT_POLL = 15

# The seams the tests replace.
aws_clients = session_clients
kube_api: Callable[[str | None, str | None], KubeApi] = load_kube
clock: Callable[[], float] = time.monotonic
sleep: Callable[[float], None] = time.sleep
amp_send: Send = urllib_send


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "verify", help="report the cluster, endpoint, prefill/decode and router readiness; --smoke tests it",
        description=(__doc__ or "").partition("\n\n")[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    parser.add_argument("--cluster-name", help="the HyperPod cluster (default: the only one in the region, else "
                             f"{DEFAULT_HYPERPOD_CLUSTER}, the CDK app's default)")
    add_aws_arguments(parser)
    add_deployed_arguments(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="print the names verify would check and where each came from; contact nothing")
    parser.add_argument("--kube-context", help="kubeconfig context (default: the current one)")
    parser.add_argument("--kubeconfig", type=path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--wait", action=argparse.BooleanOptionalAction, default=True,
                        help="poll until ready or --timeout (default: --wait)")
    parser.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait (default: {DEFAULT_TIMEOUT})")
    parser.add_argument("--poll-interval", type=seconds, default=DEFAULT_POLL, metavar="SECONDS",
                        help=f"seconds between polls (default: {DEFAULT_POLL})")
    parser.add_argument("--no-crd-diff", dest="crd_diff", action="store_false",
                        help="leave out the 'operator CRD' row, which compares the cluster's InferenceEndpointConfig "
                             "CRD with the one the checks know and lists the fields added or removed")
    parser.add_argument("--crd-diff", dest="crd_diff", action="store_true",
                        help="the default (accepted for older scripts)")
    parser.add_argument("--smoke", action="store_true",
                        help="send a short and a long prompt through the router and report each one's path")
    parser.add_argument("--correctness", action="store_true",
                        help="with --smoke (implied): the same greedy prompts through the router and through an "
                             "engine computing the prefill itself must give the same answers")
    parser.add_argument("--amp-workspace", metavar="ARN_OR_ID",
                        help="the AMP workspace the alert rules run in (default: the stack's AmpWorkspaceArn output)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run, crd_diff=True)


def _as_deployed(spec: DpdSpec, deployed: DeployedStack | None) -> DpdSpec:
    """The spec in the namespace the stack deployed it to (the stack's router Service must then match)."""
    if deployed is None:
        return spec
    try:
        endpoint = deployed.endpoint(spec.name)
    except SpecError as err:
        raise problems_error("the spec is not an endpoint of the deployed stack:", err) from None
    placed = dataclasses.replace(spec, namespace=endpoint.namespace)
    if endpoint.router_service != router_service(placed) or endpoint.router_namespace != OPERATOR_NAMESPACE:
        raise UsageError(f"the stack's router Service {endpoint.router_namespace}/{endpoint.router_service} is "
                              f"not the one this version derives ({OPERATOR_NAMESPACE}/{router_service(placed)}): "
                              "use the hyperpod-dpd version that deployed the stack")
    return placed


def _names(args: argparse.Namespace, spec: DpdSpec, deployed: DeployedStack | None, region: str) -> list[Resolved]:
    def origin(option: object) -> str:
        return OPTION if option is not None else STACK if deployed is not None else GUESSED

    cluster = args.cluster_name or (deployed.hyperpod_cluster_name if deployed is not None else
                                    f"the only HyperPod cluster in the region, else {DEFAULT_HYPERPOD_CLUSTER}")
    names = [Resolved("hyperpod cluster", cluster, origin(args.cluster_name)),
             Resolved("endpoint", f"{spec.namespace}/{spec.name}", origin(None)),
             Resolved("router", f"{OPERATOR_NAMESPACE}/{router_service(spec)}", origin(None))]
    if deployed is None:  # the region comes from --region or the AWS configuration, groups only from the stack
        return names
    groups = ", ".join(f"{role} {group}" for role, group in deployed.endpoint(spec.name).instance_groups.items())
    return [Resolved("region", region, origin(args.region)), *names,
            Resolved("instance groups", groups, STACK)]


def run(args: argparse.Namespace) -> int:
    deployed = read_deployed(args, aws_clients)
    spec = _as_deployed(read_spec(args.spec), deployed)
    fallback = deployed.region if deployed is not None else bucket_region(spec)
    leading: list[Check] = []

    region = args.region or fallback or "?"
    used = _names(args, spec, deployed, region)
    if args.dry_run:
        print(render_resolved(used, deployed=deployed))
        return 0
    note = guessed_note(used)
    if note and not args.json:
        print(note, file=sys.stderr)
    sagemaker: Callable[[], SageMakerClient] | None = None
    clients: AwsClients | None = None
    try:
        clients = aws_clients(args.region, args.profile, fallback_region=fallback)
        region, sagemaker = clients.region, clients.sagemaker
    except AwsUnavailable as err:
        leading.append(errored(CLUSTER, str(err)))

    kube: KubeApi | None = None
    try:
        kube = kube_api(args.kube_context, args.kubeconfig)
    except KubeError as err:
        leading.append(errored("kubernetes", str(err)))

    waiter = Waiter(timeout=args.timeout, poll_interval=args.poll_interval, clock=clock, sleep=sleep,
                    progress=Progress(sys.stderr) if not args.json else None)
    cluster_name = args.cluster_name or (deployed.hyperpod_cluster_name if deployed is not None else None)
    groups = tuple(deployed.endpoint(spec.name).instance_groups.values()) if deployed is not None else ()
    targets = VerifyTargets(spec=spec, region=region, cluster_name=cluster_name, instance_groups=groups,
                            crd_diff=args.crd_diff)
    polled, timed_out = waiter.run(probes(targets, sagemaker=sagemaker, kube=kube), wait=args.wait,
                                   hints=lambda check: hint_for(check, spec))
    checks = [*leading, *polled]
    if timed_out:
        names = ", ".join(check.name for check in timed_out)
        print(f"hyperpod-dpd: timed out after {args.timeout:.0f}s; still not ready: {names}. "
              f"Next: {hint_for(timed_out[0], spec) or 'see the table'}", file=sys.stderr)

    checks.append(_kv_roles(kube, spec, checks))
    checks += exposure_checks(spec, kube=kube, aws=clients)
    workspace = args.amp_workspace or (deployed.amp_workspace_arn if deployed is not None else None)
    checks += amp_input_checks(spec, clients=clients, workspace=workspace, send=amp_send)
    if args.smoke or args.correctness:
        twin = deployed.endpoint(spec.name).aggregated if deployed is not None else None
        checks += _smoke(kube, spec, checks, args.timeout, quiet=args.json, correctness=args.correctness,
                         twin_service=twin.router_service if twin is not None else None)
    if args.json:
        print(render_json(checks, region=region, namespace=spec.namespace, name=spec.name))
    else:
        print(f"verify {spec.namespace}/{spec.name} in {region}")
        print(render_table(checks))
    return exit_status(checks)


def _kv_roles(kube: KubeApi | None, spec: DpdSpec, checks: list[Check]) -> Check:
    ready = {check.name for check in checks if check.status is Status.PASS}
    if kube is None or not {"prefill", "decode"} <= ready:
        return skipped(KV_ROLES, "the prefill and decode pods are not ready")
    return check_kv_roles(kube, spec)


def _smoke(kube: KubeApi | None, spec: DpdSpec, checks: list[Check], timeout: float, *,
           quiet: bool, correctness: bool = False, twin_service: str | None = None) -> list[Check]:
    needed = {ENDPOINT, "prefill", "decode", ROUTER}
    ready = {check.name for check in checks if check.status is Status.PASS}
    if kube is None or not needed <= ready:
        missing = ", ".join(sorted(needed - ready)) or "kubernetes"
        reason = f"the endpoint is not ready ({missing}), so no prompt was sent"
        return [skipped(SHORT, reason), skipped(LONG, reason), skipped(INPUTS, reason),
                *([skipped(CORRECTNESS, reason)] if correctness else [])]
    announce = None if quiet else (lambda line: print(line, file=sys.stderr))
    rows = run_smoke(kube, spec, timeout=min(timeout, 300.0), clock=clock, announce=announce)
    if correctness:
        if announce is not None:
            announce(f"sending the correctness prompts through {router_service(spec)} and "
                     f"{twin_service or 'a decode pod'}...")
        rows.append(run_correctness(kube, spec, twin_service=twin_service, timeout=min(timeout, 300.0),
                                    clock=clock))
    return rows
