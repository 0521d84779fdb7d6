"""verify checks against stubbed SageMaker and a recorded Kubernetes API, and the waiting loop."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from typing import Any

from hyperpod_dpd.clients.checks import Check, Status
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.clients.wait import Progress, Waiter
from hyperpod_dpd.ops.verify import (
    check_cluster,
    check_endpoint_config,
    check_kv_roles,
    check_role,
    check_router,
    find_cluster_name,
    hint_for,
)
from hyperpod_dpd.spec import DpdSpec

MakeKube = Callable[..., tuple[KubeApi, Any]]

# --- the HyperPod cluster --------------------------------------------------------------------------


def test_cluster_in_service_reports_nodes_per_instance_group(stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    stubs.describe("dpd")
    stubs.nodes("dpd", [fakes.node("workers", "ml.p5.48xlarge", 1), fakes.node("workers", "ml.p5.48xlarge", 2),
                        fakes.node("system", "ml.m5.2xlarge", 1)])
    check = check_cluster(stubs.sagemaker, "dpd", spec)
    assert check.status is Status.PASS
    assert check.detail.splitlines() == [
        "dpd: InService; 2 running ml.p5.48xlarge node(s), the endpoint needs 2",
        "  workers (ml.p5.48xlarge): 2 Running of 2 wanted",
        "  system (ml.m5.2xlarge): 1 Running of 1 wanted",
    ]


def test_the_stacks_instance_groups_must_be_in_the_cluster(stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    """With the stack's outputs verify knows the groups it deployed; a cluster without them is the wrong one."""
    for _ in range(2):
        stubs.describe("dpd")
        stubs.nodes("dpd", [fakes.node("workers", "ml.p5.48xlarge", 1), fakes.node("workers", "ml.p5.48xlarge", 2)])
    wrong = check_cluster(stubs.sagemaker, "dpd", spec, instance_groups=("dpd-test-prefill", "workers"))
    right = check_cluster(stubs.sagemaker, "dpd", spec, instance_groups=("workers",))
    assert wrong.status is Status.FAIL
    assert wrong.detail.splitlines()[0] == ("dpd: InService, but the stack's instance group(s) dpd-test-prefill are "
                                            "not in it: check --cluster-name, or the stack's update")
    assert right.status is Status.PASS


def test_cluster_failed_shows_the_failure_message(stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    stubs.describe("dpd", status="Failed", failure="We currently do not have sufficient capacity for the "
                                                   "requested instance type(s)",
                   groups=[fakes.group("workers", "ml.p5.48xlarge", 0)])
    stubs.nodes("dpd", [])
    check = check_cluster(stubs.sagemaker, "dpd", spec)
    assert (check.status, check.settled) == (Status.FAIL, True)
    assert check.detail.splitlines() == [
        "dpd: Failed: We currently do not have sufficient capacity for the requested instance type(s)",
        "  workers (ml.p5.48xlarge): no nodes of 0 wanted",
    ]


def test_cluster_not_found(stubs: Any, spec: DpdSpec) -> None:
    stubs.sagemaker_stub.add_client_error("describe_cluster", "ResourceNotFound", "Cluster nope not found", 400)
    check = check_cluster(stubs.sagemaker, "nope", spec)
    assert (check.status, check.detail) == (Status.FAIL, "no HyperPod cluster named 'nope': check --cluster-name "
                                                         "and --region")


def test_cluster_access_denied_is_an_error(stubs: Any, spec: DpdSpec) -> None:
    stubs.sagemaker_stub.add_client_error("describe_cluster", "AccessDeniedException", "no", 400)
    check = check_cluster(stubs.sagemaker, "dpd", spec)
    assert (check.status, check.detail) == (Status.ERROR, "access denied on DescribeCluster; the caller needs "
                                                          "sagemaker:DescribeCluster and ListClusterNodes")


def test_cluster_updating_or_short_of_nodes_is_not_settled(stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    stubs.describe("dpd", status="Updating")
    stubs.nodes("dpd", [fakes.node("workers", "ml.p5.48xlarge", 1),
                        fakes.node("workers", "ml.p5.48xlarge", 2, status="Pending")])
    check = check_cluster(stubs.sagemaker, "dpd", spec)
    assert (check.status, check.settled) == (Status.FAIL, False)
    assert check.detail.splitlines()[:2] == [
        "dpd: Updating; 1 running ml.p5.48xlarge node(s), the endpoint needs 2",
        "  workers (ml.p5.48xlarge): 1 Pending, 1 Running of 2 wanted"]


def test_cluster_in_service_with_too_few_nodes_fails(stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    stubs.describe("dpd", groups=[fakes.group("workers", "ml.p5.48xlarge", 1)])
    stubs.nodes("dpd", [fakes.node("workers", "ml.p5.48xlarge", 1)])
    check = check_cluster(stubs.sagemaker, "dpd", spec)
    assert (check.status, check.settled) == (Status.FAIL, True)
    assert check.detail.splitlines()[0] == ("dpd: InService but only 1 running ml.p5.48xlarge node(s), "
                                            "the endpoint needs 2")


def test_cluster_name_found_when_it_is_the_only_one(stubs: Any) -> None:
    stubs.clusters({"ClusterName": "dpd"})
    assert find_cluster_name(stubs.sagemaker, "us-west-2") == ("dpd", None)


def test_cluster_name_prefers_the_cdk_apps_default_among_several(stubs: Any) -> None:
    stubs.clusters({"ClusterName": "training"}, {"ClusterName": "HyperPodDpd-hp"})
    assert find_cluster_name(stubs.sagemaker, "us-west-2") == ("HyperPodDpd-hp", None)


def test_cluster_name_ambiguous_or_absent(stubs: Any) -> None:
    stubs.clusters({"ClusterName": "b"}, {"ClusterName": "a"})
    stubs.clusters()
    name, check = find_cluster_name(stubs.sagemaker, "us-west-2")
    assert name is None and check is not None
    assert (check.status, check.detail) == (Status.SKIP, "2 HyperPod clusters in us-west-2 (a, b): pass --cluster-name")
    name, check = find_cluster_name(stubs.sagemaker, "us-west-2")
    assert check is not None and (check.status, check.detail) == (
        Status.FAIL, "no HyperPod cluster in us-west-2: check --region, or deploy the stack")


# --- the InferenceEndpointConfig -------------------------------------------------------------------


def test_endpoint_config_ready(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, _ = make_kube()
    check = check_endpoint_config(kube, spec)
    assert check.status is Status.PASS
    assert check.detail.splitlines() == [
        "state DeploymentComplete",
        "  DeploymentComplete=True (DeploymentReady): DPD prefill and decode deployments are ready"]


def test_endpoint_config_deployment_failed(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    failed = fakes.endpoint_config("DeploymentFailed", [{"type": "DeploymentFailed", "status": "True",
                                                         "reason": "ReconcileError",
                                                         "message": "prefill deployment: exceeded quota"}])
    kube, _ = make_kube(fakes.healthy_cluster(**{}) | {("inferenceendpointconfigs", "default", "dpd-test"): failed})
    check = check_endpoint_config(kube, spec)
    assert (check.status, check.settled) == (Status.FAIL, True)
    assert check.detail.splitlines()[:2] == [
        "state DeploymentFailed", "  DeploymentFailed=True (ReconcileError): prefill deployment: exceeded quota"]
    assert "kubectl describe inferenceendpointconfig" in check.detail


def test_endpoint_config_in_progress_is_not_settled(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    pending = fakes.endpoint_config("DeploymentInProgress")
    kube, _ = make_kube(fakes.healthy_cluster() | {("inferenceendpointconfigs", "default", "dpd-test"): pending})
    check = check_endpoint_config(kube, spec)
    assert (check.status, check.settled, check.detail) == (Status.FAIL, False, "state DeploymentInProgress")


def test_endpoint_config_not_found(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, _ = make_kube({})
    check = check_endpoint_config(kube, spec)
    assert (check.status, check.settled) == (Status.FAIL, True)
    assert check.detail.startswith("InferenceEndpointConfig default/dpd-test not found: apply the manifests")


def test_endpoint_config_forbidden_is_an_error(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    denied = fakes.api_error(403, 'inferenceendpointconfigs.inference.sagemaker.aws.amazon.com "dpd-test" is '
                                  'forbidden: User "dev" cannot get resource')
    kube, _ = make_kube({("inferenceendpointconfigs", "default", "dpd-test"): denied})
    check = check_endpoint_config(kube, spec)
    assert check.status is Status.ERROR
    assert check.detail.startswith("get inferenceendpointconfig default/dpd-test: forbidden (403): "
                                   "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com")
    assert check.detail.endswith("the kubeconfig user needs RBAC for it")


# --- prefill, decode, router -----------------------------------------------------------------------


def test_roles_ready(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, _ = make_kube()
    prefill, decode = check_role(kube, spec, "prefill"), check_role(kube, spec, "decode")
    assert (prefill.status, prefill.detail) == (
        Status.PASS, "deployment prefill-dpd-test: 1/1 ready; 1 pod(s) labelled "
                     "inference.sagemaker.aws.amazon.com/dpd-role=prefill")
    assert decode.status is Status.PASS


def test_role_still_loading_describes_the_pod(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    loading = fakes.healthy_cluster() | {
        ("deployments", "default", "decode-dpd-test"): fakes.deployment("decode-dpd-test", "default", 0),
        ("pods", "default", fakes.DECODE_SELECTOR): fakes.pod_list(
            fakes.pod("decode-dpd-test-5c4b-fghij", "default", "decode", 2),
            fakes.pod("decode-other-endpoint-1", "default", "decode", 0))}
    kube, _ = make_kube(loading)
    check = check_role(kube, spec, "decode")
    assert (check.status, check.settled) == (Status.FAIL, False)
    assert check.detail.splitlines() == [
        "deployment decode-dpd-test: 0/1 ready",
        "  decode-dpd-test-5c4b-fghij: Running, 2/3 ready (vLLM still loading the model: 5-10 min for 70B from a "
        "cold S3 fetch)"]


def test_role_with_a_crashing_or_unpullable_pod(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    broken = fakes.healthy_cluster() | {
        ("deployments", "default", "prefill-dpd-test"): fakes.deployment("prefill-dpd-test", "default", 0, 2),
        ("pods", "default", fakes.PREFILL_SELECTOR): fakes.pod_list(
            fakes.pod("prefill-dpd-test-1", "default", "prefill", 2, waiting="CrashLoopBackOff"),
            fakes.pod("prefill-dpd-test-2", "default", "prefill", 0, waiting="ImagePullBackOff", phase="Pending"))}
    kube, _ = make_kube(broken)
    lines = check_role(kube, spec, "prefill").detail.splitlines()
    assert lines[0] == "deployment prefill-dpd-test: 0/2 ready"
    assert "EngineDeadError or TimeoutError means the operator is older than v3.2" in lines[1]
    assert lines[2] == ("  prefill-dpd-test-2: Pending, 0/3 ready (the image cannot be pulled: check the image name "
                        "and the nodes' registry access)")


def test_role_pods_forbidden_is_an_error(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube(fakes.healthy_cluster() | {
        ("pods", "default", fakes.PREFILL_SELECTOR): fakes.api_error(403, 'pods is forbidden: User "dev" cannot '
                                                                          'list resource "pods"')})
    check = check_role(kube, spec, "prefill")
    assert (check.status, check.detail) == (
        Status.ERROR, "list pods -n default -l inference.sagemaker.aws.amazon.com/dpd-role=prefill: forbidden (403): "
                      'pods is forbidden: User "dev" cannot list resource "pods": the kubeconfig user needs RBAC '
                      "for it")


def test_role_deployment_not_created_yet(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    answers = fakes.healthy_cluster()
    del answers[("deployments", "default", "prefill-dpd-test")]
    kube, _ = make_kube(answers)
    check = check_role(kube, spec, "prefill")
    assert (check.status, check.settled) == (Status.FAIL, False)
    assert check.detail.startswith("deployment default/prefill-dpd-test not created yet")


def test_router_ready(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, _ = make_kube()
    check = check_router(kube, spec)
    assert (check.status, check.detail) == (
        Status.PASS, "deployment dpd-test-default-router: 1/1 ready; service dpd-test-default-routing-service:443")


def test_router_not_ready_and_wrong_port(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    router = ("deployments", "hyperpod-inference-system", "dpd-test-default-router")
    kube, _ = make_kube(fakes.healthy_cluster() | {
        router: fakes.deployment("dpd-test-default-router", "hyperpod-inference-system", 0)})
    assert check_router(kube, spec).settled is False
    kube, _ = make_kube(fakes.healthy_cluster() | {
        ("services", "hyperpod-inference-system", "dpd-test-default-routing-service"):
            fakes.service("dpd-test-default-routing-service", port=8080)})
    check = check_router(kube, spec)
    assert (check.status, check.detail) == (Status.FAIL, "deployment dpd-test-default-router: 1/1 ready; service "
                                                         "dpd-test-default-routing-service has ports [8080], not 443")


def test_router_unreachable_api_is_an_error(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    import urllib3

    router = ("deployments", "hyperpod-inference-system", "dpd-test-default-router")
    kube, _ = make_kube(fakes.healthy_cluster() | {router: urllib3.exceptions.MaxRetryError(None, "/", "refused")})
    check = check_router(kube, spec)
    assert check.status is Status.ERROR
    assert check.detail.startswith("get deployment hyperpod-inference-system/dpd-test-default-router: cannot reach "
                                   "the Kubernetes API (MaxRetryError")


# --- waiting ---------------------------------------------------------------------------------------


def test_waiting_until_the_decoder_is_ready(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                            fake_clock: Any) -> None:
    decode = ("deployments", "default", "decode-dpd-test")
    kube, _ = make_kube(fakes.healthy_cluster() | {decode: [
        fakes.deployment("decode-dpd-test", "default", 0), fakes.deployment("decode-dpd-test", "default", 0),
        fakes.deployment("decode-dpd-test", "default", 1)]})
    stream = io.StringIO()
    waiter = Waiter(timeout=900, poll_interval=15, clock=fake_clock, sleep=fake_clock.sleep,
                    progress=Progress(stream))
    checks, timed_out = waiter.run([lambda: check_role(kube, spec, "decode")], hints=hint_for)
    assert timed_out == []
    assert [c.status for c in checks] == [Status.PASS]
    assert fake_clock.slept == [15, 15]
    assert stream.getvalue().splitlines()[0] == "waiting    0s/900s: decode (deployment decode-dpd-test: 0/1 ready)"


def test_waiting_times_out_with_the_next_step(make_kube: MakeKube, spec: DpdSpec, fakes: Any,
                                              fake_clock: Any) -> None:
    kube, _ = make_kube(fakes.healthy_cluster() | {
        ("deployments", "default", "prefill-dpd-test"): fakes.deployment("prefill-dpd-test", "default", 0),
        ("pods", "default", fakes.PREFILL_SELECTOR): fakes.pod_list(
            fakes.pod("prefill-dpd-test-1", "default", "prefill", 2))})
    waiter = Waiter(timeout=60, poll_interval=15, clock=fake_clock, sleep=fake_clock.sleep)
    probes = [lambda: check_role(kube, spec, "prefill"), lambda: check_router(kube, spec)]
    checks, timed_out = waiter.run(probes, hints=hint_for)
    assert [c.name for c in timed_out] == ["prefill"]
    assert checks[1].status is Status.PASS
    assert sum(fake_clock.slept) == 60
    last = checks[0].detail.splitlines()[-1]
    assert last.startswith("still not ready after 60s: a pod stuck at 2/3 Ready is vLLM still loading the model "
                           "(5-10 min for a 70B model from a cold S3 fetch)")


def test_no_wait_polls_once(fake_clock: Any) -> None:
    calls: list[int] = []

    def probe() -> Check:
        calls.append(1)
        return Check("x", Status.FAIL, "not yet", settled=False)

    checks, timed_out = Waiter(timeout=900, clock=fake_clock, sleep=fake_clock.sleep).run([probe], wait=False)
    assert (len(calls), timed_out, fake_clock.slept) == (1, [], [])
    assert checks[0].status is Status.FAIL


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = Progress(stream)
    progress.update(5, 900, [Check("router", Status.FAIL, "0/1 ready", settled=False)])
    progress.done()
    text = stream.getvalue()
    assert text.startswith("\rwaiting    5s/900s: router (0/1 ready)") and text.endswith("\n")


def test_settled_checks_are_not_polled_again(fake_clock: Any) -> None:
    counts = {"a": 0, "b": 0}

    def make(name: str, ready_after: int) -> Callable[[], Check]:
        def probe() -> Check:
            counts[name] += 1
            done = counts[name] >= ready_after
            return Check(name, Status.PASS if done else Status.FAIL, "", settled=done)
        return probe

    Waiter(timeout=900, poll_interval=1, clock=fake_clock, sleep=fake_clock.sleep).run([make("a", 1), make("b", 3)])
    assert counts == {"a": 1, "b": 3}


def test_spec_names_drive_every_object_name(make_kube: MakeKube, spec: DpdSpec) -> None:
    other = dataclasses.replace(spec, name="llama", namespace="serving")
    kube, core = make_kube({})
    check_router(kube, other)
    check_role(kube, other, "prefill")
    assert ("deployments", "hyperpod-inference-system", "llama-serving-router") in kube.apps.calls  # type: ignore[attr-defined]
    assert ("services", "hyperpod-inference-system", "llama-serving-routing-service") in core.calls
    assert ("deployments", "serving", "prefill-llama") in kube.apps.calls  # type: ignore[attr-defined]


# --- KV roles ----------------------------------------------------------------------------------------


def test_kv_roles_sender_and_receiver(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, core = make_kube()
    check = check_kv_roles(kube, spec)
    assert (check.status, check.detail) == (
        Status.PASS, "prefill prefill-dpd-test-7d9f-abcde: pd_role sender; decode decode-dpd-test-5c4b-fghij: "
                     "pd_role receiver")
    assert ("log", "default", "prefill-dpd-test-7d9f-abcde", "prefill-dpd-test") in core.calls


def test_kv_roles_swapped_fails_with_the_fix(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, _ = make_kube(logs={("decode-dpd-test-5c4b-fghij", "decode-dpd-test"): ["{'pd_role': 'sender'}"]})
    check = check_kv_roles(kube, spec)
    assert check.status is Status.FAIL
    assert check.detail.startswith("decode-dpd-test-5c4b-fghij started with pd_role sender, not receiver: no KV "
                                   "transfer will happen")


def test_kv_roles_tries_the_endpoint_name_container_and_skips_without_a_line(make_kube: MakeKube, spec: DpdSpec,
                                                                             fakes: Any) -> None:
    renamed = dataclasses.replace(spec, endpoint_name="llama-endpoint")
    kube, core = make_kube(logs={("prefill-dpd-test-7d9f-abcde", "prefill-dpd-test"): None,
                                 ("prefill-dpd-test-7d9f-abcde", "prefill-llama-endpoint"): ["loading..."]})
    check = check_kv_roles(kube, renamed)
    assert (check.status, check.detail) == (Status.SKIP, "no 'pd_role' line in the first 8 MiB of "
                                                         "prefill-dpd-test-7d9f-abcde's log (rotated?)")
    assert ("log", "default", "prefill-dpd-test-7d9f-abcde", "prefill-llama-endpoint") in core.calls


def test_kv_roles_unreadable_log_is_an_error(make_kube: MakeKube, spec: DpdSpec) -> None:
    kube, _ = make_kube(logs={("prefill-dpd-test-7d9f-abcde", "prefill-dpd-test"): None})
    check = check_kv_roles(kube, spec)  # no endpoint-name fallback: the 400 is reported
    assert check.status is Status.ERROR
    assert check.detail.startswith("logs default/prefill-dpd-test-7d9f-abcde -c prefill-dpd-test: HTTP 400")
