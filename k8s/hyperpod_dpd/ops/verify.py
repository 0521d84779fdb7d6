"""``verify``: is the deployed endpoint up? The HyperPod cluster, the InferenceEndpointConfig, the
prefill and decode deployments and the router, each a :class:`Check` that may still be settling.

:func:`run_verify` is the whole command, from a :class:`VerifyRequest` and the live systems in one
:class:`~hyperpod_dpd.clients.seams.Seams`; ``cli/verify.py`` parses the options and prints the rows.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.clients.aws import AWS_ERRORS, AwsClients, AwsUnavailable, describe_error, error_code
from hyperpod_dpd.clients.checks import Check, Status, errored, failed, passed, skipped
from hyperpod_dpd.clients.kube import JsonDict, KubeApi, KubeError
from hyperpod_dpd.clients.seams import Seams
from hyperpod_dpd.clients.wait import Progress, Waiter
from hyperpod_dpd.contracts.operator import (
    OPERATOR_NAMESPACE,
    ROLE_LABEL,
    ROUTER_PORT,
    role_deployment,
    router_deployment,
    router_service,
)
from hyperpod_dpd.contracts.stack_defaults import DEFAULT_HYPERPOD_CLUSTER
from hyperpod_dpd.contracts.stack_outputs import GUESSED, OPTION, STACK, DeployedStack, Resolved, guessed_note
from hyperpod_dpd.errors import SpecError, UsageError
from hyperpod_dpd.ops.crd_diff import check_live_crd
from hyperpod_dpd.ops.exposure import exposure_checks
from hyperpod_dpd.ops.preflight import CDK_DEFAULT_CLUSTER, bucket_region
from hyperpod_dpd.ops.restart_drill import RESTART_DRILL, run_restart_drill
from hyperpod_dpd.ops.rule_inputs import amp_input_checks
from hyperpod_dpd.ops.smoke import CORRECTNESS, INPUTS, LONG, SHORT, run_correctness, run_smoke
from hyperpod_dpd.spec import DpdSpec

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient

DEFAULT_TIMEOUT = 900
DEFAULT_POLL = 15
CLUSTER = "hyperpod cluster"
ENDPOINT = "endpoint config"
ROUTER = "router"
DPD_READY_MESSAGE = "DPD prefill and decode deployments are ready"

_CLUSTER_SETTLING = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
_IEC_FAILED = frozenset({"DeploymentFailed", "DeletionFailed"})
_IEC_DELETING = frozenset({"DeletionPending", "DeletionInProgress", "DeletionComplete"})

HINTS = {
    CLUSTER: "watch `aws sagemaker describe-cluster --cluster-name <cluster>`; nodes run deep health checks "
             "before they join",
    ENDPOINT: "`kubectl describe inferenceendpointconfig <name> -n <namespace>` and the operator's logs in "
              "hyperpod-inference-system",
    "prefill": "a pod stuck at 2/3 Ready is vLLM still loading the model (5-10 min for a 70B model from a cold "
               "S3 fetch): `kubectl logs <pod> -c prefill-<name> | grep -i 'engine\\|loading'`",
    "decode": "a pod stuck at 2/3 Ready is vLLM still loading the model (5-10 min for a 70B model from a cold "
              "S3 fetch): `kubectl logs <pod> -c decode-<name> | grep -i 'engine\\|loading'`",
    ROUTER: "`kubectl get pods -n hyperpod-inference-system` and the router's logs (-c router-container)",
}


def hint_for(check: Check, spec: DpdSpec | None = None) -> str:
    """The next troubleshooting step for a check that did not get ready, with the spec's names filled in."""
    hint = HINTS.get(check.name, "")
    if spec is not None:
        hint = hint.replace("<name>", spec.name).replace("<namespace>", spec.namespace)
    return hint


# --- the HyperPod cluster ------------------------------------------------------------------------


def nodes_needed_now(spec: DpdSpec) -> int:
    """Nodes of ``spec.instance_type`` the endpoint needs at its current replica counts."""
    return sum(spec.role_nodes(role, at_scale_limit=False) for _, role in spec.roles())


def find_cluster_name(sagemaker: SageMakerClient, region: str) -> tuple[str | None, Check | None]:
    """The only HyperPod cluster in the region, else the CDK app's default one, else a check saying why not."""
    try:
        names = [summary["ClusterName"]
                 for page in sagemaker.get_paginator("list_clusters").paginate()
                 for summary in page["ClusterSummaries"]]
    except AWS_ERRORS as err:
        return None, errored(CLUSTER, describe_error(err, permission="sagemaker:ListClusters"))
    if len(names) == 1:
        return names[0], None
    if CDK_DEFAULT_CLUSTER in names:
        return CDK_DEFAULT_CLUSTER, None
    if not names:
        return None, failed(CLUSTER, f"no HyperPod cluster in {region}: check --region, or deploy the stack")
    return None, skipped(CLUSTER, f"{len(names)} HyperPod clusters in {region} ({', '.join(sorted(names))}): "
                                  "pass --cluster-name")


def check_cluster(sagemaker: SageMakerClient, name: str, spec: DpdSpec, *,
                  instance_groups: tuple[str, ...] = ()) -> Check:
    """The cluster is InService, holds the endpoint's ``instance_groups`` and enough running nodes of its type."""
    try:
        cluster = sagemaker.describe_cluster(ClusterName=name)
        nodes = [node for page in sagemaker.get_paginator("list_cluster_nodes").paginate(ClusterName=name)
                 for node in page["ClusterNodeSummaries"]]
    except AWS_ERRORS as err:
        code = error_code(err)
        if code == "ResourceNotFound" or (code == "ValidationException" and "not found" in str(err).lower()):
            return failed(CLUSTER, f"no HyperPod cluster named {name!r}: check --cluster-name and --region")
        return errored(CLUSTER, describe_error(err, permission="sagemaker:DescribeCluster and ListClusterNodes"))
    status = cluster.get("ClusterStatus", "?")
    groups = _group_lines(cluster.get("InstanceGroups", []), nodes)
    head = f"{name}: {status}"
    if status == "Failed":
        return failed(CLUSTER, "\n".join([f"{head}: {cluster.get('FailureMessage') or 'no failure message'}",
                                          *groups]))
    if status == "Deleting":
        return failed(CLUSTER, "\n".join([f"{head}: the cluster is being deleted", *groups]))
    present = {group.get("InstanceGroupName") for group in cluster.get("InstanceGroups", [])}
    missing = [group for group in instance_groups if group not in present]
    if missing:
        return failed(CLUSTER, "\n".join([f"{head}, but the stack's instance group(s) {', '.join(missing)} are not "
                                          "in it: check --cluster-name, or the stack's update", *groups]))
    instance_type = spec.instance_type.api_name
    running = sum(1 for node in nodes if node.get("InstanceType") == instance_type
                  and node.get("InstanceStatus", {}).get("Status") == "Running")
    needed = nodes_needed_now(spec)
    capacity = f"{running} running {instance_type} node(s), the endpoint needs {needed}"
    if status in _CLUSTER_SETTLING:
        return failed(CLUSTER, "\n".join([f"{head}; {capacity}", *groups]), settled=False)
    if running < needed:
        pending = any(node.get("InstanceType") == instance_type
                      and node.get("InstanceStatus", {}).get("Status") != "Running" for node in nodes)
        return failed(CLUSTER, "\n".join([f"{head} but only {capacity}", *groups]), settled=not pending)
    return passed(CLUSTER, "\n".join([f"{head}; {capacity}", *groups]))


def _group_lines(groups: list[Any], nodes: list[Any]) -> list[str]:
    by_group: dict[str, Counter[str]] = defaultdict(Counter)
    for node in nodes:
        by_group[node.get("InstanceGroupName", "?")][node.get("InstanceStatus", {}).get("Status", "?")] += 1
    lines = []
    for group in groups:
        name = group.get("InstanceGroupName", "?")
        states = ", ".join(f"{count} {state}" for state, count in sorted(by_group.pop(name, Counter()).items()))
        target = group.get("TargetCount", group.get("CurrentCount", "?"))
        lines.append(f"  {name} ({group.get('InstanceType', '?')}): {states or 'no nodes'} of {target} wanted")
    for name, counter in sorted(by_group.items()):
        lines.append(f"  {name}: {', '.join(f'{n} {s}' for s, n in sorted(counter.items()))}")
    return lines


# --- the InferenceEndpointConfig -----------------------------------------------------------------


def _conditions(iec: JsonDict) -> list[str]:
    rows = []
    for condition in (iec.get("status") or {}).get("conditions") or []:
        text = f"{condition.get('type', '?')}={condition.get('status', '?')}"
        reason, message = condition.get("reason"), condition.get("message")
        if reason:
            text += f" ({reason})"
        if message:
            text += f": {message}"
        rows.append(text)
    return rows


def check_endpoint_config(kube: KubeApi, spec: DpdSpec) -> Check:
    """``status.state`` is DeploymentComplete, or a condition says the DPD deployments are ready."""
    try:
        iec = kube.endpoint_config(spec.namespace, spec.name)
    except KubeError as err:
        return errored(ENDPOINT, str(err))
    if iec is None:
        return failed(ENDPOINT, f"InferenceEndpointConfig {spec.namespace}/{spec.name} not found: apply the "
                                "manifests (`hyperpod-dpd synth`) or check the spec's name and namespace")
    status = iec.get("status") or {}
    state = status.get("state") or "no state yet"
    conditions = _conditions(iec)
    lines = [f"state {state}", *(f"  {c}" for c in conditions)]
    ready = any(c.get("message") == DPD_READY_MESSAGE and c.get("status", "True") == "True"
                for c in status.get("conditions") or [])
    if state in _IEC_FAILED:
        return failed(ENDPOINT, "\n".join([*lines, f"  next: {HINTS[ENDPOINT]}"]))
    if state in _IEC_DELETING:
        return failed(ENDPOINT, "\n".join([*lines, "  the endpoint is being deleted"]))
    if state == "DeploymentComplete" or ready:
        return passed(ENDPOINT, "\n".join(lines))
    return failed(ENDPOINT, "\n".join(lines), settled=False)


# --- prefill, decode and the router --------------------------------------------------------------


def _ready_counts(deployment: JsonDict) -> tuple[int, int]:
    wanted = int((deployment.get("spec") or {}).get("replicas", 1) or 0)
    ready = int((deployment.get("status") or {}).get("readyReplicas", 0) or 0)
    return ready, wanted


def describe_pod(pod: JsonDict) -> str:
    """``prefill-x-abc: Running, 2/3 ready (vLLM still loading the model)`` and similar."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    phase = status.get("phase", "?")
    containers = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    total = len(containers) or len((pod.get("spec") or {}).get("containers") or [])
    text = f"{name}: {phase}, {ready}/{total} ready"
    note = _pod_note(status, containers, ready, total)
    return f"{text} ({note})" if note else text


def _pod_note(status: JsonDict, containers: list[JsonDict], ready: int, total: int) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"unschedulable: {condition.get('message', condition.get('reason', ''))}"
    waiting = [(c.get("state") or {}).get("waiting") or {} for c in containers]
    reasons = {w.get("reason") for w in waiting if w}
    if reasons & {"ImagePullBackOff", "ErrImagePull", "InvalidImageName"}:
        return "the image cannot be pulled: check the image name and the nodes' registry access"
    if "CrashLoopBackOff" in reasons:
        return ("a container keeps crashing: `kubectl logs --previous`; EngineDeadError or TimeoutError "
                "means the operator is older than v3.2")
    if "ContainerCreating" in reasons or (not containers and status.get("phase") == "Pending"):
        return ("containers being created; over 10 min: `kubectl describe pod` for 'Failed to pull image' or "
                "'MountVolume.SetUp failed'")
    if total and ready == total - 1 and status.get("phase") == "Running":
        return "vLLM still loading the model: 5-10 min for 70B from a cold S3 fetch"
    return ""


def check_role(kube: KubeApi, spec: DpdSpec, role: str) -> Check:
    """The ``<role>-<name>`` deployment has all its replicas ready; not-ready pods are described."""
    name = role_deployment(spec, role)
    try:
        deployment = kube.deployment(spec.namespace, name)
        pods = [pod for pod in kube.pods(spec.namespace, f"{ROLE_LABEL}={role}")
                if str((pod.get("metadata") or {}).get("name", "")).startswith(f"{name}-")]
    except KubeError as err:
        return errored(role, str(err))
    if deployment is None:
        return failed(role, f"deployment {spec.namespace}/{name} not created yet (the operator creates it "
                            "from the InferenceEndpointConfig)", settled=False)
    ready, wanted = _ready_counts(deployment)
    head = f"deployment {name}: {ready}/{wanted} ready"
    not_ready = [describe_pod(pod) for pod in pods if not _pod_ready(pod)]
    if wanted >= 1 and ready >= wanted:
        return passed(role, f"{head}; {len(pods)} pod(s) labelled {ROLE_LABEL}={role}")
    return failed(role, "\n".join([head, *(f"  {line}" for line in not_ready)]), settled=False)


def _pod_ready(pod: JsonDict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def check_router(kube: KubeApi, spec: DpdSpec) -> Check:
    """The router deployment is ready and its Service exposes port 443."""
    name, service_name = router_deployment(spec), router_service(spec)
    try:
        deployment = kube.deployment(OPERATOR_NAMESPACE, name)
        service = kube.service(OPERATOR_NAMESPACE, service_name)
    except KubeError as err:
        return errored(ROUTER, str(err))
    if deployment is None:
        return failed(ROUTER, f"deployment {OPERATOR_NAMESPACE}/{name} not created yet", settled=False)
    ready, wanted = _ready_counts(deployment)
    head = f"deployment {name}: {ready}/{wanted} ready"
    if service is None:
        return failed(ROUTER, f"{head}; service {service_name} not found", settled=False)
    ports = [int(p.get("port", 0)) for p in (service.get("spec") or {}).get("ports") or []]
    if ROUTER_PORT not in ports:
        return failed(ROUTER, f"{head}; service {service_name} has ports {ports}, not {ROUTER_PORT}")
    if wanted >= 1 and ready >= wanted:
        return passed(ROUTER, f"{head}; service {service_name}:{ROUTER_PORT}")
    return failed(ROUTER, f"{head}; service {service_name}:{ROUTER_PORT}", settled=False)


# --- the KV roles the workers started with -------------------------------------------------------

KV_ROLES = "kv roles"
EXPECTED_PD_ROLE = {"prefill": "sender", "decode": "receiver"}
PD_ROLE_LINE = re.compile(r"'pd_role': '([a-z]+)'")
STARTUP_LOG_BYTES = 8 * 2**20


def check_kv_roles(kube: KubeApi, spec: DpdSpec) -> Check:
    """The prefiller logged ``'pd_role': 'sender'`` and the decoder ``'receiver'`` at startup.

    The docs call this the most discriminating startup signal: without it no KV cache moves and
    the decoder recomputes every prompt. Reads the first 8 MiB of one ready pod's worker container.
    """
    found: dict[str, str] = {}
    try:
        for role, wanted in EXPECTED_PD_ROLE.items():
            pods = [pod for pod in kube.pods(spec.namespace, f"{ROLE_LABEL}={role}")
                    if str((pod.get("metadata") or {}).get("name", "")).startswith(f"{role_deployment(spec, role)}-")
                    and _pod_ready(pod)]
            if not pods:
                return skipped(KV_ROLES, f"no ready {role} pod to read")
            name = pods[0]["metadata"]["name"]
            roles = set(PD_ROLE_LINE.findall(_worker_log(kube, spec, role, name)))
            if not roles:
                return skipped(KV_ROLES, f"no 'pd_role' line in the first {STARTUP_LOG_BYTES // 2**20} MiB of "
                                         f"{name}'s log (rotated?)")
            if roles != {wanted}:
                return failed(KV_ROLES, f"{name} started with pd_role {', '.join(sorted(roles))}, not {wanted}: "
                                        "no KV transfer will happen; check both roles use the same image and "
                                        "PYTHONHASHSEED=0, and the operator is v3.2 or later")
            found[role] = f"{role} {name}: pd_role {wanted}"
    except KubeError as err:
        return errored(KV_ROLES, str(err))
    return passed(KV_ROLES, "; ".join(found.values()))


def _worker_log(kube: KubeApi, spec: DpdSpec, role: str, pod: str) -> str:
    """The worker container is ``<role>-<metadata.name>`` (the troubleshooting page says the endpoint name)."""
    names = [f"{role}-{spec.name}"]
    if spec.endpoint_name and spec.endpoint_name != spec.name:
        names.append(f"{role}-{spec.endpoint_name}")
    for index, container in enumerate(names):
        try:
            return kube.pod_log(spec.namespace, pod, container, limit_bytes=STARTUP_LOG_BYTES)
        except KubeError as err:
            if err.status != 400 or index == len(names) - 1:
                raise
    return ""  # pragma: no cover - the loop returns or raises


# --- all probes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyTargets:
    spec: DpdSpec
    region: str | None  # None: no --region, AWS configuration, stack or bucket named one
    cluster_name: str | None = None
    crd_diff: bool = True  # compare the live CRD with the shipped one (hyperpod_dpd.ops.crd_diff)
    instance_groups: tuple[str, ...] = ()  # from the stack's outputs; each must be in the cluster


def probes(targets: VerifyTargets, *, sagemaker: Callable[[], SageMakerClient] | None,
           kube: KubeApi | None) -> list[Callable[[], Check]]:
    """One probe per row, in table order; the cluster row is resolved once, then re-described."""
    spec = targets.spec
    found: list[Callable[[], Check]] = []
    if sagemaker is not None:
        found.append(_cluster_probe(targets, sagemaker))
    if kube is not None:
        found += [lambda: check_endpoint_config(kube, spec),
                  lambda: check_role(kube, spec, "prefill"),
                  lambda: check_role(kube, spec, "decode"),
                  lambda: check_router(kube, spec)]
        if targets.crd_diff:
            manifest = rendered_manifest(spec, region=targets.region)
            found.append(lambda: check_live_crd(kube, manifest=manifest))
    return found


def rendered_manifest(spec: DpdSpec, *, region: str | None = None) -> JsonDict | None:
    """The InferenceEndpointConfig the chart renders for ``spec``, for the CRD row; None if it cannot be."""
    from hyperpod_dpd.charts.inference_endpoint_config import (  # noqa: PLC0415 - cdk8s is heavy
        render_inference_endpoint_config,
    )
    from hyperpod_dpd.errors import SpecError  # noqa: PLC0415
    from hyperpod_dpd.scaling.shape import with_stand_in_capacities  # noqa: PLC0415

    try:  # the CRD row checks the form: an SLO capacity synth would compute is stood in for
        return render_inference_endpoint_config(with_stand_in_capacities(spec), region=region)
    except SpecError:
        return None


def _cluster_probe(targets: VerifyTargets, sagemaker: Callable[[], SageMakerClient]) -> Callable[[], Check]:
    chosen: list[str] = [targets.cluster_name] if targets.cluster_name else []

    def probe() -> Check:
        if not chosen:
            # A SageMaker client exists only once a region is known; "the region" is never shown in practice.
            name, problem = find_cluster_name(sagemaker(), targets.region or "the region")
            if problem is not None or name is None:
                return problem or skipped(CLUSTER, "no cluster name")
            chosen.append(name)
        return check_cluster(sagemaker(), chosen[0], targets.spec, instance_groups=targets.instance_groups)

    return probe


# --- the workflow ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class VerifyRequest:
    """What ``verify`` was asked for, as values; the other fields are the options of ``hyperpod-dpd verify``.

    :param spec: the checked spec, placed in the stack's namespace when ``deployed`` is given (:func:`as_deployed`).
    :param deployed: what the stack deployed; its names win over the spec's. :default: - no stack
    :param quiet: no progress or notes on standard error (the report is one JSON object). :default: False
    """

    spec: DpdSpec
    deployed: DeployedStack | None = None
    quiet: bool = False
    cluster_name: str | None = None
    region: str | None = None
    profile: str | None = None
    kube_context: str | None = None
    kubeconfig: str | None = None
    wait: bool = True
    timeout: float = DEFAULT_TIMEOUT
    poll_interval: float = DEFAULT_POLL
    crd_diff: bool = True
    smoke: bool = False
    correctness: bool = False
    restart_drill: bool = False
    amp_workspace: str | None = None


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    """Every row in table order, and the region they were checked in (``None``: no region was known)."""

    checks: list[Check]
    region: str | None


def as_deployed(spec: DpdSpec, deployed: DeployedStack | None) -> DpdSpec:
    """The spec in the namespace the stack deployed it to (the stack's router Service must then match)."""
    if deployed is None:
        return spec
    try:
        endpoint = deployed.endpoint(spec.name)
    except SpecError as err:
        raise UsageError("\n".join(["the spec is not an endpoint of the deployed stack:",
                                     *(f"  - {p.render()}" for p in err.problems)])) from None
    placed = dataclasses.replace(spec, namespace=endpoint.namespace)
    if endpoint.router_service != router_service(placed) or endpoint.router_namespace != OPERATOR_NAMESPACE:
        raise UsageError(f"the stack's router Service {endpoint.router_namespace}/{endpoint.router_service} is "
                              f"not the one this version derives ({OPERATOR_NAMESPACE}/{router_service(placed)}): "
                              "use the hyperpod-dpd version that deployed the stack")
    return placed


def _fallback_region(request: VerifyRequest) -> str | None:
    return request.deployed.region if request.deployed is not None else bucket_region(request.spec)


def resolved_names(request: VerifyRequest) -> list[Resolved]:
    """The names verify checks and where each came from (an option, the stack, or guessed from the spec)."""
    spec, deployed = request.spec, request.deployed

    def origin(option: object) -> str:
        return OPTION if option is not None else STACK if deployed is not None else GUESSED

    cluster = request.cluster_name or (deployed.hyperpod_cluster_name if deployed is not None else
                                       f"the only HyperPod cluster in the region, else {DEFAULT_HYPERPOD_CLUSTER}")
    names = [Resolved("hyperpod cluster", cluster, origin(request.cluster_name)),
             Resolved("endpoint", f"{spec.namespace}/{spec.name}", origin(None)),
             Resolved("router", f"{OPERATOR_NAMESPACE}/{router_service(spec)}", origin(None))]
    if deployed is None:  # the region comes from --region or the AWS configuration, groups only from the stack
        return names
    region = request.region or _fallback_region(request) or "none known (pass --region)"
    groups = ", ".join(f"{role} {group}" for role, group in deployed.endpoint(spec.name).instance_groups.items())
    return [Resolved("region", region, origin(request.region)), *names,
            Resolved("instance groups", groups, STACK)]


def run_verify(request: VerifyRequest, seams: Seams) -> VerifyReport:
    """Every row: the cluster and endpoint (polled until ready with ``wait``), the KV roles, who can call the model,
    the rules' inputs and, with ``smoke`` or ``correctness``, the prompts. Notes and progress go to standard error."""
    spec, deployed = request.spec, request.deployed
    fallback = _fallback_region(request)
    leading: list[Check] = []

    region = request.region or fallback
    note = guessed_note(resolved_names(request))
    if note and not request.quiet:
        print(note, file=sys.stderr)
    sagemaker: Callable[[], SageMakerClient] | None = None
    clients: AwsClients | None = None
    try:
        clients = seams.aws_clients(request.region, request.profile, fallback_region=fallback)
        region, sagemaker = clients.region, clients.sagemaker
    except AwsUnavailable as err:
        leading.append(errored(CLUSTER, str(err)))

    kube: KubeApi | None = None
    try:
        kube = seams.kube_api(request.kube_context, request.kubeconfig)
    except KubeError as err:
        leading.append(errored("kubernetes", str(err)))

    waiter = Waiter(timeout=request.timeout, poll_interval=request.poll_interval, clock=seams.clock,
                    sleep=seams.sleep, progress=Progress(sys.stderr) if not request.quiet else None)
    cluster_name = request.cluster_name or (deployed.hyperpod_cluster_name if deployed is not None else None)
    groups = tuple(deployed.endpoint(spec.name).instance_groups.values()) if deployed is not None else ()
    targets = VerifyTargets(spec=spec, region=region, cluster_name=cluster_name, instance_groups=groups,
                            crd_diff=request.crd_diff)
    polled, timed_out = waiter.run(probes(targets, sagemaker=sagemaker, kube=kube), wait=request.wait,
                                   hints=lambda check: hint_for(check, spec))
    checks = [*leading, *polled]
    if timed_out:
        names = ", ".join(check.name for check in timed_out)
        print(f"hyperpod-dpd: timed out after {request.timeout:.0f}s; still not ready: {names}. "
              f"Next: {hint_for(timed_out[0], spec) or 'see the table'}", file=sys.stderr)

    checks.append(_kv_roles(kube, spec, checks))
    checks += exposure_checks(spec, kube=kube, aws=clients)
    workspace = request.amp_workspace or (deployed.amp_workspace_arn if deployed is not None else None)
    checks += amp_input_checks(spec, clients=clients, workspace=workspace, send=seams.amp_send)
    if request.smoke or request.correctness:
        twin = deployed.endpoint(spec.name).aggregated if deployed is not None else None
        checks += _smoke(kube, spec, checks, request.timeout, quiet=request.quiet, clock=seams.clock,
                         correctness=request.correctness,
                         twin_service=twin.router_service if twin is not None else None)
    if request.restart_drill:
        ready = {check.name for check in checks if check.status is Status.PASS}
        if kube is None or not {ENDPOINT, "prefill", "decode", ROUTER} <= ready:
            checks.append(skipped(RESTART_DRILL, "the endpoint is not ready, so no pod was restarted"))
        else:
            if not request.quiet:
                print("restarting one prefill pod, then proving the KV transfer again...", file=sys.stderr)
            checks.append(run_restart_drill(kube, spec, timeout=request.timeout, clock=seams.clock,
                                            sleep=seams.sleep))
    return VerifyReport(checks=checks, region=region)


def _kv_roles(kube: KubeApi | None, spec: DpdSpec, checks: list[Check]) -> Check:
    ready = {check.name for check in checks if check.status is Status.PASS}
    if kube is None or not {"prefill", "decode"} <= ready:
        return skipped(KV_ROLES, _not_checked(kube, checks) or "the prefill and decode pods are not ready")
    return check_kv_roles(kube, spec)


def _not_checked(kube: KubeApi | None, checks: list[Check]) -> str | None:
    """Why a row that needs the cluster was not checked, or ``None`` when the cluster was reached.

    Without a kubeconfig nothing in the cluster was looked at: "not ready" would claim a finding.
    """
    if kube is not None:
        return None
    return "not checked: no connection to the cluster (see the kubernetes row)"


def _smoke(kube: KubeApi | None, spec: DpdSpec, checks: list[Check], timeout: float, *,
           quiet: bool, clock: Callable[[], float], correctness: bool = False,
           twin_service: str | None = None) -> list[Check]:
    needed = {ENDPOINT, "prefill", "decode", ROUTER}
    ready = {check.name for check in checks if check.status is Status.PASS}
    if kube is None or not needed <= ready:
        missing = ", ".join(sorted(needed - ready)) or "kubernetes"
        reason = _not_checked(kube, checks) or f"the endpoint is not ready ({missing}), so no prompt was sent"
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
