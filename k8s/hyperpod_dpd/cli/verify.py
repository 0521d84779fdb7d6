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
import json

from hyperpod_dpd.cli._argtypes import path, seconds
from hyperpod_dpd.cli._common import (
    add_aws_arguments,
    add_deployed_arguments,
    add_spec_argument,
    load_spec_argument,
    read_deployed,
)
from hyperpod_dpd.clients.checks import exit_status
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_HYPERPOD_CLUSTER
from hyperpod_dpd.contracts.stack_outputs import render_resolved
from hyperpod_dpd.ops.table import render_json, render_table
from hyperpod_dpd.ops.verify import (
    DEFAULT_POLL,
    DEFAULT_TIMEOUT,
    VerifyRequest,
    as_deployed,
    resolved_names,
    run_verify,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "verify", help="report the cluster, endpoint, prefill/decode and router readiness; --smoke tests it",
        description=(__doc__ or "").partition("\n\n")[2], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  hyperpod-dpd verify my-spec.yaml --outputs-file outputs.json --dry-run\n"
               "  hyperpod-dpd verify my-spec.yaml --outputs-file outputs.json --smoke\n"
               "  hyperpod-dpd verify my-spec.yaml --stack HyperPodDpd --region us-west-2 --no-wait --json")
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
    parser.add_argument("--restart-drill", action="store_true",
                        help="delete one prefill pod (its Deployment replaces it), wait for it to be Ready, then "
                             "prove every decoder receives KV cache again; fails on a timeout, a decoder restart "
                             "or no transferred tokens (needs delete on pods in the endpoint's namespace)")
    parser.add_argument("--amp-workspace", metavar="ARN_OR_ID",
                        help="the AMP workspace the alert rules run in (default: the stack's AmpWorkspaceArn output)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run, crd_diff=True)


def run(args: argparse.Namespace, *, seams: Seams) -> int:
    deployed = read_deployed(args, seams.aws_clients)
    spec = as_deployed(load_spec_argument(args.spec).spec, deployed)
    request = VerifyRequest(
        spec=spec, deployed=deployed, quiet=args.json, cluster_name=args.cluster_name, region=args.region,
        profile=args.profile, kube_context=args.kube_context, kubeconfig=args.kubeconfig, wait=args.wait,
        timeout=args.timeout, poll_interval=args.poll_interval, crd_diff=args.crd_diff, smoke=args.smoke,
        correctness=args.correctness, restart_drill=args.restart_drill, amp_workspace=args.amp_workspace)
    if args.dry_run:
        names = resolved_names(request)
        if args.json:
            print(json.dumps({"stack_outputs": deployed.source if deployed is not None else None,
                              "names": [{"what": n.what, "value": n.value, "origin": n.origin} for n in names]},
                             indent=2))
        else:
            print(render_resolved(names, deployed=deployed))
        return 0
    report = run_verify(request, seams)
    if args.json:
        print(render_json(report.checks, region=report.region, namespace=spec.namespace, name=spec.name))
    else:
        where = f"in {report.region}" if report.region else "(no AWS region: pass --region or set AWS_REGION)"
        print(f"verify {spec.namespace}/{spec.name} {where}")
        print(render_table(report.checks))
    return exit_status(report.checks)
