"""``bench --trace`` on the cluster: the ConfigMap and the replay Job, the counters around each window, the report.

The run is ``bench``'s (:mod:`hyperpod_dpd.benchmark.session` plans the endpoint, the names and the pod's options;
:func:`~hyperpod_dpd.benchmark.run.cluster.run_job` applies and waits; the results come back from S3 or the log), with
the trace's ConfigMap created before the Job and deleted after it (``--keep`` leaves both), and ``create`` and
``delete`` on ``configmaps`` added to the permissions asked for before anything is created. :func:`plan_trace` and
:func:`run_trace` are the whole ``--trace`` workflow: the options a replay refuses, the trace read and windowed, then
the manifests planned or the replay run; ``cli/bench.py`` only parses and prints.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import yaml

from hyperpod_dpd.benchmark import session
from hyperpod_dpd.benchmark.proof.disaggregation import LevelSnapshots, MetricsSources, read_counters
from hyperpod_dpd.benchmark.replay.replay import DEFAULT_SPEEDUP, Replay, plan_replay
from hyperpod_dpd.benchmark.replay.replay_job import render_replay_job, replay_deadline_seconds
from hyperpod_dpd.benchmark.replay.replay_proof import ReplayReport, window_results
from hyperpod_dpd.benchmark.request import BenchRequest, BenchTraffic
from hyperpod_dpd.benchmark.run.cluster import run_job
from hyperpod_dpd.benchmark.run.job import job_name
from hyperpod_dpd.benchmark.run.readiness import (
    Permission,
    missing_endpoints,
    needed_permissions,
    permission_problems,
)
from hyperpod_dpd.benchmark.run.uploaded import result_files
from hyperpod_dpd.clients.kube import KubeError
from hyperpod_dpd.clients.seams import REAL, Seams
from hyperpod_dpd.clients.wait import Progress, Waiter
from hyperpod_dpd.errors import UsageError, raise_if_any
from hyperpod_dpd.traces import DEFAULT_WINDOW_S, read_trace

# A window's records take about 3.7 KB a request and the pod prints every result file into its log, which kubelet
# rotates past 10 MiB (about 2,800 requests); below this, the summaries and the rest of the log still fit.
LOG_SAFE_REQUESTS = 2_000


def log_risk(replay: Replay, *, upload: bool) -> str | None:
    """Why the results may not all come back, when the log is their only copy and the replay outgrows it."""
    if upload or replay.requests <= LOG_SAFE_REQUESTS:
        return None
    return (f"--no-upload with {replay.requests:,} requests: the results come back only through the Job's log, which "
            f"kubelet rotates past 10 MiB (about {LOG_SAFE_REQUESTS:,} requests of aiperf's records), so early windows "
            "may be lost; upload them to S3 (drop --no-upload) or replay a part of the trace")


def manifests(planned: session.Plan, replay: Replay) -> dict[str, str]:
    """The ConfigMap, ServiceAccount and Job as one YAML file, by file name (``--output-dir``)."""
    (_, target), options = planned.targets[0], planned.options
    return {f"{target.namespace}-{job_name(target, options)}.k8s.yaml": yaml.safe_dump_all(
        render_replay_job(target, replay, options), sort_keys=False, width=1000)}


def plan(request: BenchRequest, *, seams: Seams = REAL) -> session.Plan:
    """bench's plan of the endpoint, names and pod options. Its level traffic is not sent: the shortest answer keeps
    that traffic's length check against ``max_model_len`` out of a replay's way."""
    return session.plan(dataclasses.replace(request, traffic=dataclasses.replace(request.traffic, osl=2)),
                        seams=seams)


def run(request: BenchRequest, replay: Replay, *, seams: Seams = REAL) -> ReplayReport:
    """Replay ``replay`` against the request's endpoint; a :class:`UsageError` for what stops the run."""
    planned = plan(request, seams=seams)
    spec, options, cluster = request.spec, planned.options, request.cluster
    (_, target), = planned.targets
    objects = render_replay_job(target, replay, options)
    trace = next(o for o in objects if o["kind"] == "ConfigMap")
    namespace = target.namespace
    try:
        kube = seams.benchmark_kube(cluster.kube_context, cluster.kubeconfig)
        missing = set() if kube.service_account(namespace, options.service_account) is not None else {namespace}
        needed = [*needed_permissions(planned.targets, spec, missing_accounts=missing),
                  Permission("create", "configmaps", namespace), Permission("delete", "configmaps", namespace)]
        raise_if_any(permission_problems(lambda p: kube.allowed(p.verb, p.resource, p.namespace, group=p.group,
                                                                subresource=p.subresource), needed))
        raise_if_any(missing_endpoints(kube, planned.targets, namespace=spec.namespace))
        name = job_name(target, options)
        if (risk := log_risk(replay, upload=request.job.upload)) is not None:
            print(f"warning: {risk}", file=sys.stderr)
        if not request.quiet:
            print(f"replaying {replay.source} against {namespace}/{target.name} with job {name} "
                  f"({replay.requests:,} requests, {len(replay.windows)} windows of {replay.window_s:g} s)",
                  file=sys.stderr)
        timeout = cluster.timeout if cluster.timeout is not None else \
            replay_deadline_seconds(replay, options.quiet_seconds) + 300
        waiter = Waiter(timeout=timeout, poll_interval=cluster.poll_interval, clock=seams.clock, sleep=seams.sleep,
                        progress=None if request.quiet else Progress(sys.stderr))
        snapshots = LevelSnapshots(read=lambda: read_counters(kube, MetricsSources.for_spec(spec)))
        kube.create_config_map(namespace, trace)
        try:
            job_run = run_job(kube, [o for o in objects if o["kind"] != "ConfigMap"], waiter=waiter,
                              keep=cluster.keep, on_poll=snapshots.observe)
        finally:
            if not cluster.keep:
                kube.delete_config_map(namespace, trace["metadata"]["name"])
            else:  # no owner: the Job's TTL takes the Job and its pod, not the ConfigMap
                print(f"kept the trace's ConfigMap {namespace}/{trace['metadata']['name']}: delete it with "
                      f"`kubectl delete configmap {trace['metadata']['name']} -n {namespace}` when done",
                      file=sys.stderr)
    except KubeError as err:
        raise UsageError(str(err)) from None
    files = result_files(job_run.log, results=options.results, endpoint=target.name, run_id=options.run_id,
                         s3=lambda region: seams.aws_clients(region, request.deployed.profile).s3(region),
                         note=lambda text: print(text, file=sys.stderr))
    if snapshots.errors and not request.quiet:
        print(f"reading the router and decoder counters: {snapshots.errors[-1]}", file=sys.stderr)
    problem = "" if job_run.succeeded else "\n".join(filter(None, [
        job_run.check.detail, job_run.diagnostics, job_run.log.log_tail]))
    identity = {"model": spec.model.name, "instance_type": spec.instance_type.api_name,
                "architecture": request.architecture}
    return ReplayReport(endpoint=target.name, replay=replay, job=name, problem=problem, identity=identity,
                        threshold=spec.routing.threshold,
                        windows=window_results(replay, files, snapshots.taken, threshold=spec.routing.threshold))


@dataclass(frozen=True, kw_only=True)
class TraceOptions:
    """The trace ``bench --trace`` replays and how: ``--trace``, ``--trace-format``, ``--trace-speedup`` and
    ``--trace-window``.

    :param format: the trace's format's name. :default: - told by its first line
    """

    path: str
    format: str | None = None
    speedup: float = DEFAULT_SPEEDUP
    window_s: float = DEFAULT_WINDOW_S


@dataclass(frozen=True, kw_only=True)
class ReplayPlan:
    """A replay's plan: bench's plan of the endpoint, names and pod options, and the trace's windows."""

    plan: session.Plan
    replay: Replay

    def manifests(self) -> dict[str, str]:
        """The ConfigMap, ServiceAccount and Job as one YAML file, by file name."""
        return manifests(self.plan, self.replay)


def level_options(request: BenchRequest) -> list[str]:
    """The options of a load-level run that ``request`` sets, which a replay has no use for."""
    traffic, runs, buyer, default = request.traffic, request.runs, request.buyer, BenchTraffic()
    levels = (traffic.concurrency, traffic.request_rates) != (default.concurrency, default.request_rates)
    return [flag for flag, given in (
        ("--concurrency/--request-rate", levels), ("--isl", traffic.isl is not None),
        ("--osl", traffic.osl != default.osl), ("--requests", traffic.requests is not None),
        ("--prefix-share", bool(traffic.prefix_share)),
        ("--client", traffic.client is not default.client), ("--aggregated", runs.aggregated),
        ("--compare", runs.compare),
        ("--results-dir", bool(runs.results_dirs or runs.aggregated_results_dirs)),
        ("--repeat", buyer.repeat > 1), ("--report-dir", buyer.report_dir is not None)) if given]


@contextmanager
def _reading(trace: TraceOptions) -> Iterator[None]:
    """A file that cannot be read is the user's to fix (a :class:`UsageError` naming ``--trace``)."""
    try:
        yield
    except OSError as err:
        raise UsageError(f"--trace {trace.path}: {err.strerror or err}") from None


def _replay_of(request: BenchRequest, trace: TraceOptions) -> Replay:
    conflicts = level_options(request)
    if conflicts:
        raise UsageError(f"--trace replays the trace's own arrivals and lengths with aiperf against the DPD endpoint: "
                         f"drop {', '.join(conflicts)}")
    return plan_replay(read_trace(trace.path, format=trace.format), speedup=trace.speedup, window_s=trace.window_s,
                       max_model_len=request.spec.max_model_len)


def plan_trace(request: BenchRequest, trace: TraceOptions, *,
               seams: Seams = REAL) -> ReplayPlan:
    """``bench --trace --output-dir``: the replay's manifests, running nothing. Raises :class:`UsageError` for a level
    option or an unreadable file, :class:`SpecError` for a trace or options that cannot be replayed."""
    with _reading(trace):
        replay = _replay_of(request, trace)
        return ReplayPlan(plan=plan(request, seams=seams), replay=replay)


def run_trace(request: BenchRequest, trace: TraceOptions, *,
              seams: Seams = REAL) -> ReplayReport:
    """``bench --trace``: the replay run on the cluster, window by window; raises as :func:`plan_trace` does."""
    with _reading(trace):
        return run(request, _replay_of(request, trace), seams=seams)
