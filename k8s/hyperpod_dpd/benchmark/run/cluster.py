"""Running the benchmark Job on the cluster: apply, wait with progress, collect the results from the log, clean up.

Reuses ``verify``'s seams: :class:`~hyperpod_dpd.clients.kube.KubeApi` reads pods and logs (and maps API
errors to one-line messages), :class:`~hyperpod_dpd.clients.wait.Waiter` polls with an injectable clock.
The Job and ServiceAccount writes are :class:`~hyperpod_dpd.clients.benchmark_kube.BenchmarkKube`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hyperpod_dpd.benchmark.run.job import BENCHMARK_CONTAINER, PUBLISH_CONTAINER, RESULTS_MARK, UPLOAD_FAILED
from hyperpod_dpd.clients.benchmark_kube import BenchmarkKube
from hyperpod_dpd.clients.checks import Check, failed, passed
from hyperpod_dpd.clients.kube import JsonDict, KubeError
from hyperpod_dpd.clients.wait import Waiter

JOB = "benchmark job"
JOB_NAME_LABEL = "job-name"  # set by the Job controller on its pods
FETCH_CONTAINER = "fetch-tokenizer"
MARK = re.compile(rf"^{re.escape(RESULTS_MARK)} "
                  r"(?:file=(?P<file>\S+)|(?P<log>log)|exit=(?P<exit>\d+)|(?P<end>end))\s*$")
TAIL_LINES = 30
EXIT_MEANINGS = {UPLOAD_FAILED: "the upload to S3 failed (check the role may write the results prefix, or pass "
                                "--no-upload)",
                 97: "pip could not install the benchmark client (the pod needs PyPI egress or --pip-index-url, or "
                     "pass an --image that has it)",
                 98: "the benchmark client never ran"}


@dataclass(frozen=True)
class JobLog:
    """What the publish container printed: the result files, the client's exit code and its log tail."""

    files: Mapping[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    log_tail: str = ""


def parse_job_log(text: str) -> JobLog:
    """Split the publish container's log on its marker lines."""
    files: dict[str, str] = {}
    tail: list[str] = []
    exit_code: int | None = None
    current: list[str] | None = None
    for line in text.splitlines():
        mark = MARK.match(line)
        if mark is None:
            if current is not None:
                current.append(line)
            continue
        if mark["file"]:
            current = []
            files[mark["file"]] = ""
            name = mark["file"]
        elif mark["log"]:
            current = tail
            name = ""
        elif mark["end"]:
            if current is not None and current is not tail:
                files[name] = "\n".join(current)
            current = None
        elif mark["exit"]:
            exit_code = int(mark["exit"])
    return JobLog(files=files, exit_code=exit_code, log_tail="\n".join(tail))


def _condition(job: JsonDict, kind: str) -> JsonDict | None:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            found: JsonDict = condition
            return found
    return None


STUCK_REASONS = {"ImagePullBackOff": "the image cannot be pulled: check --image and the node's egress",
                 "ErrImagePull": "the image cannot be pulled: check --image and the node's egress",
                 "InvalidImageName": "the image name is invalid: check --image",
                 "CrashLoopBackOff": "the container keeps crashing: see its log",
                 "CreateContainerConfigError": "the container cannot be configured"}
UNSCHEDULABLE_SECONDS = 300.0  # Pending this long with an unschedulable reason ends the run


def stuck_reason(pod: JsonDict) -> str | None:
    """Why the pod can never finish on its own (an image it cannot pull, a crash loop), or None."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            message = f": {waiting['message']}" if waiting.get("message") else ""
            return (f"{container.get('name')}: {waiting['reason']}{message} "
                    f"({STUCK_REASONS[waiting['reason']]})")
    return None


def unschedulable_reason(pod: JsonDict) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "Unschedulable")
    return None


def pod_progress(pod: JsonDict) -> str:
    """``fetching the tokenizer``, ``benchmark running``, ``publishing`` or why the pod is stuck."""
    status = pod.get("status") or {}
    unschedulable = unschedulable_reason(pod)
    if unschedulable is not None:
        return f"unschedulable: {unschedulable}"
    stuck = stuck_reason(pod)
    if stuck is not None:
        return stuck
    steps = {FETCH_CONTAINER: "fetching the tokenizer from S3", BENCHMARK_CONTAINER: "benchmark running"}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        state = container.get("state") or {}
        if "running" in state:
            return steps.get(str(container.get("name")), "publishing the results")
        if "terminated" in state and (state["terminated"].get("exitCode") or 0) != 0:
            return f"{container.get('name')} exited {state['terminated'].get('exitCode')}"
    return str(status.get("phase") or "Pending")


def job_check(kube: BenchmarkKube, namespace: str, name: str, *, pending_for: float = 0.0) -> Check:
    """Settled once the Job completed or failed, or its pod can never run (``pending_for`` seconds
    unschedulable past :data:`UNSCHEDULABLE_SECONDS`, an image it cannot pull, a crash loop); until
    then the pod's step is the detail."""
    try:
        job = kube.job(namespace, name)
        pods = kube.pods(namespace, f"{JOB_NAME_LABEL}={name}")
    except KubeError as err:
        return failed(JOB, str(err))
    if job is None:
        return failed(JOB, f"job {namespace}/{name} is gone (deleted, or removed by its TTL)")
    if _condition(job, "Complete"):
        return passed(JOB, f"job {name} completed")
    failure = _condition(job, "Failed")
    if failure:
        return failed(JOB, f"job {name} failed: {failure.get('reason', '')} {failure.get('message', '')}".strip())
    if pods:
        stuck = stuck_reason(pods[0])
        if stuck is not None:
            return failed(JOB, f"{name}: {stuck}")
        unschedulable = unschedulable_reason(pods[0])
        if unschedulable is not None and pending_for >= UNSCHEDULABLE_SECONDS:
            return failed(JOB, f"{name}: unschedulable for {pending_for:.0f}s: {unschedulable} (pass "
                               "--node-selector K=V for nodes with room, or '' for any non-HyperPod node)")
    step = pod_progress(pods[0]) if pods else "waiting for the pod"
    return failed(JOB, f"{name}: {step}", settled=False)


@dataclass(frozen=True)
class JobRun:
    """One finished (or abandoned) benchmark Job: its last check, and what its log held."""

    name: str
    namespace: str
    check: Check
    log: JobLog
    diagnostics: str = ""

    @property
    def succeeded(self) -> bool:
        return self.check.ok and self.log.exit_code == 0


def _tail(text: str, lines: int = TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def collect(kube: BenchmarkKube, namespace: str, name: str) -> tuple[JobLog, str]:
    """The publish container's log, parsed; when it never ran, the last lines of the step that failed."""
    pods = kube.pods(namespace, f"{JOB_NAME_LABEL}={name}")
    if not pods:
        return JobLog(), f"no pod left for job {name}"
    pod = pods[0]["metadata"]["name"]
    status = pods[0].get("status") or {}
    started = {c.get("name") for c in status.get("containerStatuses") or []
               if "running" in (c.get("state") or {}) or "terminated" in (c.get("state") or {})}
    if PUBLISH_CONTAINER in started:
        return parse_job_log(kube.pod_log(namespace, pod, PUBLISH_CONTAINER)), ""
    for container in status.get("initContainerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        if terminated and terminated.get("exitCode", 0) != 0:
            text = kube.pod_log(namespace, pod, str(container.get("name")))
            return JobLog(), f"{container.get('name')} exited {terminated.get('exitCode')}:\n{_tail(text)}"
    return JobLog(), f"pod {pod}: {pod_progress(pods[0])}"


def benchmark_log(kube: BenchmarkKube, namespace: str, name: str) -> str:
    """The benchmark container's log so far ('' before it starts)."""
    pods = kube.pods(namespace, f"{JOB_NAME_LABEL}={name}")
    if not pods:
        return ""
    statuses = (pods[0].get("status") or {}).get("initContainerStatuses") or []
    started = any(c.get("name") == BENCHMARK_CONTAINER and ("running" in (c.get("state") or {}) or "terminated" in (
        c.get("state") or {})) for c in statuses)
    return kube.pod_log(namespace, pods[0]["metadata"]["name"], BENCHMARK_CONTAINER) if started else ""


def run_job(kube: BenchmarkKube, manifests: Sequence[JsonDict], *, waiter: Waiter, keep: bool = False,
            on_poll: Callable[[str], None] | None = None) -> JobRun:
    """Apply the ServiceAccount and Job, wait for the Job, read its results, and delete it unless ``keep``.

    ``on_poll`` gets the benchmark container's log at every poll (to snapshot counters between
    levels). A Job that times out or can never run is deleted too, so it stops loading the endpoint.
    """
    (job,) = [m for m in manifests if m["kind"] == "Job"]
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    for account in (m for m in manifests if m["kind"] == "ServiceAccount"):
        kube.create_service_account(namespace, account)
    kube.create_job(namespace, job)
    pending_since: list[float] = []

    def poll() -> Check:
        pods = kube.pods(namespace, f"{JOB_NAME_LABEL}={name}")
        if pods and unschedulable_reason(pods[0]) is not None:
            pending_since[:] = pending_since or [waiter.clock()]
        else:
            pending_since.clear()
        check = job_check(kube, namespace, name,
                          pending_for=waiter.clock() - pending_since[0] if pending_since else 0.0)
        if on_poll is not None and not check.settled:
            on_poll(benchmark_log(kube, namespace, name))
        return check

    try:
        (check,), timed_out = waiter.run([poll])
        log, diagnostics = collect(kube, namespace, name)
    finally:
        if not keep:
            kube.delete_job(namespace, name)
    if timed_out:
        diagnostics = "\n".join(filter(None, [diagnostics, "the Job was deleted, so it stops loading the endpoint"
                                              if not keep else "the Job was kept (--keep)"]))
    if log.exit_code in EXIT_MEANINGS:
        diagnostics = "\n".join(filter(None, [EXIT_MEANINGS[log.exit_code], diagnostics]))
    return JobRun(name=name, namespace=namespace, check=check, log=log, diagnostics=diagnostics)
