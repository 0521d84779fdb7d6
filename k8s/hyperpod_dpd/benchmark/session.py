"""The ``bench`` workflow: from a :class:`BenchRequest` to a :class:`Report`, on the cluster or from results folders.

``cli/bench.py`` parses the arguments into a request (:mod:`hyperpod_dpd.benchmark.request`) and prints what
comes back; everything between (the traffic and its routing checks, the deployed stack read, the names the Job
uses, RBAC, the Jobs, the counters, the trust warnings, the comparisons) happens here. The live systems come in
as one :class:`Seams` value, so that tests pass their own instead of patching module globals. Progress and notes
go to standard error, as the CLI's do.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hyperpod_dpd.benchmark.proof.disaggregation import (
    MIN_FRACTION,
    LevelDisaggregation,
    LevelSnapshots,
    MetricsSources,
    RouterEstimates,
    kept_local,
    read_counters,
)
from hyperpod_dpd.benchmark.proof.proof import PROOF_FILE, RunProof, folder_proof, snapshots_proof
from hyperpod_dpd.benchmark.proof.trust import (
    Trust,
    TrustWarning,
    trust_warnings,
    twin_identity_warnings,
    unchecked_warnings,
)
from hyperpod_dpd.benchmark.report.capacity import Slo
from hyperpod_dpd.benchmark.report.economics import layouts, served
from hyperpod_dpd.benchmark.report.prediction import AdviceLike, compare, predict
from hyperpod_dpd.benchmark.report.report import Comparison, Outcome, Report
from hyperpod_dpd.benchmark.request import BenchRequest
from hyperpod_dpd.benchmark.run.client import DEFAULT_CLIENT, Client
from hyperpod_dpd.benchmark.run.cluster import JobLog, run_job
from hyperpod_dpd.benchmark.run.job import (
    QUIET_SECONDS,
    UPLOAD_MANIFEST,
    JobOptions,
    deadline_seconds,
    job_name,
    render_benchmark_job,
)
from hyperpod_dpd.benchmark.run.levels import ResultsError
from hyperpod_dpd.benchmark.run.readiness import (
    api_base_of,
    missing_endpoints,
    needed_permissions,
    permission_problems,
    served_model,
)
from hyperpod_dpd.benchmark.run.results import BenchmarkResults, collect, read_files
from hyperpod_dpd.benchmark.run.route import RoutePath, default_isl, isl_for_model, path_problems, route_problems
from hyperpod_dpd.benchmark.run.scenario import Scenario
from hyperpod_dpd.benchmark.run.target import BenchmarkTarget, S3Location
from hyperpod_dpd.benchmark.run.twin_identity import IdentityDifference, identity_differences
from hyperpod_dpd.benchmark.run.uploaded import (
    UNREADABLE,
    own_files,
    result_files,
    unreadable_reason,
    uploaded_folder,
    write_uploaded,
)
from hyperpod_dpd.charts.aggregated import aggregated_spec, layout_identity, twin_layout_identity
from hyperpod_dpd.clients.aws import read_stack
from hyperpod_dpd.clients.benchmark_kube import BenchmarkKube
from hyperpod_dpd.clients.kube import KubeError
from hyperpod_dpd.clients.seams import REAL, Seams
from hyperpod_dpd.clients.wait import Progress, Waiter
from hyperpod_dpd.contracts.bench_job import RESULTS_PREFIX
from hyperpod_dpd.contracts.stack_outputs import GUESSED, OPTION, STACK, DeployedStack, Resolved, guessed_note
from hyperpod_dpd.errors import SpecError, UsageError, raise_if_any
from hyperpod_dpd.load_point import Load
from hyperpod_dpd.spec import DpdSpec

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

DPD, AGGREGATED = "dpd", "aggregated"
COUNTERS = {DPD: "router and decoder", AGGREGATED: "twin's router and engine"}  # whose counters each run reads
FOLDER_OPTION = {DPD: "--results-dir", AGGREGATED: "--aggregated-results-dir"}  # what re-reads each run's folder
TRAFFIC = re.compile(r"^D\((\d+),(\d+)\)$")


def _predict(spec: DpdSpec, scenario: Scenario) -> AdviceLike:
    return predict(spec, scenario, baseline_nodes=1)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The Jobs a request runs: the traffic, the endpoints, the pod's options, and the names used and why."""

    request: BenchRequest
    scenario: Scenario
    targets: list[tuple[str, BenchmarkTarget]]
    options: JobOptions
    names: list[Resolved]
    deployed: DeployedStack | None

    def manifests(self) -> dict[str, str]:
        """Each endpoint's Job and ServiceAccount as one YAML file, by file name."""
        return {f"{target.namespace}-{job_name(target, self.options)}.k8s.yaml": yaml.safe_dump_all(
            render_benchmark_job(target, self.scenario, self.options), sort_keys=False, width=1000)
            for _, target in self.targets}


def run(request: BenchRequest, *, seams: Seams = REAL) -> Report:
    """Report the request's results folders (``runs.results_dirs``), else plan the Jobs and run them on the cluster.

    Bad options are a :class:`SpecError`; what stops the run (no cluster, missing RBAC, an endpoint or
    folder that is not there, a stack that cannot be read) a :class:`UsageError`.
    """
    spec, runs, buyer = request.spec, request.runs, request.buyer
    priced = layouts(spec, price_per_node_hour=buyer.price_per_node_hour)
    folder, twins = (runs.results_dirs or ("",))[0], runs.aggregated_results_dirs
    if folder:
        outcomes = _from_directories(request, folder, twins[0] if twins else None)
        scenario = _scenario_of(outcomes[0].results)
        _add_repeated_directories(request, outcomes)
    else:
        planned = plan(request, seams=seams)
        note = guessed_note(planned.names)
        if note and not request.quiet:
            print(note, file=sys.stderr)
        scenario = planned.scenario
        outcomes = _on_cluster(planned, seams=seams)
        for again in range(2, buyer.repeat + 1):  # DPD then the twin each time: the repeats interleave
            job = dataclasses.replace(request.job, run_id=f"{planned.options.run_id}-r{again}")
            repeated = plan(dataclasses.replace(request, job=job), seams=seams)
            _merge_repeat(outcomes, _on_cluster(repeated, seams=seams))
    priced = (served(priced[0], counted_pods(outcomes[0].routing)), priced[1])
    comparison, prediction_note = None, None
    if runs.compare:
        comparison = _comparison(spec, scenario, outcomes, seams=seams)
    elif buyer.report_dir:  # the report shows the advisor beside every level when it can, and says why not
        try:
            comparison = _comparison(spec, scenario, outcomes, seams=seams)
        except UsageError as err:
            prediction_note = f"no prediction: {str(err).replace('--compare', 'the report')}"
    # What the run measured, recorded so that advise --calibrate can refuse another model or instance type.
    identity = {"model": spec.model.name, "instance_type": spec.instance_type.api_name,
                "architecture": request.architecture}
    report = Report(scenario=scenario, outcomes=outcomes, comparison=comparison, slo=_slo(spec), identity=identity,
                    run_layouts=run_layouts(spec), layouts=priced, prediction_note=prediction_note)
    if buyer.report_dir:
        written = report.write(Path(buyer.report_dir))
        if not request.quiet:
            print(f"report: {', '.join(str(path) for path in written)}", file=sys.stderr)
    return report


# The counters' role names, as the spec's layout names them.
SPEC_ROLES = {"decoder": "decode", "prefiller": "prefill"}


def counted_pods(routing: Mapping[Load, LevelDisaggregation] | None) -> dict[str, int]:
    """The most pods of each role any level's counters read serving, by the spec's role name (B8)."""
    counted: dict[str, int] = {}
    for seen in (routing or {}).values():
        for role, count in seen.serving_pods.items():
            name = SPEC_ROLES[role]
            counted[name] = max(counted.get(name, 0), count)
    return counted


def run_layouts(spec: DpdSpec) -> dict[str, dict[str, Any]]:
    """Each run's ``layout`` in ``bench --json``: the DPD endpoint's and its twin's, as calibration compares them."""
    return {DPD: layout_identity(spec), AGGREGATED: twin_layout_identity(spec)}


def _merge_repeat(outcomes: list[Outcome], again: list[Outcome]) -> None:
    """Another run of the same levels, kept beside the first (its warnings and failures count as the first's)."""
    for first, other in zip(outcomes, again, strict=True):
        first.repeats.append(other.results)
        first.repeat_routing.append(other.routing)
        first.repeat_copies.append((other.files, other.proof))
        run = len(first.runs)  # this repeat's number, so the merged warnings say which run they are of
        first.warnings += [dataclasses.replace(w, message=f"(run {run}) {w.message}") for w in other.warnings]
        first.problem = "\n".join(filter(None, [first.problem, other.problem]))


def _add_repeated_directories(request: BenchRequest, outcomes: list[Outcome]) -> None:
    """``--results-dir`` given again: each further folder (and its twin's) is a repeat of the first's levels."""
    extra, twins = request.runs.results_dirs[1:], request.runs.aggregated_results_dirs[1:]
    if request.runs.aggregated_results_dirs and len(twins) != len(extra):
        raise UsageError(f"{len(extra) + 1} --results-dir but {len(twins) + 1} --aggregated-results-dir: a repeat "
                         "needs both endpoints' folders. Fix: give each endpoint's folder once per repeat")
    first = _scenario_of(outcomes[0].results)
    for index, folder in enumerate(extra):
        again = _from_directories(request, folder, twins[index] if twins else None)
        mine = _scenario_of(again[0].results)
        if (mine.isl, mine.osl, set(mine.loads)) != (first.isl, first.osl, set(first.loads)):
            raise UsageError(f"{folder} ran {mine.traffic} at {mine.levels_text()}, not the first --results-dir's "
                             f"{first.traffic} at {first.levels_text()}: a repeat runs the same levels. Fix: pass "
                             "folders of the same bench invocation")
        _merge_repeat(outcomes[:len(again)], again)


def plan(request: BenchRequest, *, seams: Seams = REAL) -> Plan:
    """The scenario asked for, the endpoints it targets and the Job's options, with the names they use."""
    scenario = _traffic(request)
    deployed = read_stack(request.deployed, seams.aws_clients)
    targets = _targets(request, deployed)
    options = _options(request, targets[0][1].tokenizer, deployed, seams=seams)
    names = _names(request, targets[0][1], options, deployed)
    return Plan(request=request, scenario=scenario, targets=targets, options=options, names=names,
                deployed=deployed)


def _traffic(request: BenchRequest) -> Scenario:
    """The scenario asked for, refused (exit 2) when the spec could not serve or route it as ``path`` says."""
    spec, traffic = request.spec, request.traffic
    threshold, path, client = spec.routing.threshold, traffic.path, traffic.client
    isl = traffic.isl if traffic.isl is not None else default_isl(threshold, path, client) or 1
    raise_if_any(route_problems(isl=isl, osl=traffic.osl, path=path, threshold=threshold,
                                max_model_len=spec.max_model_len, client=client))
    rates = traffic.request_rates
    return Scenario(isl=isl, osl=traffic.osl, requests=traffic.requests, max_seconds=traffic.max_seconds,
                    client=client, prefix_share=traffic.prefix_share, request_rates=rates,
                    concurrency=() if rates else traffic.concurrency)


def _scenario_of(results: BenchmarkResults) -> Scenario:
    if not results.levels:
        raise UsageError("--results-dir holds no result files (genai-bench's *_num_concurrency_*_time_*s.json "
                         "or the Job's aiperf_rate_*.json)")
    match = TRAFFIC.match(results.levels[0].scenario)
    if match is None:
        raise UsageError(f"the results use traffic scenario {results.levels[0].scenario!r}; only fixed "
                         "lengths D(isl,osl) can be checked and compared")
    loads = results.loads
    clients = {level.client for level in results.levels if level.client is not None}
    return Scenario(isl=int(match[1]), osl=int(match[2]), client=Client(clients.pop()) if len(clients) == 1
                    else DEFAULT_CLIENT,
                    concurrency=tuple(load.concurrency for load in loads if load.concurrency is not None),
                    request_rates=tuple(load.rate for load in loads if load.rate is not None))


def _from_directories(request: BenchRequest, results_dir: str, aggregated_results_dir: str | None) -> list[Outcome]:
    spec = request.spec
    folders = [(DPD, spec.name, results_dir)]
    if aggregated_results_dir:
        folders.append((AGGREGATED, f"{spec.name}-agg", aggregated_results_dir))
    outcomes = []
    for label, endpoint, folder in folders:
        path = Path(folder)
        if not path.is_dir():
            raise UsageError(f"{folder}: not a folder; pass genai-bench's <experiment-base-dir>/<folder> or the "
                             "Job's run folder")
        try:
            # A folder copied down from S3 holds its run's upload manifest: only the files it names are the run's
            # (the counters are written beside them after the upload).
            files, ignored = own_files(read_files(path, also=(UPLOAD_MANIFEST,)), keep=(PROOF_FILE,))
            # As a live run reads its Job's files: a cut file's level is reported not run, with why, and the
            # others are reported; two files of one level are refused (DuplicateLevel), naming both.
            results = collect(files, tolerant=True)
        except (ResultsError, OSError) as err:
            raise UsageError(f"{folder}: {err}") from None
        if ignored and not request.quiet:
            print(f"{folder}: {ignored}", file=sys.stderr)
        if not results.levels and results.unreadable:
            raise UsageError(f"{folder}: no result file could be read: {'; '.join(results.unreadable)}")
        _refuse_other_endpoint(folder, api_base_of(files), endpoint, spec.namespace)
        scenario = _scenario_of(results)
        warnings = trust_warnings(results, scenario)
        proof, why = folder_proof(files, endpoint=endpoint)
        if why and not request.quiet:
            print(f"{folder}: {why}", file=sys.stderr)
        routing, server = None, None
        if proof is None:  # the client's files alone: no level is verified against the servers
            warnings += unchecked_warnings(results, counters_file=PROOF_FILE, why=why, whose=COUNTERS[label])
            warnings += _threshold_warnings(spec, scenario, results)
        elif label == AGGREGATED:  # the twin's own counters: its clock, request counts and restarts, as live
            server = proof.routing()
            warnings += proof.twin_warnings(results)
        else:  # the live run's own counters: its verdicts again, from the same server figures
            routing = proof.routing()
            warnings += proof.warnings(results, isl=scenario.isl, threshold=spec.routing.threshold)
        outcomes.append(Outcome(label, endpoint, results, warnings, source=folder, files=files, proof=proof,
                                proof_note=why or "", routing=routing, server=server))
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


def _threshold_warnings(spec: DpdSpec, scenario: Scenario, results: BenchmarkResults) -> list[TrustWarning]:
    """A results folder's input length that the router would not (all) disaggregate: by the shipped
    prompt lengths, or by the prompt tokens the server counted with the model's own tokenizer."""
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


def _targets(request: BenchRequest, deployed: DeployedStack | None) -> list[tuple[str, BenchmarkTarget]]:
    spec, job, namespace, region = request.spec, request.job, request.job.namespace, request.deployed.region
    tokenizer = S3Location.parse(job.tokenizer_s3, field="--tokenizer-s3", region=region) \
        if job.tokenizer_s3 else None
    if deployed is not None:  # the stack's names over the spec's
        endpoint = deployed.endpoint(spec.name)
        targets = [(label, BenchmarkTarget.for_deployed(spec, endpoint, twin=label == AGGREGATED,
                                                        namespace=namespace, tokenizer=tokenizer))
                   for label in ([DPD, AGGREGATED] if request.runs.aggregated else [DPD])]
    else:
        dpd = BenchmarkTarget.for_spec(spec, namespace=namespace, tokenizer=tokenizer, region=region)
        targets = [(DPD, dpd)]
        if request.runs.aggregated:
            twin = BenchmarkTarget.for_spec(aggregated_spec(spec), namespace=namespace, tokenizer=dpd.tokenizer,
                                            twin=True)
            targets.append((AGGREGATED, twin))
    # vLLM answers 404 to any other model: the name is the spec's --served-model-name when it sets one.
    return [(label, dataclasses.replace(target, served_model=served_model(spec))) for label, target in targets]


def _options(request: BenchRequest, tokenizer: S3Location, deployed: DeployedStack | None, *,
             seams: Seams) -> JobOptions:
    job = request.job
    service_account, role_arn, node_selector = job.service_account, job.role_arn, job.node_selector
    if deployed is not None:  # the stack's ServiceAccount, its role and its system nodes, unless given
        endpoint = deployed.endpoint(request.spec.name)
        service_account = service_account or endpoint.benchmark_service_account
        role_arn = role_arn or endpoint.benchmark_role_arn
        if node_selector is None and deployed.system_node_selector is not None:
            node_selector = dict(deployed.system_node_selector)
    results = None
    if job.results_s3:
        results = S3Location.parse(job.results_s3, field="--results-s3", region=request.deployed.region)
    elif job.upload:
        # The stack's benchmark role may write here (the model bucket's benchmarks/ prefix).
        results = S3Location(bucket=tokenizer.bucket, prefix=RESULTS_PREFIX, region=tokenizer.region)
    given: dict[str, Any] = {
        "image": job.image, "genai_bench_version": job.genai_bench_version,
        "aiperf_version": job.aiperf_version, "aws_cli_image": job.aws_cli_image,
        "pip_index_url": job.pip_index_url,
        "service_account": service_account, "role_arn": role_arn, "node_selector": node_selector,
        "results": results}
    run_id = job.run_id or time.strftime("%Y%m%d-%H%M%S", seams.now())
    # The pod pauses between levels long enough for two polls, so bench snapshots the counters there.
    quiet = max(QUIET_SECONDS, math.ceil(2 * request.cluster.poll_interval) + 10)
    return JobOptions(run_id=run_id, quiet_seconds=quiet,
                      **{key: value for key, value in given.items() if value is not None})


def _names(request: BenchRequest, target: BenchmarkTarget, options: JobOptions,
           deployed: DeployedStack | None) -> list[Resolved]:
    """Which endpoint, bucket, ServiceAccount and nodes the Job uses, and where each name came from."""
    job = request.job
    given = {"namespace": job.namespace, "tokenizer": job.tokenizer_s3,
             "service account": job.service_account, "role": job.role_arn, "nodes": job.node_selector}

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


def _on_cluster(planned: Plan, *, seams: Seams) -> list[Outcome]:
    request, scenario, options, targets = planned.request, planned.scenario, planned.options, planned.targets
    spec, cluster, path = request.spec, request.cluster, request.traffic.path
    manifests = [(label, target, render_benchmark_job(target, scenario, options)) for label, target in targets]
    try:
        kube = seams.benchmark_kube(cluster.kube_context, cluster.kubeconfig)
        missing = {t.namespace for _, t in targets
                   if kube.service_account(t.namespace, options.service_account) is None}
        raise_if_any(permission_problems(lambda p: kube.allowed(p.verb, p.resource, p.namespace, group=p.group,
                                                                subresource=p.subresource),
                                         needed_permissions(targets, spec, missing_accounts=missing)))
        raise_if_any(missing_endpoints(kube, targets, namespace=spec.namespace))
    except KubeError as err:
        raise UsageError(str(err)) from None
    timeout = cluster.timeout if cluster.timeout is not None else \
        deadline_seconds(scenario, options.quiet_seconds) + 300
    outcomes, s3 = [], _s3_clients(request, seams)
    for label, target, objects in manifests:
        differences: list[IdentityDifference] = []
        # Only the DPD endpoint has a router that disaggregates; the twin's counters give its TTFT clock and its
        # request counts (its path is not in question).
        sources, unread = (MetricsSources.for_spec(spec), "") if label == DPD else _twin_sources(kube, spec, target)
        snapshots = LevelSnapshots(read=functools.partial(read_counters, kube, sources)) \
            if sources is not None else None
        name = job_name(target, options)
        if not request.quiet:
            print(f"benchmarking {target.namespace}/{target.name} with job {name} ({scenario.traffic}, "
                  f"{scenario.levels_text()}, {scenario.client.value})", file=sys.stderr)
        waiter = Waiter(timeout=timeout, poll_interval=cluster.poll_interval, clock=seams.clock, sleep=seams.sleep,
                        progress=None if request.quiet else Progress(sys.stderr))
        started = seams.clock()
        try:
            job_run = run_job(kube, objects, waiter=waiter, keep=cluster.keep,
                              on_poll=snapshots.observe if snapshots is not None else None)
            files = _result_files(options, target, job_run.log, s3=s3)
            results = collect(files, expected=scenario.loads, isl=scenario.isl, osl=scenario.osl, tolerant=True)
        except KubeError as err:
            raise UsageError(str(err)) from None
        except ResultsError as err:
            raise UsageError(f"job {name} printed results that cannot be read: {err}") from None
        problem = "" if job_run.succeeded else "\n".join(filter(None, [
            job_run.check.detail, job_run.diagnostics, job_run.log.log_tail]))
        warnings = trust_warnings(results, scenario)
        routing, server, proof = None, None, None
        written_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", seams.now())
        if label == DPD and snapshots is not None and sources is not None:
            proof = snapshots_proof(snapshots, run_id=options.run_id, endpoint=target.name, path=path,
                                    written_at=written_at, loads=scenario.loads, files=files)
            routing = proof.routing()
            estimates = _local_estimates(kube, sources, routing, path,
                                         since_seconds=math.ceil(seams.clock() - started) + 60)
            warnings += proof.warnings(results, isl=scenario.isl, threshold=spec.routing.threshold,
                                       estimates=estimates, osl=scenario.osl, max_model_len=spec.max_model_len)
            _keep_proof(options, target, job_run.log, proof, label=label, s3=s3)
        elif label == AGGREGATED:  # written even when nothing was read, with why: a re-read says the same
            unread = unread or (snapshots.errors[-1] if snapshots is not None and snapshots.errors else "")
            proof = snapshots_proof(snapshots, run_id=options.run_id, endpoint=target.name, path=path,
                                    written_at=written_at, loads=scenario.loads, files=files, unread=unread)
            server = proof.routing()
            warnings += proof.twin_warnings(results)
            _keep_proof(options, target, job_run.log, proof, label=label, s3=s3)
            differences = twin_differences(kube, spec.namespace, targets[0][1].name, target.name)
            warnings += twin_identity_warnings(results, differences)
        if snapshots is not None and snapshots.errors and not request.quiet:
            print(f"reading the {COUNTERS[label]} counters: {snapshots.errors[-1]}", file=sys.stderr)
        outcomes.append(Outcome(label, target.name, results, warnings, job=name, problem=problem, routing=routing,
                                server=server, files=files, proof=proof,
                                identity_differences=differences if label == AGGREGATED else []))
    return outcomes


def twin_differences(kube: BenchmarkKube, namespace: str, endpoint: str, twin: str) -> list[IdentityDifference]:
    """What the twin's InferenceEndpointConfig serves otherwise than the DPD endpoint's (nothing when either
    cannot be read: the twin's pods were found by its selector, so a read error is a note, not a verdict)."""
    try:
        return identity_differences(kube.endpoint_config(namespace, endpoint), kube.endpoint_config(namespace, twin))
    except KubeError as err:
        print(f"cannot compare the twin's model with DPD's: {err}", file=sys.stderr)
        return []


def _twin_sources(kube: BenchmarkKube, spec: DpdSpec, target: BenchmarkTarget) -> tuple[MetricsSources | None, str]:
    """Where the twin's counters are (its router, and its engine pods by the selector its InferenceEndpointConfig's
    status names), or why they cannot be found."""
    twin = aggregated_spec(spec)
    if target.name != twin.name:  # the stack named its twin
        twin = dataclasses.replace(twin, name=target.name)
    try:
        found = kube.endpoint_config(spec.namespace, target.name) or {}
    except KubeError as err:
        return None, str(err)
    selector = (found.get("status") or {}).get("selector")
    if not isinstance(selector, str) or not selector:
        return None, (f"InferenceEndpointConfig {spec.namespace}/{target.name} has no status.selector naming its "
                      "pods (is it deployed?)")
    return MetricsSources.for_twin(twin, selector=selector), ""


def _local_estimates(kube: BenchmarkKube, sources: MetricsSources, routing: Mapping[Load, LevelDisaggregation],
                     path: RoutePath, *, since_seconds: int) -> RouterEstimates | None:
    """The router's own estimates of the prompts it kept local, read once, when a DPD level was not disaggregated."""
    if path is not RoutePath.DPD or not any(seen.fraction is not None and seen.fraction < MIN_FRACTION
                                            for seen in routing.values()):
        return None
    return kept_local(kube, sources, since_seconds=since_seconds)


def _s3_clients(request: BenchRequest, seams: Seams) -> Callable[[str | None], S3Client]:
    """One S3 client per region for the whole run: the results read back and the counters written beside them."""
    made: dict[str | None, S3Client] = {}

    def s3(region: str | None) -> S3Client:
        if region not in made:
            made[region] = seams.aws_clients(region, request.deployed.profile).s3(region)
        return made[region]

    return s3


def _keep_proof(options: JobOptions, target: BenchmarkTarget, log: JobLog, proof: RunProof, *, label: str,
                s3: Callable[[str | None], S3Client]) -> None:
    """The counters beside the results the Job uploaded, so that ``--results-dir`` (the twin's:
    ``--aggregated-results-dir``) on that folder checks them too; a note on stderr (naming the permission and whose
    counters) when S3 refuses, and nothing when the Job uploaded nothing."""
    folder = uploaded_folder(log, results=options.results, endpoint=target.name, run_id=options.run_id)
    if folder is None:
        return
    try:
        write_uploaded(s3(folder.region), folder, PROOF_FILE, proof.to_text())
    except UNREADABLE as err:
        reason = unreadable_reason(err)
        print(f"cannot write the {COUNTERS[label]} counters to {folder.uri}{PROOF_FILE} ({reason}); "
              f"{FOLDER_OPTION[label]} on that folder will report its levels unchecked", file=sys.stderr)


def _result_files(options: JobOptions, target: BenchmarkTarget, log: JobLog, *,
                  s3: Callable[[str | None], S3Client]) -> Mapping[str, str]:
    """The Job's result files: the copy it uploaded to S3 (whole, where the log may have been rotated away),
    else its log's, with a note on stderr saying why."""
    return result_files(log, results=options.results, endpoint=target.name, run_id=options.run_id,
                        s3=s3, note=lambda text: print(text, file=sys.stderr))


def _comparison(spec: DpdSpec, scenario: Scenario, outcomes: list[Outcome], *, seams: Seams) -> Comparison:
    try:
        advice = (seams.predictor or _predict)(spec, scenario)
    except SpecError as err:
        raise UsageError("--compare: the advisor cannot predict this spec and traffic:\n" + "\n".join(
            f"  - {p.render()}" for p in err.problems)) from None
    rows = compare(outcomes[0].results, advice, layout="disaggregated")
    for outcome in outcomes[1:]:
        rows += compare(outcome.results, advice, layout="aggregated")
    return Comparison(rows=rows, assumptions=dict(advice.assumptions))


def _slo(spec: DpdSpec) -> Slo | None:
    """The spec's TTFT and TPOT targets in seconds, for goodput; None when it sets neither."""
    slo = spec.slo
    if slo is None or (slo.ttft_ms is None and slo.tpot_ms is None):
        return None
    return (None if slo.ttft_ms is None else slo.ttft_ms / 1e3, None if slo.tpot_ms is None else slo.tpot_ms / 1e3)
