"""``hyperpod-dpd bench [SPEC]``: benchmark the deployed endpoint from inside the cluster.

Runs a Job on a non-HyperPod node that sends fixed-length prompts to the endpoint's router, one load level
at a time (aiperf at each closed-loop --concurrency or open-loop --request-rate; --client genai-bench runs the
AWS blog's client for closed loop instead), reads
the result files back (from S3 when the Job uploaded them, else from its log), deletes the Job, and prints
per level the latencies, throughput, failed requests, goodput under the spec's slo, and the router's and
decoder's counters that prove the level was disaggregated. --aggregated also benchmarks the aggregated twin
and reports DPD's change; --compare adds the advisor's prediction. --output-dir DIR only writes the
manifests (- prints them); --results-dir DIR reports a results folder instead of running anything. --trace FILE
replays a request trace with aiperf's fixed schedule instead of load levels, window by window, each window proven
as a level is.

Exit status: 0 when every Job succeeded and every level can be trusted, 1 otherwise, 2 for usage errors
(traffic the spec cannot serve or route as asked, a missing endpoint or twin, RBAC the run lacks, results
folders of different scenarios). docs/bench.md explains each column and warning and the permissions needed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from hyperpod_dpd.benchmark.replay.replay import DEFAULT_SPEEDUP
from hyperpod_dpd.benchmark.request import BenchRequest, BenchTraffic, BuyerOptions, ClusterAccess, JobRequest, Runs
from hyperpod_dpd.benchmark.run.client import DEFAULT_CLIENT, Client
from hyperpod_dpd.benchmark.run.route import RoutePath
from hyperpod_dpd.benchmark.run.scenario import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_SECONDS,
    DEFAULT_OSL,
    DEFAULT_POLL,
    levels_text,
    parse_levels,
    parse_rates,
)
from hyperpod_dpd.cli._argtypes import number, pairs, path, positive, region, seconds
from hyperpod_dpd.cli._common import (
    add_deployed_arguments,
    add_output_dir_argument,
    add_spec_argument,
    deployed_source,
    emit_documents,
    load_spec_argument,
)
from hyperpod_dpd.contracts.stack_outputs import render_resolved
from hyperpod_dpd.errors import SpecError, UsageError, problems_error
from hyperpod_dpd.traces import DEFAULT_WINDOW_S, FORMAT_NAMES

if TYPE_CHECKING:
    from hyperpod_dpd.benchmark.session import Plan
    from hyperpod_dpd.clients.seams import Seams
    from hyperpod_dpd.validation import CheckedSpec


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="benchmark the deployed endpoint in-cluster (optionally against aggregated)",
        description=(__doc__ or "").partition("\n\n")[2], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  hyperpod-dpd bench my-spec.yaml --outputs-file outputs.json --output-dir bench-job\n"
               "  hyperpod-dpd bench my-spec.yaml --outputs-file outputs.json --concurrency 1,8,32\n"
               "  hyperpod-dpd bench my-spec.yaml --outputs-file outputs.json --aggregated --compare --json")
    add_spec_argument(parser)
    traffic = parser.add_argument_group("traffic")
    traffic.add_argument("--isl", type=positive, help="input tokens (default: the smallest multiple of 256 whose "
                                                      "prompts clear the spec's routing threshold, 4352 for 4096)")
    traffic.add_argument("--path", choices=[p.value for p in RoutePath], default=RoutePath.DPD.value,
                         help="dpd: prompts the router disaggregates (default); direct: prompts below the threshold, "
                              "which the decoder serves alone")
    traffic.add_argument("--osl", type=positive, default=DEFAULT_OSL, help=f"output tokens (default: {DEFAULT_OSL})")
    load = traffic.add_mutually_exclusive_group()
    load.add_argument("--concurrency", default=levels_text(DEFAULT_CONCURRENCY), metavar="N[,N...]",
                      help="closed-loop concurrency levels, one client run each (default: "
                           f"{levels_text(DEFAULT_CONCURRENCY)})")
    load.add_argument("--request-rate", metavar="R[,R...]",
                      help="open-loop Poisson arrival rates in requests per second, one aiperf run each, instead of "
                           "--concurrency (e.g. 1,2,4)")
    traffic.add_argument("--client", choices=[c.value for c in Client], default=DEFAULT_CLIENT.value,
                         help=f"the benchmark client (default: {DEFAULT_CLIENT.value}, which adds far less TTFT under "
                              "load; genai-bench, the AWS blog's client, sends closed-loop levels only)")
    traffic.add_argument("--prefix-share", type=number, default=0.0, metavar="F",
                         help="this fraction of each prompt's --isl tokens is one prefix shared by every prompt of a "
                              "level, as RAG and agent traffic share a context (aiperf; default: 0, none)")
    traffic.add_argument("--requests", type=positive, metavar="N",
                         help="requests per level (default: 10 x the highest concurrency, or 120 s of arrivals at "
                              "each rate; at least 155)")
    traffic.add_argument("--max-seconds", type=positive, default=DEFAULT_MAX_SECONDS, metavar="S",
                         help=f"time bound per level, a multiple of 60 (default: {DEFAULT_MAX_SECONDS})")
    replay = parser.add_argument_group("replaying a trace (docs/bench.md, Replaying a trace)")
    replay.add_argument("--trace", metavar="FILE", type=path,
                        help="replay this request trace (Mooncake JSONL, Azure or BurstGPT CSV; gzipped too) with "
                             "aiperf's fixed schedule instead of load levels, with the proof of disaggregation per "
                             "window")
    replay.add_argument("--trace-format", choices=FORMAT_NAMES, help="the trace's format (default: detected)")
    replay.add_argument("--trace-speedup", type=number, default=DEFAULT_SPEEDUP, metavar="X",
                        help=f"replay X times faster than the trace (default: {DEFAULT_SPEEDUP:g}, real time)")
    replay.add_argument("--trace-window", type=number, default=DEFAULT_WINDOW_S, metavar="SECONDS",
                        help="seconds of the replay per window, one aiperf run and one proof each (default: "
                             f"{DEFAULT_WINDOW_S:g})")
    what = parser.add_argument_group("what to run")
    what.add_argument("--aggregated", action="store_true",
                      help="also benchmark the aggregated twin (<name>-agg) and report DPD's change")
    what.add_argument("--compare", action="store_true", help="print the advisor's prediction beside the measurement")
    add_output_dir_argument(what, default=None, dest="render", deprecated=("--render",),
                            what="only the Job and ServiceAccount manifests, running nothing,")
    what.add_argument("--results-dir", metavar="DIR", type=path, action="append",
                      help="report this results folder (genai-bench's, or a run folder the Job uploaded); run nothing. "
                           "Given again, each further folder is a repeat of the same levels")
    what.add_argument("--aggregated-results-dir", metavar="DIR", type=path, action="append",
                      help="with --results-dir: the aggregated twin's (once per --results-dir)")
    what.add_argument("--repeat", type=positive, default=1, metavar="N",
                      help="run every level N times, DPD and the twin in turn, for the A/B's intervals (default: 1)")
    what.add_argument("--price-per-node-hour", type=number, metavar="USD",
                      help="your rate for the A/B's cost columns (default: the price table's figure, labelled)")
    what.add_argument("--report-dir", metavar="DIR", type=path,
                      help="also write report.html (self-contained, inline SVG), its PNGs and report.json into DIR, "
                           "and each live run's results with its counters under DIR/runs/ (a --results-dir folder)")
    what.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    job = parser.add_argument_group("the Job")
    job.add_argument("--namespace", help="where the Job runs (default: the spec's namespace)")
    job.add_argument("--run-id", help="names the Job and results folder (default: the UTC time, YYYYmmdd-HHMMSS)")
    job.add_argument("--image", help="runs the client; pip-installs it when absent (default: python 3.11 slim "
                                     "from ECR Public)")
    job.add_argument("--genai-bench-version", help="the genai-bench to install (default: 0.0.5 with every dependency "
                                                   "hash-pinned; another version installs unpinned)")
    job.add_argument("--aiperf-version", help="the aiperf to install, the default client (default: 0.13.0, "
                                              "hash-pinned; another version installs unpinned)")
    job.add_argument("--pip-index-url", metavar="URL", help="the package index the pod installs from, e.g. a mirror "
                                                         "for clusters without internet egress (default: PyPI)")
    job.add_argument("--aws-cli-image", help="copies the tokenizer and results (default: aws-cli 2.27.0, ECR Public)")
    job.add_argument("--service-account", help="(default: hyperpod-dpd-bench)")
    job.add_argument("--role-arn", help="IAM role to annotate on a new ServiceAccount (IRSA); not needed with "
                                        "the stack, whose ServiceAccount already carries one (and is kept)")
    job.add_argument("--tokenizer-s3", metavar="S3_URI", help="tokenizer files (default: the model's S3 prefix)")
    job.add_argument("--results-s3", metavar="S3_URI",
                     help="also upload the result files under S3_URI/<endpoint>/<run id>/ (default: "
                          "s3://<the tokenizer's bucket>/benchmarks, which the stack's benchmark role may write)")
    job.add_argument("--no-upload", action="store_true", help="keep the results in the pod's log only")
    job.add_argument("--node-selector", type=pairs, metavar="K=V[,K=V]",
                     help="nodes the pod may use, never a HyperPod node (default: the stack's system nodes with "
                          "--stack/--outputs-file, else any non-HyperPod node)")
    job.add_argument("--region", type=region,
                     help="the buckets' and the --stack's region (default: the stack's, else the model source's)")
    deployed = parser.add_argument_group("the deployed stack (the names it deployed, over the spec's)")
    add_deployed_arguments(deployed)  # type: ignore[arg-type]
    deployed.add_argument("--profile", help="AWS named profile for --stack and for reading the uploaded results "
                                            "(default: the default credential chain)")
    cluster = parser.add_argument_group("the cluster")
    cluster.add_argument("--kube-context", help="kubeconfig context (default: the current one)")
    cluster.add_argument("--kubeconfig", type=path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    cluster.add_argument("--timeout", type=seconds, metavar="SECONDS",
                         help="how long to wait per Job (default: its deadline plus 5 minutes)")
    cluster.add_argument("--poll-interval", type=seconds, default=DEFAULT_POLL, metavar="SECONDS",
                         help=f"seconds between polls (default: {DEFAULT_POLL})")
    cluster.add_argument("--keep", action="store_true", help="leave the Job for inspection (its TTL removes it)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, *, seams: Seams) -> int:
    """Run ``bench`` as ``args`` ask. :param seams: the live systems to use."""
    from hyperpod_dpd.benchmark import session  # noqa: PLC0415 - the Job chart loads cdk8s; keeps --help fast

    checked = load_spec_argument(args.spec)
    if args.aggregated_results_dir and not args.results_dir:
        raise UsageError("--aggregated-results-dir needs --results-dir")
    if args.repeat > 1 and args.results_dir:
        raise UsageError("--repeat runs the Jobs again; with --results-dir give each repeat's folder as another "
                         "--results-dir")
    if args.trace is not None:
        return _replay(args, checked, seams)
    request = _request(args, checked)
    try:
        if args.render:
            planned = session.plan(request, seams=seams)
            return _write_manifests(planned, planned.manifests, args.render)
        report = session.run(request, seams=seams)
    except SpecError as err:
        raise problems_error("invalid benchmark options:", err) from None
    print(report.to_json() if args.json else report.render())
    return 0 if report.healthy else 1


def _replay(args: argparse.Namespace, checked: CheckedSpec, seams: Seams) -> int:
    """``--trace``: its manifests or its run (benchmark/replay/replay_run.py), printed."""
    from hyperpod_dpd.benchmark.replay import replay_run  # noqa: PLC0415 - as in run()

    request = _request(args, checked)
    trace = replay_run.TraceOptions(path=args.trace, format=args.trace_format, speedup=args.trace_speedup,
                                    window_s=args.trace_window)
    try:
        if args.render:
            planned = replay_run.plan_trace(request, trace, seams=seams)
            return _write_manifests(planned.plan, planned.manifests, args.render)
        report = replay_run.run_trace(request, trace, seams=seams)
    except SpecError as err:
        raise problems_error("cannot replay the trace:", err) from None
    print(report.to_json() if args.json else report.render())
    return 0 if report.healthy else 1


def _write_manifests(planned: Plan, manifests: Callable[[], Mapping[str, str]], output_dir: str) -> int:
    """``--output-dir``: the names used and why on standard error, then the files written (or the YAML)."""
    print(render_resolved(planned.names, deployed=planned.deployed), file=sys.stderr)
    for written in emit_documents(manifests(), output_dir):
        print(written)
    return 0


def _request(args: argparse.Namespace, checked: CheckedSpec) -> BenchRequest:
    """The options as a request of parsed values; the stack they name is read when the run needs it (not for
    --results-dir)."""
    return BenchRequest(
        spec=checked.spec, architecture=checked.architecture.name if checked.architecture is not None else None,
        quiet=args.json, traffic=_traffic(args),
        runs=Runs(aggregated=args.aggregated, compare=args.compare, results_dirs=tuple(args.results_dir or ()),
                  aggregated_results_dirs=tuple(args.aggregated_results_dir or ())),
        job=JobRequest(
            namespace=args.namespace, run_id=args.run_id, image=args.image,
            genai_bench_version=args.genai_bench_version, aiperf_version=args.aiperf_version,
            pip_index_url=args.pip_index_url, aws_cli_image=args.aws_cli_image, service_account=args.service_account,
            role_arn=args.role_arn, tokenizer_s3=args.tokenizer_s3, results_s3=args.results_s3,
            upload=not args.no_upload, node_selector=args.node_selector),
        deployed=deployed_source(args),
        cluster=ClusterAccess(kube_context=args.kube_context, kubeconfig=args.kubeconfig, timeout=args.timeout,
                              poll_interval=args.poll_interval, keep=args.keep),
        buyer=BuyerOptions(repeat=args.repeat, price_per_node_hour=args.price_per_node_hour,
                           report_dir=args.report_dir))


def _traffic(args: argparse.Namespace) -> BenchTraffic:
    """The traffic options as values; a level that is not a number is refused as every bad option is (exit 2)."""
    try:
        rates = parse_rates(args.request_rate) if args.request_rate is not None else ()
        concurrency = () if rates else parse_levels(args.concurrency)
    except SpecError as err:
        raise problems_error("invalid benchmark options:", err) from None
    return BenchTraffic(isl=args.isl, osl=args.osl, path=RoutePath(args.path), concurrency=concurrency,
                   request_rates=rates, client=Client(args.client), requests=args.requests,
                   max_seconds=args.max_seconds, prefix_share=args.prefix_share)
