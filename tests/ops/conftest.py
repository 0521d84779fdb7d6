"""Offline AWS and Kubernetes for the preflight and verify tests.

AWS: moto for S3, EC2 and STS; botocore's Stubber for Service Quotas, SageMaker and EKS (moto has no
ListServiceQuotas or DescribeAddonVersions, and its HyperPod clusters are always InService).
Kubernetes: fake CustomObjectsApi/AppsV1Api/CoreV1Api objects that answer with the client's own
model objects, deserialized from recorded JSON the way the client deserializes an API response.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from moto import mock_aws
from support import FakeClock

from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.contracts.crd import v1_schema
from hyperpod_dpd.contracts.stack_defaults import KUBERNETES_VERSION
from hyperpod_dpd.ops.addons import stack_addons
from hyperpod_dpd.ops.crd_diff import CRD_NAME

REGION = "us-west-2"
BUCKET = "dpd-models-example"
PREFIX = "Llama-3.3-70B-Instruct"
QUOTA_NAME = "ml.p5.48xlarge for cluster usage"

_DESERIALIZER = ApiClient()
_SESSIONS: list[boto3.Session] = []


def client(service: str, region_name: str | None = REGION) -> Any:
    """A client from one shared session (service models load once, not per test; moto resets the
    default session on every start), with fake keys so no credential chain is consulted."""
    if not _SESSIONS:
        _SESSIONS.append(boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                       region_name=REGION))
    return _SESSIONS[0].client(service, region_name=region_name or REGION)


def k8s_model(kind: str, data: Any) -> Any:
    """``data`` (recorded JSON) as the client's ``kind`` model, exactly as a real response is read."""
    return _DESERIALIZER.deserialize(json.dumps(data), kind, "application/json")


def api_error(status: int, message: str = "") -> ApiException:
    err = ApiException(status=status, reason={401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}.get(
        status, "Error"))
    err.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return err


# --- AWS -------------------------------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto with fake credentials in us-west-2."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield


@dataclass
class Stubs:
    """Stubbed Service Quotas and SageMaker clients (no credentials needed), activated on use."""

    quotas: Any = field(default_factory=lambda: client("service-quotas"))
    sagemaker: Any = field(default_factory=lambda: client("sagemaker"))
    elbv2: Any = field(default_factory=lambda: client("elbv2"))
    eks: Any = field(default_factory=lambda: client("eks"))

    def __post_init__(self) -> None:
        self.quotas_stub = Stubber(self.quotas)
        self.sagemaker_stub = Stubber(self.sagemaker)
        self.elbv2_stub = Stubber(self.elbv2)
        self.eks_stub = Stubber(self.eks)
        for stub in self.all():
            stub.activate()

    def all(self) -> tuple[Stubber, ...]:
        return (self.quotas_stub, self.sagemaker_stub, self.elbv2_stub, self.eks_stub)

    def addons_offered(self, *, kubernetes: str = KUBERNETES_VERSION, missing: str | None = None) -> None:
        """``DescribeAddonVersions`` for every add-on the stack installs (its pin offered), in the order asked;
        ``missing``: one add-on EKS offers no version of."""
        for name, version in sorted(stack_addons().items()):
            versions = [] if name == missing else [version or "v1.0.0-eksbuild.1"]
            body = {"addons": [{"addonName": name, "addonVersions": [
                {"addonVersion": v, "compatibilities": [{"clusterVersion": kubernetes, "defaultVersion": True}]}
                for v in versions]}]} if versions else {"addons": []}
            self.eks_stub.add_response("describe_addon_versions", body,
                                       {"addonName": name, "kubernetesVersion": kubernetes})

    def load_balancer(self, dns_name: str = "", *, scheme: str = "internal", security_groups: tuple[str, ...] = (),
                      listeners: tuple[tuple[str, int], ...] = (("HTTPS", 443),)) -> None:
        """``DescribeLoadBalancers`` and ``DescribeListeners`` for the ALB the controller made for the Ingress."""
        arn = (f"arn:aws:elasticloadbalancing:{REGION}:123456789012:loadbalancer/app/k8s-hyperpod-albdpdte/"
               "0123456789abcdef")
        self.elbv2_stub.add_response("describe_load_balancers", {"LoadBalancers": [
            {"LoadBalancerArn": arn.replace("albdpdte", "other"), "DNSName": "internal-other.elb.amazonaws.com",
             "LoadBalancerName": "other", "Scheme": "internal", "Type": "application"},
            {"LoadBalancerArn": arn, "DNSName": dns_name or ALB_HOSTNAME, "LoadBalancerName": "k8s-hyperpod-albdpdte",
             "Scheme": scheme, "Type": "application", "SecurityGroups": list(security_groups)}]}, {})
        self.elbv2_stub.add_response("describe_listeners", {"Listeners": [
            {"ListenerArn": f"{arn}/l{i}", "Protocol": protocol, "Port": port}
            for i, (protocol, port) in enumerate(listeners)]}, {"LoadBalancerArn": arn})

    def endpoint(self, name: str = "dpd-test", status: str = "InService") -> None:
        self.sagemaker_stub.add_response("describe_endpoint", {
            "EndpointName": name, "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{name}",
            "EndpointConfigName": name, "EndpointStatus": status, "CreationTime": "2026-11-01T00:00:00Z",
            "LastModifiedTime": "2026-11-01T00:00:00Z"}, {"EndpointName": name})

    def quota(self, value: float, name: str = QUOTA_NAME, code: str = "L-6A2BEAB4") -> None:
        self.quotas_stub.add_response("list_service_quotas", {"Quotas": [
            {"ServiceCode": "sagemaker", "QuotaName": "ml.g5.48xlarge for cluster usage", "QuotaCode": "L-1",
             "Value": 8.0},
            {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": code, "Value": value},
        ]}, {"ServiceCode": "sagemaker"})

    def clusters(self, *clusters: dict[str, Any]) -> None:
        self.sagemaker_stub.add_response("list_clusters", {"ClusterSummaries": [
            {"ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/{c['ClusterName']}",
             "ClusterName": c["ClusterName"], "CreationTime": "2026-11-01T00:00:00Z",
             "ClusterStatus": c.get("ClusterStatus", "InService")} for c in clusters]}, {})

    def describe(self, name: str, status: str = "InService", groups: list[dict[str, Any]] | None = None,
                 failure: str | None = None) -> None:
        response: dict[str, Any] = {
            "ClusterArn": f"arn:aws:sagemaker:{REGION}:123456789012:cluster/{name}", "ClusterName": name,
            "ClusterStatus": status, "InstanceGroups": groups if groups is not None else [
                group("workers", "ml.p5.48xlarge", 2), group("system", "ml.m5.2xlarge", 1)]}
        if failure:
            response["FailureMessage"] = failure
        self.sagemaker_stub.add_response("describe_cluster", response, {"ClusterName": name})

    def nodes(self, name: str, nodes: list[dict[str, Any]]) -> None:
        self.sagemaker_stub.add_response("list_cluster_nodes", {"ClusterNodeSummaries": nodes},
                                         {"ClusterName": name})


def group(name: str, instance_type: str, count: int) -> dict[str, Any]:
    return {"InstanceGroupName": name, "InstanceType": instance_type, "CurrentCount": count, "TargetCount": count}


def node(group_name: str, instance_type: str, index: int, status: str = "Running") -> dict[str, Any]:
    return {"InstanceGroupName": group_name, "InstanceId": f"i-{group_name}{index:04d}",
            "InstanceType": instance_type, "LaunchTime": "2026-11-01T00:00:00Z",
            "InstanceStatus": {"Status": status}}


@pytest.fixture
def stubs() -> Iterator[Stubs]:
    made = Stubs()
    yield made
    for stub in made.all():
        stub.deactivate()


def clients_with(stubs: Stubs, **overrides: Any) -> AwsClients:
    """moto-backed clients (inside the ``aws`` fixture) with the stubbed ones swapped in."""
    fixed: dict[str, Any] = {"service-quotas": stubs.quotas, "sagemaker": stubs.sagemaker, "elbv2": stubs.elbv2,
                             "eks": stubs.eks, **overrides}

    def factory(service: str, region_name: str | None = None) -> Any:
        return fixed[service] if service in fixed else client(service, region_name)

    return AwsClients(region=REGION, factory=factory)


@pytest.fixture
def clients(aws: None, stubs: Stubs) -> AwsClients:
    return clients_with(stubs)


def upload_model(files: Mapping[str, bytes | int], *, bucket: str = BUCKET, prefix: str = PREFIX,
                 create: bool = True) -> None:
    """Put ``files`` (name -> bytes, or a size for dummy bytes) under ``s3://bucket/prefix/``."""
    s3 = client("s3")
    if create:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
    for name, content in files.items():
        body = content if isinstance(content, bytes) else b"\0" * content
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=body)


def sharded_model(shards: int = 3, *, listed: int | None = None) -> dict[str, bytes | int]:
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    index_names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, (listed or shards) + 1)]
    index = {"metadata": {"total_size": 3072},
             "weight_map": {f"layer.{i}.weight": name for i, name in enumerate(index_names)}}
    files: dict[str, bytes | int] = {"config.json": b'{"model_type": "llama"}', "tokenizer.json": 2048,
                                     "tokenizer_config.json": 512, "generation_config.json": 64,
                                     "model.safetensors.index.json": json.dumps(index).encode()}
    files.update({name: 1024 for name in names})
    return files


# --- Kubernetes ------------------------------------------------------------------------------------

Answer = Any  # a recorded JSON document, an exception to raise, or a list of them (one per call)


class _Recorded:
    """Answers keyed by object; a list answers call by call and then repeats its last item."""

    def __init__(self, answers: dict[tuple[str, ...], Answer]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def answer(self, key: tuple[str, ...]) -> Any:
        self.calls.append(key)
        if key not in self.answers:
            raise api_error(404, f"{key[-1]} not found")
        value = self.answers[key]
        if isinstance(value, list) and value and not isinstance(value[0], str):
            value = value.pop(0) if len(value) > 1 else value[0]
        if isinstance(value, Exception):
            raise value
        return value


class FakeCustomObjects(_Recorded):
    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                     name: str) -> Any:
        return self.answer((plural, namespace, name))  # custom objects come back as plain dicts

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> Any:
        return self.answer((plural, name))


class FakeApps(_Recorded):
    def read_namespaced_deployment(self, name: str, namespace: str) -> Any:
        return k8s_model("V1Deployment", self.answer(("deployments", namespace, name)))


class FakeCore(_Recorded):
    def __init__(self, answers: dict[tuple[str, ...], Answer], logs: dict[Any, Any] | None = None,
                 metrics: dict[str, list[str]] | None = None) -> None:
        super().__init__(answers)
        self.logs = logs or {}
        self.metrics = metrics or {}

    def connect_get_namespaced_pod_proxy_with_path(self, name: str, namespace: str, path: str) -> Any:
        """``/metrics`` texts keyed by ``pod:port``, one per call (the last repeats); others are a 404."""
        self.calls.append(("proxy", namespace, name, path))
        texts = self.metrics.get(name)
        if not texts:
            raise api_error(404, f"pods {name} not found")
        return texts.pop(0) if len(texts) > 1 else texts[0]

    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> Any:
        return k8s_model("V1PodList", self.answer(("pods", namespace, label_selector)))

    def delete_namespaced_pod(self, name: str, namespace: str) -> Any:
        """Record the delete; in a recorded pod list its Deployment's replacement (``-rplcd``) takes its place."""
        self.calls.append(("delete", namespace, name))
        for key, value in self.answers.items():
            if key[:2] == ("pods", namespace) and isinstance(value, dict):
                for item in value.get("items") or []:
                    if item["metadata"]["name"] == name:
                        item["metadata"]["name"] = f"{name.rsplit('-', 1)[0]}-rplcd"
        return None

    def read_namespaced_service(self, name: str, namespace: str) -> Any:
        return k8s_model("V1Service", self.answer(("services", namespace, name)))

    def read_namespaced_pod_log(self, name: str, namespace: str, *, container: str, since_seconds: int | None = None,
                                limit_bytes: int | None = None) -> Any:
        """Logs keyed by ``pod`` or ``(pod, container)``; a ``(pod, container)`` mapped to None is a 400."""
        self.calls.append(("log", namespace, name, container))
        lines = self.logs.get((name, container), self.logs.get(name))  # type: ignore[call-overload]
        if (name, container) in self.logs and lines is None:
            raise api_error(400, f"container {container} is not valid for pod {name}")
        if lines is None:
            raise api_error(404, f"pods {name} not found")
        return "\n".join(lines) + "\n"


class FakeNetworking(_Recorded):
    def read_namespaced_ingress(self, name: str, namespace: str) -> Any:
        return k8s_model("V1Ingress", self.answer(("ingresses", namespace, name)))

    def list_namespaced_network_policy(self, namespace: str) -> Any:
        return k8s_model("V1NetworkPolicyList", self.answer(("networkpolicies", namespace)))


# An internal ALB's DNS name as ELB gives it (internal- prefix; the k8s-<namespace>-<ingress> name the
# controller derives, as in the aws-samples/llm_model_hub operator notes).
ALB_HOSTNAME = "internal-k8s-hyperpod-albdpdte-0123456789-1234567890.us-west-2.elb.amazonaws.com"
PUBLIC_ALB_HOSTNAME = "k8s-hyperpod-albdpdte-0123456789-1234567890.us-west-2.elb.amazonaws.com"


def ingress(*, scheme: str | None = None, hostname: str | None = ALB_HOSTNAME,
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """The operator's Ingress ``alb-dpd-test-default`` as the controller leaves it (status.loadBalancer)."""
    found = {"alb.ingress.kubernetes.io/listen-ports": '[{"HTTPS":443}]',
             "alb.ingress.kubernetes.io/certificate-arn":
                 "arn:aws:acm:us-west-2:123456789012:certificate/0f1e2d3c-4b5a-6978-8091-a2b3c4d5e6f7",
             "alb.ingress.kubernetes.io/target-type": "ip", **(annotations or {})}
    if scheme is not None:
        found["alb.ingress.kubernetes.io/scheme"] = scheme
    status = {"loadBalancer": {"ingress": [{"hostname": hostname}] if hostname else []}}
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "alb-dpd-test-default", "namespace": "hyperpod-inference-system",
                         "annotations": found},
            "spec": {"ingressClassName": "alb", "rules": [{"http": {"paths": [{
                "path": "/v1/chat/completions", "pathType": "Prefix", "backend": {"service": {
                    "name": "dpd-test-default-routing-service", "port": {"number": 443}}}}]}}]},
            "status": status}


def network_policies(*names: str, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicyList", "metadata": {}, "items": [
        {"metadata": {"name": name, "namespace": namespace}, "spec": {"podSelector": {}}} for name in names]}


def deployment(name: str, namespace: str, ready: int, replicas: int = 1) -> dict[str, Any]:
    status: dict[str, Any] = {"replicas": replicas, "observedGeneration": 1}
    if ready:
        status["readyReplicas"] = ready
        status["availableReplicas"] = ready
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": name, "image": "vllm"}]}}},
            "status": status}


def pod(name: str, namespace: str, role: str | None, ready_containers: int, *, total: int = 3,
        waiting: str | None = None, phase: str = "Running") -> dict[str, Any]:
    statuses = []
    for i in range(total):
        state: dict[str, Any] = {"running": {"startedAt": "2026-11-29T10:00:00Z"}}
        if i >= ready_containers and waiting:
            state = {"waiting": {"reason": waiting}}
        statuses.append({"name": f"c{i}", "ready": i < ready_containers, "restartCount": 0, "image": "img",
                         "imageID": "", "state": state})
    ready = "True" if ready_containers == total else "False"
    labels = {"inference.sagemaker.aws.amazon.com/dpd-role": role} if role else {"app": name}
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"containers": [{"name": f"c{i}"} for i in range(total)]},
            "status": {"phase": phase, "containerStatuses": statuses,
                       "conditions": [{"type": "PodScheduled", "status": "True"},
                                      {"type": "Ready", "status": ready}]}}


def pod_list(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": list(pods)}


def service(name: str, port: int = 443) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "hyperpod-inference-system"},
            "spec": {"ports": [{"name": "https", "port": port, "targetPort": 8080, "protocol": "TCP"}]}}


def endpoint_config(state: str | None, conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions or []}
    if state:
        status["state"] = state
    return {"apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "InferenceEndpointConfig",
            "metadata": {"name": "dpd-test", "namespace": "default"}, "status": status}


READY_CONDITIONS = [{"type": "DeploymentComplete", "status": "True", "reason": "DeploymentReady",
                     "message": "DPD prefill and decode deployments are ready"}]
PREFILL_SELECTOR = "inference.sagemaker.aws.amazon.com/dpd-role=prefill"
DECODE_SELECTOR = "inference.sagemaker.aws.amazon.com/dpd-role=decode"


WORKER_LOGS: dict[Any, list[str]] = {
    ("prefill-dpd-test-7d9f-abcde", "prefill-dpd-test"): [
        "INFO 11-29 10:00:01 [config.py:1] LMCache config: {'enable_pd': True, 'pd_role': 'sender', "
        "'transfer_channel': 'nixl'}", "INFO 11-29 10:06:40 [engine.py:1] Loading weights took 388.2 seconds"],
    ("decode-dpd-test-5c4b-fghij", "decode-dpd-test"): [
        "INFO 11-29 10:00:01 [config.py:1] LMCache config: {'enable_pd': True, 'pd_role': 'receiver', "
        "'transfer_channel': 'nixl'}"],
}


def live_crd(schema: dict[str, Any] | None = None, version: str = "v1") -> dict[str, Any]:
    """The InferenceEndpointConfig CRD as the API server returns it: the shipped ``v1`` schema unless given."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": CRD_NAME},
            "spec": {"group": "inference.sagemaker.aws.amazon.com", "names": {"kind": "InferenceEndpointConfig"},
                     "scope": "Namespaced", "versions": [
                         {"name": version, "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": copy.deepcopy(v1_schema()) if schema is None else schema}}]}}


def healthy_cluster(**overrides: Answer) -> dict[tuple[str, ...], Answer]:
    """The recorded state of a deployed ``default/dpd-test`` (every key can be overridden)."""
    answers: dict[tuple[str, ...], Answer] = {
        ("inferenceendpointconfigs", "default", "dpd-test"): endpoint_config("DeploymentComplete",
                                                                            READY_CONDITIONS),
        ("deployments", "default", "prefill-dpd-test"): deployment("prefill-dpd-test", "default", 1),
        ("deployments", "default", "decode-dpd-test"): deployment("decode-dpd-test", "default", 1),
        ("deployments", "hyperpod-inference-system", "dpd-test-default-router"):
            deployment("dpd-test-default-router", "hyperpod-inference-system", 1),
        ("services", "hyperpod-inference-system", "dpd-test-default-routing-service"):
            service("dpd-test-default-routing-service"),
        ("pods", "default", PREFILL_SELECTOR): pod_list(pod("prefill-dpd-test-7d9f-abcde", "default", "prefill", 3)),
        ("pods", "default", DECODE_SELECTOR): pod_list(pod("decode-dpd-test-5c4b-fghij", "default", "decode", 3)),
        ("pods", "hyperpod-inference-system", ""): pod_list(
            pod("dpd-test-default-router-6f8d-klmno", "hyperpod-inference-system", None, 2, total=2),
            pod("hyperpod-inference-controller-manager-1", "hyperpod-inference-system", None, 1, total=1)),
        ("ingresses", "hyperpod-inference-system", "alb-dpd-test-default"): ingress(),
        ("networkpolicies", "default"): network_policies(),
        ("networkpolicies", "hyperpod-inference-system"): network_policies(namespace="hyperpod-inference-system"),
        ("customresourcedefinitions", CRD_NAME): live_crd(),
    }
    answers.update(overrides)
    return answers


@dataclass
class FakeResponse:
    status: int
    pieces: list[bytes]

    def chunks(self) -> Iterator[bytes]:
        yield from self.pieces


@dataclass
class FakeTransport:
    """The router: answers each POST with ``respond(body)`` and appends its routing line to the log."""

    respond: Callable[[Mapping[str, Any]], FakeResponse]
    log: list[str]
    threshold: int = 4096
    requests: list[tuple[str, str, int, str, Mapping[str, Any]]] = field(default_factory=list)

    def post(self, namespace: str, service: str, port: int, path: str, body: Mapping[str, Any],
             *, timeout: float) -> FakeResponse:
        self.requests.append((namespace, service, port, path, body))
        text = json.dumps(body.get("messages") or body.get("prompt"))
        tokens = len(text) // 4  # the router's estimate, roughly
        self.log.append(f"[INFO] Conditional routing: estimated_tokens={tokens}, threshold={self.threshold}, "
                        f"disaggregate={tokens >= self.threshold}")
        return self.respond(body)

    def pod_post(self, namespace: str, pod: str, port: int, path: str, body: Mapping[str, Any],
                 *, timeout: float) -> FakeResponse:
        """A decode pod answering straight through the pod proxy (no routing line)."""
        self.requests.append((namespace, pod, port, path, body))
        return self.respond(body)


DECODE_METRICS = "decode-dpd-test-5c4b-fghij:8000"
PREFILL_METRICS = "prefill-dpd-test-7d9f-abcde:8000"
_VLLM_LABELS = 'engine="0",model_name="/opt/ml/model"'


def vllm_metrics(external: float, *, local_compute: float = 14.0, prompt: float | None = None) -> str:
    """vLLM 0.19.0's exposition of the series the alerts read (format as ``prometheus_client`` writes it;
    names, kinds and labels as ``vllm/v1/metrics/loggers.py`` defines them). ``prompt`` is
    ``vllm:prompt_tokens_total``: by default every token counted by source (no cache hit)."""
    labels = _VLLM_LABELS
    total = external + local_compute if prompt is None else prompt
    return "\n".join([
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{labels}}} {total}",
        "# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.",
        "# TYPE vllm:prompt_tokens_by_source_total counter",
        f'vllm:prompt_tokens_by_source_total{{{labels},source="local_compute"}} {local_compute}',
        f'vllm:prompt_tokens_by_source_total{{{labels},source="local_cache_hit"}} 0.0',
        f'vllm:prompt_tokens_by_source_total{{{labels},source="external_kv_transfer"}} {external}',
        *_common_vllm(labels),
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} 0.12",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{labels}}} 0.0",
        "# TYPE vllm:inter_token_latency_seconds histogram",
        f'vllm:inter_token_latency_seconds_bucket{{{labels},le="0.01"}} 0.0',
        f'vllm:inter_token_latency_seconds_bucket{{{labels},le="+Inf"}} 15.0',
        f"vllm:inter_token_latency_seconds_count{{{labels}}} 15.0", ""])


def _common_vllm(labels: str) -> list[str]:
    return ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{labels}}} 0.0",
            "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{labels}}} 0.0"]


def prefill_metrics(*, lmcache: bool = True) -> str:
    """The prefiller's /metrics; LMCache's store histogram only when its multiprocess registry is shared
    (labels as ``lmcache/observability.py`` 0.4.3 gives them)."""
    lines = _common_vllm(_VLLM_LABELS)
    if lmcache:
        labels = 'model_name="/opt/ml/model",role="worker",served_model_name="/opt/ml/model",worker_id="0"'
        lines += ["# TYPE lmcache:store_put_time histogram",
                  f'lmcache:store_put_time_bucket{{{labels},le="0.01"}} 24.0',
                  f'lmcache:store_put_time_bucket{{{labels},le="+Inf"}} 24.0',
                  f"lmcache:store_put_time_count{{{labels}}} 24.0"]
    return "\n".join([*lines, ""])


def transferring_decoder() -> dict[str, list[str]]:
    """The decoder's counter before and after the long prompt (its KV arrived), and the prefiller's metrics."""
    # All prompt tokens but the last arrive; the decoder computes that one itself (LMCache's full-hit rule).
    return {DECODE_METRICS: [vllm_metrics(0.0), vllm_metrics(6120.0, local_compute=15.0)],
            PREFILL_METRICS: [prefill_metrics()]}


def sse(*tokens: str, finish: str = "length") -> FakeResponse:
    """A streamed answer as vLLM sends it: the finish_reason in the last token's chunk."""
    events = [b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": (
        finish if i == len(tokens) - 1 else None)}]}).encode() + b"\n\n" for i, t in enumerate(tokens)]
    return FakeResponse(200, [b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n', *events,
                              b"data: [DONE]\n\n"])


@pytest.fixture
def make_kube() -> Callable[..., tuple[KubeApi, FakeCore]]:
    def make(answers: dict[tuple[str, ...], Answer] | None = None, *,
             transport: FakeTransport | None = None,
             logs: dict[Any, Any] | None = None,
             metrics: dict[str, list[str]] | None = None) -> tuple[KubeApi, FakeCore]:
        recorded = answers if answers is not None else healthy_cluster()
        core = FakeCore(recorded, logs={**WORKER_LOGS, **(logs or {})},
                        metrics=metrics if metrics is not None else transferring_decoder())
        return KubeApi(custom=FakeCustomObjects(recorded), apps=FakeApps(recorded), core=core,
                       transport=transport, networking=FakeNetworking(recorded)), core

    return make


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fakes() -> Any:
    """This module, for its builders (``fakes.pod(...)``): test modules cannot import a conftest."""
    import sys

    return sys.modules[__name__]
