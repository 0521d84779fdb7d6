"""Recorded Kubernetes answers for the benchmark Job: the client's own model objects, as a cluster returns them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from hyperpod_dpd.clients.benchmark_kube import BenchmarkKube

_DESERIALIZER = ApiClient()


def k8s_model(kind: str, data: Any) -> Any:
    return _DESERIALIZER.deserialize(json.dumps(data), kind, "application/json")


def api_error(status: int, message: str = "") -> ApiException:
    err = ApiException(status=status, reason={404: "Not Found", 409: "Conflict", 403: "Forbidden"}.get(status, "E"))
    err.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return err


def job(name: str, *, condition: str | None = None, reason: str = "", message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"active": 0 if condition else 1}
    if condition:
        status["conditions"] = [{"type": condition, "status": "True", "reason": reason, "message": message}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [{"name": "publish", "image": "x"}]}}}, "status": status}


def container(name: str, state: str, exit_code: int = 0, reason: str = "", message: str = "") -> dict[str, Any]:
    waiting = {"reason": reason or "PodInitializing", **({"message": message} if message else {})}
    states: dict[str, Any] = {
        "running": {"running": {"startedAt": "2026-12-01T03:00:00Z"}},
        "waiting": {"waiting": waiting},
        "terminated": {"terminated": {"exitCode": exit_code, "reason": reason or "Completed"}},
    }
    return {"name": name, "image": "x", "imageID": "", "ready": False, "restartCount": 0, "state": states[state]}


def pod(name: str, *, init: list[dict[str, Any]], main: list[dict[str, Any]], phase: str = "Pending",
        unschedulable: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "initContainerStatuses": init, "containerStatuses": main}
    if unschedulable:  # as the scheduler reports it
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": unschedulable}]
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "publish", "image": "x"}]}, "status": status}


@dataclass
class FakeBatch:
    """Answers read_namespaced_job from ``states`` in turn (the last one repeats)."""

    states: list[dict[str, Any] | Exception]
    create_error: Exception | None = None
    created: list[tuple[str, Any]] = field(default_factory=list)
    deleted: list[tuple[str, str, str]] = field(default_factory=list)
    reads: int = 0

    def create_namespaced_job(self, namespace: str, body: Any) -> Any:
        if self.create_error is not None:
            raise self.create_error
        self.created.append((namespace, body))
        return k8s_model("V1Job", body)

    def read_namespaced_job(self, name: str, namespace: str) -> Any:
        answer = self.states[min(self.reads, len(self.states) - 1)]
        self.reads += 1
        if isinstance(answer, Exception):
            raise answer
        return k8s_model("V1Job", answer)

    def delete_namespaced_job(self, name: str, namespace: str, *, propagation_policy: str) -> Any:
        self.deleted.append((namespace, name, propagation_policy))
        return None


@dataclass
class FakeCore:
    """Pods answered in turn like the Job; logs by container (text, or a function called at each read);
    ServiceAccount creation recorded; other pods (``"namespace|selector"``) and their ``/metrics``
    through the pod proxy (``metrics(namespace, "pod:port")``) for the DPD counters."""

    pods: list[list[dict[str, Any]]]
    logs: Mapping[str, str | Callable[[], str]] = field(default_factory=dict)
    account_error: Exception | None = None
    accounts: list[tuple[str, Any]] = field(default_factory=list)
    log_reads: list[str] = field(default_factory=list)
    listed: int = 0
    other_pods: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    metrics: Callable[[str, str], str] | None = None
    proxied: list[tuple[str, str, str]] = field(default_factory=list)
    config_maps: list[tuple[str, Any]] = field(default_factory=list)
    deleted_config_maps: list[tuple[str, str]] = field(default_factory=list)

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> Any:
        if f"{namespace}|{label_selector}" in self.other_pods:
            return k8s_model("V1PodList", {"items": self.other_pods[f"{namespace}|{label_selector}"]})
        items = self.pods[min(self.listed, len(self.pods) - 1)]
        self.listed += 1
        return k8s_model("V1PodList", {"items": items})

    def connect_get_namespaced_pod_proxy_with_path(self, name: str, namespace: str, path: str) -> str:
        self.proxied.append((namespace, name, path))
        if self.metrics is None:
            raise api_error(403, "pods/proxy is forbidden")
        return self.metrics(namespace, name)

    def read_namespaced_service(self, name: str, namespace: str) -> Any:
        raise api_error(404)

    def read_namespaced_pod_log(self, name: str, namespace: str, *, container: str, since_seconds: int | None = None,
                                limit_bytes: int | None = None) -> Any:
        self.log_reads.append(container)
        log = self.logs.get(container)
        if log is None:  # as the API server answers for a container the pod does not run
            raise api_error(400, f"container {container} is not valid for pod {name}")
        return log if isinstance(log, str) else log()

    def read_namespaced_service_account(self, name: str, namespace: str) -> Any:
        for ns, body in self.accounts:
            if ns == namespace and body["metadata"]["name"] == name:
                return k8s_model("V1ServiceAccount", body)
        raise api_error(404)

    def create_namespaced_service_account(self, namespace: str, body: Any) -> Any:
        if self.account_error is not None:
            raise self.account_error
        self.accounts.append((namespace, body))
        return k8s_model("V1ServiceAccount", body)

    def create_namespaced_config_map(self, namespace: str, body: Any) -> Any:
        self.config_maps.append((namespace, body))
        return k8s_model("V1ConfigMap", body)

    def delete_namespaced_config_map(self, name: str, namespace: str) -> Any:
        self.deleted_config_maps.append((namespace, name))
        return k8s_model("V1Status", {"status": "Success"})


def benchmark_kube(batch: FakeBatch, core: FakeCore, custom: Any = None, access: Any = None) -> BenchmarkKube:
    """Both endpoints present unless ``custom`` says otherwise; every permission granted unless ``access``."""
    return BenchmarkKube(custom=custom or FakeCustom(), apps=None, core=core, batch=batch,  # type: ignore[arg-type]
                         accounts=core, access=access or FakeAccess(), config_maps=core)


@dataclass
class FakeAccess:
    """SelfSubjectAccessReview answers: ``denied`` holds "verb resource[/sub] namespace" strings."""

    denied: tuple[str, ...] = ()
    asked: list[str] = field(default_factory=list)

    def create_self_subject_access_review(self, body: Any) -> Any:
        a = body["spec"]["resourceAttributes"]
        key = f"{a['verb']} {a['resource']}{'/' + a['subresource'] if a.get('subresource') else ''} {a['namespace']}"
        self.asked.append(key)
        return k8s_model("V1SelfSubjectAccessReview", {**body, "status": {"allowed": key not in self.denied}})


def deployment_pod(name: str, namespace: str, *, container: str, port: int | None = None, phase: str = "Running",
                   restarts: int = 0, deleting: bool = False) -> dict[str, Any]:
    """A pod as a Deployment's ReplicaSet makes it: ``<deployment>-<hash>-<id>``, labelled and owned accordingly."""
    replica_set, template = name.rsplit("-", 1)[0], name.rsplit("-", 2)[1]
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"pod-template-hash": template},
                                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set,
                                                     "uid": f"uid-{replica_set}", "controller": True}]}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-01T03:00:00Z"
    ports = [{"containerPort": port}] if port else []
    return {"metadata": metadata, "spec": {"containers": [{"name": container, "image": "x", "ports": ports}]},
            "status": {"phase": phase, "containerStatuses": [
                {"name": container, "image": "x", "imageID": "", "ready": True, "restartCount": restarts}]}}


def router_pod(name: str = "dpd-test-default-router-6d5f-abc", **kwargs: Any) -> dict[str, Any]:
    return deployment_pod(name, "hyperpod-inference-system", container="router-container", port=8080, **kwargs)


def decoder_pod(name: str = "decode-dpd-test-7c9-xyz", namespace: str = "default", **kwargs: Any) -> dict[str, Any]:
    return deployment_pod(name, namespace, container="vllm", **kwargs)


def router_and_decoder(name: str = "dpd-test", namespace: str = "default") -> dict[str, list[dict[str, Any]]]:
    """One router pod (port 8080 on its router-container) and one decoder pod, named as the operator does, and
    no prefiller (whose stage histograms only the TTFT decomposition reads)."""
    return {"hyperpod-inference-system|": [router_pod(f"{name}-{namespace}-router-6d5f-abc")],
            f"{namespace}|inference.sagemaker.aws.amazon.com/dpd-role=decode": [
                decoder_pod(f"decode-{name}-7c9-xyz", namespace)],
            f"{namespace}|inference.sagemaker.aws.amazon.com/dpd-role=prefill": []}


def twin_selector(name: str = "dpd-test-agg") -> str:
    """The label selector a recorded twin's InferenceEndpointConfig names in ``status.selector``."""
    return f"app={name}"


def twin_pods(name: str = "dpd-test-agg", namespace: str = "default") -> dict[str, list[dict[str, Any]]]:
    """The aggregated twin's router pod and its one engine pod (found by :func:`twin_selector`)."""
    return {f"{namespace}|{twin_selector(name)}": [deployment_pod(f"{name}-6b8-eng", namespace, container="vllm")],
            "hyperpod-inference-system|": [router_pod(f"{name}-{namespace}-router-5f4-abc")]}


@dataclass
class FakeCustom:
    """InferenceEndpointConfigs by name (absent: 404), each with the pod selector the operator reports in its status
    (none for a name in ``no_selector``)."""

    present: tuple[str, ...] = ("dpd-test", "dpd-test-agg")
    no_selector: tuple[str, ...] = ()

    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str) -> Any:
        if name not in self.present:
            raise api_error(404)
        status = {} if name in self.no_selector else {"selector": twin_selector(name)}
        return {"apiVersion": f"{group}/{version}", "kind": "InferenceEndpointConfig",
                "metadata": {"name": name, "namespace": namespace}, "status": status}


@dataclass
class Replay:
    """One benchmark Job replaying a recorded run of the benchmark container against the stub: its states (one poll
    per quiet mark, then Complete), its benchmark log walking the quiet windows one poll at a time, the window
    that log is in (whose counters the pods' /metrics answer with), and its publish container's log."""

    states: list[dict[str, Any]]
    benchmark_log: Callable[[], str]
    window: list[int]
    publish: str

    @property
    def current(self) -> int:
        return self.window[0]


def replay(run: Any, name: str, *, printed: Mapping[str, str] | None = None, exit_code: int = 0) -> Replay:
    """Job ``name`` replaying ``run``; its publish log holds ``printed`` (default: the run's files) and exits
    ``exit_code``."""
    levels = len(run.metrics) - 1  # a quiet window before the first level and after each
    marks = ["quiet=0", *(mark for done in range(1, levels + 1) for mark in (f"level={done}", f"quiet={done}"))]
    logs = iter("".join(f"### hyperpod-dpd-bench {m}\n" for m in marks[:i + 1]) for i in range(len(marks)))
    window = [0]

    def benchmark_log() -> str:
        text = next(logs, None)
        if text is None:
            return f"### hyperpod-dpd-bench quiet={levels}\n"
        window[0] = int(text.rsplit("quiet=", 1)[1].split()[0])
        return text

    files = run.files() if printed is None else printed
    publish = "".join(f"### hyperpod-dpd-bench file={n}\n{text}\n### hyperpod-dpd-bench end\n"
                      for n, text in files.items()) + f"### hyperpod-dpd-bench exit={exit_code}\n"
    # one poll per mark: the Job completes once the last quiet window was seen
    return Replay(states=[job(name)] * len(marks) + [job(name, condition="Complete")], benchmark_log=benchmark_log,
                  window=window, publish=publish)


PREFILLER_POD = "prefill-dpd-test-5b7-aaa"  # the stub's prefiller, as the prefill Deployment names its pods


def recorded_cluster(run: Any, *, name: str, present: tuple[str, ...] = ("dpd-test", "dpd-test-agg"),
                     printed: Mapping[str, str] | None = None, exit_code: int = 0) -> BenchmarkKube:
    """A recorded cluster where the Job ``name`` runs ``run`` (a conftest ``Run``, :func:`replay`): the router's and
    decoder's /metrics (through the API server) answer with the stub's counters of the window the Job's log is in."""
    replayed = replay(run, name, printed=printed, exit_code=exit_code)

    def metrics(namespace: str, pod_port: str) -> str:
        router, decoder = run.metrics[replayed.current]
        if pod_port.startswith("prefill-"):
            return str(run.prefiller_metrics[replayed.current])
        return str(router if namespace == "hyperpod-inference-system" else decoder)

    the_pod = pod(f"{name}-x", init=[container("benchmark", "terminated")], main=[container("publish", "terminated")])
    pods = router_and_decoder()
    if getattr(run, "prefiller_metrics", None):  # the stub's prefiller, a pod of the endpoint's prefill Deployment
        pods["default|inference.sagemaker.aws.amazon.com/dpd-role=prefill"] = [decoder_pod(PREFILLER_POD)]
    core = FakeCore(pods=[[the_pod]], logs={"benchmark": replayed.benchmark_log, "publish": replayed.publish},
                    other_pods=pods, metrics=metrics)
    return benchmark_kube(FakeBatch(states=replayed.states), core, custom=FakeCustom(present=present))
