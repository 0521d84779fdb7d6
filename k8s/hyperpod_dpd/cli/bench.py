"""``hyperpod-dpd bench [SPEC]``: benchmark the deployed endpoint from inside the cluster.

Applies a Job (and its ServiceAccount) that runs a benchmark client on a non-HyperPod node against the
endpoint's router Service with fixed input and output lengths at each load level: genai-bench at each
closed-loop --concurrency level (the AWS blog's tool), or NVIDIA's aiperf at each open-loop
--request-rate (Poisson arrivals, which genai-bench cannot send). It waits for the Job with
progress on stderr, reads the result files back from S3 when the Job uploaded them (else from its log,
which kubelet's rotation may have cut), deletes the Job, and prints per level:
TTFT, TPOT and end-to-end latency (p50/p90/p99), output tokens per second, requests completed and
failed, the error rate, and what the router and decoder counted (DISAGG: requests the router
disaggregated; KV IN tok: prompt tokens the decoder received from the prefiller; CLIENT +ms: the
client's mean TTFT above the router's own), read through the API server before and after each level,
and goodput under the spec's slo. The default --isl clears the spec's routing threshold under
the router's length rule; a shorter one is refused unless --path direct. Warns when a level cannot
be trusted (under 95% disaggregated, no KV received, client overhead above its bound, failed
requests, answers shorter than --osl, a buffered stream); docs/bench.md explains each. --aggregated
also benchmarks the aggregated twin (the stack hosts it with -c aggregated_baseline=true) and reports
DPD's change; --compare adds the advisor's prediction.

--output-dir DIR only writes the manifests (- prints them). --results-dir DIR reports a results folder you already
have (genai-bench's, or the run folder the Job uploads, e.g. from --results-s3) instead of running anything.

Exit status: 0 when every Job succeeded and every level can be trusted, 1 otherwise, 2 for usage errors
(including traffic the spec cannot serve or route as asked, a missing endpoint or twin, and results
folders of different scenarios). Kubernetes RBAC: create serviceaccounts and jobs, get/delete jobs,
list pods and get pods/log in the Job's namespace; get inferenceendpointconfigs; list pods and get
pods/proxy in hyperpod-inference-system and the endpoint's namespace (the counters). The pod's role
(IRSA, -c benchmark=true in the stack) reads the model's tokenizer files and uploads the results; your own
AWS credentials read them back and need s3:ListBucket and s3:GetObject on <results S3>/<endpoint>/<run id>/
(without them bench uses the log's copy and says why).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.cli._argtypes import pairs, positive, seconds
from hyperpod_dpd.cli._common import (
    add_deployed_arguments,
    add_output_dir_argument,
    add_spec_argument,
    emit_documents,
    read_checked_spec,
    read_deployed,
)
from hyperpod_dpd.clients.kube import KubeError, load_kube
from hyperpod_dpd.contracts.stack_outputs import Resolved, guessed_note, render_resolved
from hyperpod_dpd.errors import SpecError, UsageError

if TYPE_CHECKING:
    from hyperpod_dpd.benchmark.cluster import BenchmarkKube, JobLog
    from hyperpod_dpd.benchmark.results import BenchmarkResults
    from hyperpod_dpd.benchmark.scenario import Scenario
    from hyperpod_dpd.benchmark.target import BenchmarkTarget
    from hyperpod_dpd.benchmark.trust import TrustWarning
    from hyperpod_dpd.clients.aws import AwsClients
    from hyperpod_dpd.contracts.stack_outputs import DeployedStack

DEFAULT_POLL = 15
DPD, AGGREGATED = "dpd", "aggregated"
TRAFFIC = re.compile(r"^D\((\d+),(\d+)\)$")



def _benchmark_kube(context: str | None, kubeconfig: str | None) -> BenchmarkKube:
    from hyperpod_dpd.benchmark.cluster import BenchmarkKube  # noqa: PLC0415

    return BenchmarkKube.from_kube(load_kube(context, kubeconfig))


def _aws_clients(region: str | None, profile: str | None) -> AwsClients:
    from hyperpod_dpd.clients.aws import session_clients  # noqa: PLC0415

    return session_clients(region, profile)


# The seams the tests replace.
aws_clients: Callable[[str | None, str | None], AwsClients] = _aws_clients
benchmark_kube: Callable[[str | None, str | None], BenchmarkKube] = _benchmark_kube
clock: Callable[[], float] = time.monotonic
sleep: Callable[[float], None] = time.sleep
now: Callable[[], time.struct_time] = time.gmtime


def _predict(spec: Any, scenario: Any) -> Any:
    from hyperpod_dpd.benchmark.prediction import predict  # noqa: PLC0415

    return predict(spec, scenario, baseline_nodes=1)


predictor: Callable[[Any, Any], Any] = _predict


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from hyperpod_dpd.benchmark.route import RoutePath  # noqa: PLC0415
    from hyperpod_dpd.benchmark.scenario import DEFAULT_MAX_SECONDS, DEFAULT_OSL  # noqa: PLC0415

    parser = subparsers.add_parser(
        "bench", help="benchmark the deployed endpoint in-cluster (optionally against aggregated)",
        description=(__doc__ or "").partition("\n\n")[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_argument(parser)
    traffic = parser.add_argument_group("traffic")
    traffic.add_argument("--isl", type=positive, help="input tokens (default: the smallest multiple of 256 whose "
                                                      "prompts clear the spec's routing threshold, 4352 for 4096)")
    traffic.add_argument("--path", choices=[p.value for p in RoutePath], default=RoutePath.DPD.value,
                         help="dpd: prompts the router disaggregates (default); direct: prompts below the threshold, "
                              "which the decoder serves alone")
    traffic.add_argument("--osl", type=positive, default=DEFAULT_OSL, help=f"output tokens (default: {DEFAULT_OSL})")
    load = traffic.add_mutually_exclusive_group()
    load.add_argument("--concurrency", default="8,16,32", metavar="N[,N...]",
                      help="closed-loop concurrency levels, one genai-bench run each (default: 8,16,32)")
    load.add_argument("--request-rate", metavar="R[,R...]",
                      help="open-loop Poisson arrival rates in requests per second, one aiperf run each, instead of "
                           "--concurrency (e.g. 1,2,4)")
    traffic.add_argument("--requests", type=positive, metavar="N",
                         help="requests per level (default: 10 x the highest concurrency, or 120 s of arrivals at "
                              "each rate; at least 155)")
    traffic.add_argument("--max-seconds", type=positive, default=DEFAULT_MAX_SECONDS, metavar="S",
                         help=f"time bound per level, a multiple of 60 (default: {DEFAULT_MAX_SECONDS})")
    what = parser.add_argument_group("what to run")
    what.add_argument("--aggregated", action="store_true",
                      help="also benchmark the aggregated twin (<name>-agg) and report DPD's change")
    what.add_argument("--compare", action="store_true", help="print the advisor's prediction beside the measurement")
    add_output_dir_argument(what, default=None, dest="render", deprecated=("--render",),
                            what="only the Job and ServiceAccount manifests, running nothing,")
    what.add_argument("--results-dir", metavar="DIR", help="report this results folder (genai-bench's, or a run "
                                                            "folder the Job uploaded); run nothing")
    what.add_argument("--aggregated-results-dir", metavar="DIR", help="with --results-dir: the aggregated twin's")
    what.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    job = parser.add_argument_group("the Job")
    job.add_argument("--namespace", help="where the Job runs (default: the spec's namespace)")
    job.add_argument("--run-id", help="names the Job and results folder (default: the UTC time, YYYYmmdd-HHMMSS)")
    job.add_argument("--image", help="runs the client; pip-installs it when absent (default: python 3.11 slim "
                                     "from ECR Public)")
    job.add_argument("--genai-bench-version", help="the genai-bench to install (default: 0.0.5 with every dependency "
                                                   "hash-pinned; another version installs unpinned)")
    job.add_argument("--aiperf-version", help="the aiperf to install for --request-rate (default: 0.13.0, "
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
    job.add_argument("--region", help="the buckets' and the --stack's region (default: the stack's, else the model "
                                      "source's)")
    deployed = parser.add_argument_group("the deployed stack (the names it deployed, over the spec's)")
    add_deployed_arguments(deployed)  # type: ignore[arg-type]
    deployed.add_argument("--profile", help="AWS named profile for --stack and for reading the uploaded results "
                                            "(default: the default credential chain)")
    cluster = parser.add_argument_group("the cluster")
    cluster.add_argument("--kube-context", help="kubeconfig context (default: the current one)")
    cluster.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    cluster.add_argument("--timeout", type=seconds, metavar="SECONDS",
                         help="how long to wait per Job (default: its deadline plus 5 minutes)")
    cluster.add_argument("--poll-interval", type=seconds, default=DEFAULT_POLL, metavar="SECONDS",
                         help=f"seconds between polls (default: {DEFAULT_POLL})")
    cluster.add_argument("--keep", action="store_true", help="leave the Job for inspection (its TTL removes it)")
    parser.set_defaults(handler=run)


@dataclass
class Outcome:
    label: str
    endpoint: str
    results: BenchmarkResults
    warnings: list[TrustWarning]
    job: str | None = None
    problem: str = ""
    source: str = ""
    routing: dict[Any, Any] | None = None  # LevelDisaggregation by Load, when the counters were read


def run(args: argparse.Namespace) -> int:
    checked = read_checked_spec(args.spec)
    spec = checked.spec
    # What the run measured, recorded so that advise --calibrate can refuse another model or instance type.
    identity = {"model": spec.model.name, "instance_type": spec.instance_type.api_name,
                "architecture": checked.architecture.name if checked.architecture is not None else None}
    try:
        return _run(args, spec, identity=identity)
    except SpecError as err:
        raise UsageError("invalid benchmark options:\n" + "\n".join(
            f"  - {p.render()}" for p in err.problems)) from None


def _run(args: argparse.Namespace, spec: Any, *, identity: dict[str, str | None]) -> int:
    from hyperpod_dpd.benchmark.scenario import Scenario, parse_levels  # noqa: PLC0415 - keeps --help fast

    if args.aggregated_results_dir and not args.results_dir:
        raise UsageError("--aggregated-results-dir needs --results-dir")
    if args.results_dir:
        outcomes = _from_directories(args, spec)
        scenario = _scenario_of(outcomes[0].results)
    else:
        scenario = _traffic(args, spec, Scenario, parse_levels)
        deployed = read_deployed(args, aws_clients)
        targets = _targets(args, spec, deployed)
        given = {"namespace": args.namespace, "tokenizer": args.tokenizer_s3, "service account": args.service_account,
                 "role": args.role_arn, "nodes": args.node_selector}
        options = _options(args, targets[0][1].tokenizer, deployed, spec.name)
        names = _names(targets[0][1], options, deployed, given=given)
        note = guessed_note(names)
        if args.render:
            print(render_resolved(names, deployed=deployed), file=sys.stderr)
        elif note and not args.json:
            print(note, file=sys.stderr)
        if args.render:
            return _render(args.render, targets, scenario, options)
        outcomes = _on_cluster(args, spec, targets, scenario, options)
    comparison = None
    if args.compare:
        comparison = _comparison(spec, scenario, outcomes)
    _print(args, scenario, outcomes, comparison, _slo(spec), identity=identity)
    healthy = all(not o.problem and not o.warnings and o.results.levels for o in outcomes)
    return 0 if healthy else 1


def _traffic(args: argparse.Namespace, spec: Any, scenario: Any, parse_levels: Any) -> Scenario:
    """The scenario asked for, refused (exit 2) when the spec could not serve or route it as ``--path`` says."""
    from hyperpod_dpd.benchmark.client import Client  # noqa: PLC0415
    from hyperpod_dpd.benchmark.route import RoutePath, default_isl, route_problems  # noqa: PLC0415
    from hyperpod_dpd.benchmark.scenario import parse_rates  # noqa: PLC0415
    from hyperpod_dpd.errors import raise_if_any  # noqa: PLC0415

    path = RoutePath(args.path)
    threshold = spec.routing.threshold
    client = Client.AIPERF if args.request_rate is not None else Client.GENAI_BENCH
    isl = args.isl if args.isl is not None else default_isl(threshold, path, client) or 1
    raise_if_any(route_problems(isl=isl, osl=args.osl, path=path, threshold=threshold,
                                max_model_len=spec.max_model_len, client=client))
    if args.request_rate is not None:
        load: dict[str, Any] = {"request_rates": parse_rates(args.request_rate), "concurrency": ()}
    else:
        load = {"concurrency": parse_levels(args.concurrency)}
    found: Scenario = scenario(isl=isl, osl=args.osl, requests=args.requests, max_seconds=args.max_seconds, **load)
    return found


def _scenario_of(results: BenchmarkResults) -> Scenario:
    from hyperpod_dpd.benchmark.scenario import Scenario  # noqa: PLC0415

    if not results.levels:
        raise UsageError("--results-dir holds no result files (genai-bench's *_num_concurrency_*_time_*s.json "
                              "or the Job's aiperf_rate_*.json)")
    match = TRAFFIC.match(results.levels[0].scenario)
    if match is None:
        raise UsageError(f"the results use traffic scenario {results.levels[0].scenario!r}; only fixed "
                              "lengths D(isl,osl) can be checked and compared")
    loads = results.loads
    return Scenario(isl=int(match[1]), osl=int(match[2]),
                    concurrency=tuple(load.concurrency for load in loads if load.concurrency is not None),
                    request_rates=tuple(load.rate for load in loads if load.rate is not None))


def _from_directories(args: argparse.Namespace, spec: Any) -> list[Outcome]:
    from hyperpod_dpd.benchmark.readiness import api_base_of  # noqa: PLC0415
    from hyperpod_dpd.benchmark.results import ResultsError, collect, read_files  # noqa: PLC0415
    from hyperpod_dpd.benchmark.trust import trust_warnings  # noqa: PLC0415

    folders = [(DPD, spec.name, args.results_dir)]
    if args.aggregated_results_dir:
        folders.append((AGGREGATED, f"{spec.name}-agg", args.aggregated_results_dir))
    outcomes = []
    for label, endpoint, folder in folders:
        path = Path(folder)
        if not path.is_dir():
            raise UsageError(f"{folder}: not a folder; pass genai-bench's <experiment-base-dir>/<folder> or the "
                                  "Job's run folder")
        try:
            files = read_files(path)
            results = collect(files)
        except (ResultsError, OSError) as err:
            raise UsageError(str(err)) from None
        _refuse_other_endpoint(folder, api_base_of(files), endpoint, spec.namespace)
        scenario = _scenario_of(results)
        warnings = trust_warnings(results, scenario) + _threshold_warnings(spec, scenario, results)
        outcomes.append(Outcome(label, endpoint, results, warnings, source=folder))
    _refuse_mismatch(outcomes)
    return outcomes


def _refuse_other_endpoint(folder: str, api_base: str | None, endpoint: str, namespace: str) -> None:
    """A folder whose client targeted another endpoint's router is not this endpoint's result."""
    expected = f"{endpoint}-{namespace}-routing-service."
    if api_base is not None and "routing-service." in api_base and f"//{expected}" not in api_base:
        raise UsageError(f"{folder}: the run measured {api_base}, not endpoint {endpoint} "
                              f"({expected}...). Fix: pass the spec of the endpoint the folder belongs to")


def _refuse_mismatch(outcomes: list[Outcome]) -> None:
    """An A/B of two folders is only a comparison when they ran the same scenario at the same levels."""
    if len(outcomes) < 2:
        return
    first, other = outcomes[0], outcomes[1]
    mine, theirs = _scenario_of(first.results), _scenario_of(other.results)
    if (mine.isl, mine.osl) != (theirs.isl, theirs.osl) or set(mine.loads) != set(theirs.loads):
        raise UsageError(
            f"--results-dir ran {mine.traffic} at {mine.levels_text()} but --aggregated-results-dir ran "
            f"{theirs.traffic} at {theirs.levels_text()}: an A/B needs the same input and output lengths and levels. "
            "Fix: pass folders of the same bench invocation")


def _threshold_warnings(spec: Any, scenario: Scenario, results: BenchmarkResults) -> list[TrustWarning]:
    """A results folder's input length that the router would not (all) disaggregate: by the shipped
    prompt lengths, or by the prompt tokens the server counted with the model's own tokenizer."""
    from hyperpod_dpd.benchmark.route import RoutePath, isl_for_model, path_problems  # noqa: PLC0415
    from hyperpod_dpd.benchmark.trust import Trust, TrustWarning  # noqa: PLC0415

    threshold = spec.routing.threshold
    problems = path_problems(isl=scenario.isl, path=RoutePath.DPD, threshold=threshold, client=scenario.client)
    found = []
    for level in results.levels:
        needed = isl_for_model(isl=scenario.isl, prompt_tokens=level.mean_input_tokens, threshold=threshold)
        if problems:
            message = problems[0].message
        elif needed is not None and level.mean_input_tokens:
            message = (f"the model's tokenizer counted {level.mean_input_tokens:,.0f} prompt tokens per request, not "
                       f"clear of the routing threshold {threshold} (use --isl {needed} or more)")
        else:
            continue
        found.append(TrustWarning(code=Trust.NOT_DISAGGREGATED, load=level.load, message=(
            f"{message}; the folder holds no router counters to show otherwise")))
    return found


def _targets(args: argparse.Namespace, spec: Any, deployed: DeployedStack | None) -> list[tuple[str, BenchmarkTarget]]:
    from hyperpod_dpd.benchmark.readiness import served_model  # noqa: PLC0415
    from hyperpod_dpd.benchmark.target import BenchmarkTarget, S3Location  # noqa: PLC0415
    from hyperpod_dpd.charts.aggregated import aggregated_spec  # noqa: PLC0415

    tokenizer = S3Location.parse(args.tokenizer_s3, field="--tokenizer-s3", region=args.region) \
        if args.tokenizer_s3 else None
    if deployed is not None:  # the stack's names over the spec's
        endpoint = deployed.endpoint(spec.name)
        targets = [(label, BenchmarkTarget.for_deployed(spec, endpoint, twin=label == AGGREGATED,
                                                        namespace=args.namespace, tokenizer=tokenizer))
                   for label in ([DPD, AGGREGATED] if args.aggregated else [DPD])]
    else:
        dpd = BenchmarkTarget.for_spec(spec, namespace=args.namespace, tokenizer=tokenizer, region=args.region)
        targets = [(DPD, dpd)]
        if args.aggregated:
            twin = BenchmarkTarget.for_spec(aggregated_spec(spec), namespace=args.namespace, tokenizer=dpd.tokenizer)
            targets.append((AGGREGATED, twin))
    # vLLM answers 404 to any other model: the name is the spec's --served-model-name when it sets one.
    return [(label, dataclasses.replace(target, served_model=served_model(spec))) for label, target in targets]


def _options(args: argparse.Namespace, tokenizer: Any = None, deployed: DeployedStack | None = None,
             name: str = "") -> Any:
    from hyperpod_dpd.benchmark.job import QUIET_SECONDS, RESULTS_PREFIX, JobOptions  # noqa: PLC0415
    from hyperpod_dpd.benchmark.target import S3Location  # noqa: PLC0415

    if deployed is not None:  # the stack's ServiceAccount, its role and its system nodes, unless given
        endpoint = deployed.endpoint(name)
        args.service_account = args.service_account or endpoint.benchmark_service_account
        args.role_arn = args.role_arn or endpoint.benchmark_role_arn
        if args.node_selector is None and deployed.system_node_selector is not None:
            args.node_selector = dict(deployed.system_node_selector)
    results = None
    if args.results_s3:
        results = S3Location.parse(args.results_s3, field="--results-s3", region=args.region)
    elif tokenizer is not None and not args.no_upload:
        # The stack's benchmark role may write here (the model bucket's benchmarks/ prefix).
        results = S3Location(bucket=tokenizer.bucket, prefix=RESULTS_PREFIX, region=tokenizer.region)
    given: dict[str, Any] = {
        "image": args.image, "genai_bench_version": args.genai_bench_version, "aiperf_version": args.aiperf_version,
        "aws_cli_image": args.aws_cli_image,
        "pip_index_url": args.pip_index_url,
        "service_account": args.service_account, "role_arn": args.role_arn, "node_selector": args.node_selector,
        "results": results}
    run_id = args.run_id or time.strftime("%Y%m%d-%H%M%S", now())
    # The pod pauses between levels long enough for two polls, so bench snapshots the counters there.
    quiet = max(QUIET_SECONDS, math.ceil(2 * args.poll_interval) + 10)
    return JobOptions(run_id=run_id, quiet_seconds=quiet,
                      **{key: value for key, value in given.items() if value is not None})


def _names(target: BenchmarkTarget, options: Any, deployed: DeployedStack | None,
           *, given: dict[str, Any]) -> list[Resolved]:
    """Which endpoint, bucket, ServiceAccount and nodes the Job uses, and where each name came from."""
    from hyperpod_dpd.contracts.stack_outputs import GUESSED, OPTION, STACK  # noqa: PLC0415

    def origin(what: str) -> str:
        return OPTION if given.get(what) is not None else STACK if deployed is not None else GUESSED

    selector = ",".join(f"{k}={v}" for k, v in options.node_selector.items()) or "any non-HyperPod node"
    return [
        Resolved("endpoint", f"{target.namespace}/{target.name}", origin("namespace")),
        Resolved("router", target.api_base, origin("router")),
        Resolved("tokenizer", target.tokenizer.uri, origin("tokenizer")),
        Resolved("service account", options.service_account, origin("service account")),
        Resolved("role", options.role_arn or "none (a ServiceAccount without IRSA)", origin("role")),
        Resolved("nodes", selector, origin("nodes"))]


def _render(folder: str, targets: list[tuple[str, BenchmarkTarget]], scenario: Scenario, options: Any) -> int:
    import yaml  # noqa: PLC0415

    from hyperpod_dpd.benchmark.job import job_name, render_benchmark_job  # noqa: PLC0415

    documents = {f"{target.namespace}-{job_name(target, options)}.k8s.yaml": yaml.safe_dump_all(
        render_benchmark_job(target, scenario, options), sort_keys=False, width=1000) for _, target in targets}
    for path in emit_documents(documents, folder):
        print(path)
    return 0


def _on_cluster(args: argparse.Namespace, spec: Any, targets: list[tuple[str, BenchmarkTarget]], scenario: Scenario,
                options: Any) -> list[Outcome]:
    from hyperpod_dpd.benchmark.cluster import run_job  # noqa: PLC0415
    from hyperpod_dpd.benchmark.disaggregation import (  # noqa: PLC0415
        LevelSnapshots,
        MetricsSources,
        disaggregation_warnings,
        read_counters,
    )
    from hyperpod_dpd.benchmark.job import deadline_seconds, job_name, render_benchmark_job  # noqa: PLC0415
    from hyperpod_dpd.benchmark.overhead import overhead_warnings  # noqa: PLC0415
    from hyperpod_dpd.benchmark.readiness import (  # noqa: PLC0415
        missing_endpoints,
        needed_permissions,
        permission_problems,
    )
    from hyperpod_dpd.benchmark.results import ResultsError, collect  # noqa: PLC0415
    from hyperpod_dpd.benchmark.route import RoutePath  # noqa: PLC0415
    from hyperpod_dpd.benchmark.trust import trust_warnings  # noqa: PLC0415
    from hyperpod_dpd.clients.wait import Progress, Waiter  # noqa: PLC0415
    from hyperpod_dpd.errors import raise_if_any  # noqa: PLC0415

    manifests = [(label, target, render_benchmark_job(target, scenario, options)) for label, target in targets]
    try:
        kube = benchmark_kube(args.kube_context, args.kubeconfig)
        missing = {t.namespace for _, t in targets
                   if kube.service_account(t.namespace, options.service_account) is None}
        raise_if_any(permission_problems(lambda p: kube.allowed(p.verb, p.resource, p.namespace, group=p.group,
                                                                subresource=p.subresource),
                                         needed_permissions(targets, spec, missing_accounts=missing)))
        raise_if_any(missing_endpoints(kube, targets, namespace=spec.namespace))
    except KubeError as err:
        raise UsageError(str(err)) from None
    timeout = args.timeout if args.timeout is not None else deadline_seconds(scenario, options.quiet_seconds) + 300
    path = RoutePath(args.path)
    outcomes = []
    for label, target, objects in manifests:
        # Only the DPD endpoint has a router that disaggregates; the twin's path is not in question.
        snapshots = LevelSnapshots(read=lambda: read_counters(kube, MetricsSources.for_spec(spec))) \
            if label == DPD else None
        name = job_name(target, options)
        if not args.json:
            print(f"benchmarking {target.namespace}/{target.name} with job {name} ({scenario.traffic}, "
                  f"{scenario.levels_text()}, {scenario.client.value})", file=sys.stderr)
        waiter = Waiter(timeout=timeout, poll_interval=args.poll_interval, clock=clock, sleep=sleep,
                        progress=None if args.json else Progress(sys.stderr))
        try:
            job_run = run_job(kube, objects, waiter=waiter, keep=args.keep,
                              on_poll=snapshots.observe if snapshots is not None else None)
            results = collect(_result_files(args, options, target, job_run.log), expected=scenario.loads,
                              isl=scenario.isl, osl=scenario.osl)
        except KubeError as err:
            raise UsageError(str(err)) from None
        except ResultsError as err:
            raise UsageError(f"job {name} printed results that cannot be read: {err}") from None
        problem = "" if job_run.succeeded else "\n".join(filter(None, [
            job_run.check.detail, job_run.diagnostics, job_run.log.log_tail]))
        warnings = trust_warnings(results, scenario)
        routing = None
        if snapshots is not None:
            routing = snapshots.levels(scenario.loads)
            warnings += disaggregation_warnings(
                path, list(results.loads), routing, isl=scenario.isl, threshold=spec.routing.threshold,
                prompt_tokens={level.load: level.mean_input_tokens for level in results.levels})
            warnings += overhead_warnings(results.levels, routing)
            if snapshots.errors and not args.json:
                print(f"reading the router and decoder counters: {snapshots.errors[-1]}", file=sys.stderr)
        outcomes.append(Outcome(label, target.name, results, warnings, job=name, problem=problem, routing=routing))
    return outcomes


def _result_files(args: argparse.Namespace, options: Any, target: BenchmarkTarget,
                  log: JobLog) -> Mapping[str, str]:
    """The Job's result files: the copy it uploaded to S3 (whole, where the log may have been rotated away),
    else its log's, with a note on stderr saying why."""
    from hyperpod_dpd.benchmark.uploaded import result_files  # noqa: PLC0415

    return result_files(log, results=options.results, endpoint=target.name, run_id=options.run_id,
                        s3=lambda region: aws_clients(region, args.profile).s3(region),
                        note=lambda text: print(text, file=sys.stderr))


def _comparison(spec: Any, scenario: Scenario, outcomes: list[Outcome]) -> dict[str, Any]:
    from hyperpod_dpd.benchmark.prediction import compare  # noqa: PLC0415

    try:
        advice = predictor(spec, scenario)
    except SpecError as err:
        raise UsageError("--compare: the advisor cannot predict this spec and traffic:\n" + "\n".join(
            f"  - {p.render()}" for p in err.problems)) from None
    rows = compare(outcomes[0].results, advice, layout="disaggregated")
    for outcome in outcomes[1:]:
        rows += compare(outcome.results, advice, layout="aggregated")
    return {"rows": rows, "assumptions": dict(advice.assumptions)}


def _slo(spec: Any) -> tuple[float | None, float | None] | None:
    """The spec's TTFT and TPOT targets in seconds, for goodput; None when it sets neither."""
    slo = spec.slo
    if slo is None or (slo.ttft_ms is None and slo.tpot_ms is None):
        return None
    return (None if slo.ttft_ms is None else slo.ttft_ms / 1e3, None if slo.tpot_ms is None else slo.tpot_ms / 1e3)


def _print(args: argparse.Namespace, scenario: Scenario, outcomes: list[Outcome],
           comparison: dict[str, Any] | None, slo: tuple[float | None, float | None] | None = None, *,
           identity: dict[str, str | None] | None = None) -> None:
    from hyperpod_dpd.benchmark.ab import compare_ab, render_ab  # noqa: PLC0415
    from hyperpod_dpd.benchmark.prediction import render_comparison  # noqa: PLC0415
    from hyperpod_dpd.benchmark.report import render_results, results_object, to_json  # noqa: PLC0415

    ab = compare_ab(outcomes[0].results, outcomes[1].results) if len(outcomes) > 1 else None
    if args.json:
        document: dict[str, Any] = {"runs": {o.label: {**results_object(
            endpoint=o.endpoint, scenario=scenario, results=o.results, warnings=o.warnings, job=o.job,
            routing=o.routing, slo=slo, identity=identity),
            "problem": o.problem or None} for o in outcomes}}
        if ab is not None:
            document["ab"] = [row.as_dict() for row in ab]
        if comparison is not None:
            document["comparison"] = {"rows": [row.as_dict() for row in comparison["rows"]],
                                      "assumptions": comparison["assumptions"]}
        print(to_json(document))
        return
    blocks = []
    for o in outcomes:
        counts = sorted(set(scenario.requests_per_level))
        where = (f"{'/'.join(map(str, counts))} requests per level, {scenario.client.value}, job {o.job}" if o.job
                 else f"read from {o.source}")
        title = f"{o.label}: {o.endpoint}, {scenario.traffic} ({scenario.isl} in / {scenario.osl} out), {where}"
        block = render_results(title, o.results, o.warnings, o.routing, slo)
        if o.problem:
            block += f"\n\nthe job did not succeed:\n{o.problem}"
        blocks.append(block)
    if ab is not None:
        blocks.append(render_ab(ab))
    if comparison is not None:
        blocks.append(render_comparison(comparison["rows"], comparison["assumptions"]))
    print("\n\n".join(blocks))
