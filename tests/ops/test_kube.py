"""The Kubernetes seam: recorded responses through the real client's models, the service proxy, kubeconfig."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from hyperpod_dpd.clients.kube import KubeError, ServiceProxyTransport, describe_api_error, load_kube


def test_models_become_kubectl_shaped_json(make_kube: Any) -> None:
    kube, _ = make_kube()
    deployment = kube.deployment("default", "prefill-dpd-test")
    assert deployment is not None
    assert deployment["status"]["readyReplicas"] == 1  # camelCase, as `kubectl get -o json` prints it
    pods = kube.pods("default", "inference.sagemaker.aws.amazon.com/dpd-role=prefill")
    assert pods[0]["metadata"]["labels"] == {"inference.sagemaker.aws.amazon.com/dpd-role": "prefill"}
    assert pods[0]["status"]["containerStatuses"][0]["ready"] is True
    assert kube.deployment("default", "absent") is None


def test_listing_pods_forbidden_raises_a_one_line_error(make_kube: Any, fakes: Any) -> None:
    kube, _ = make_kube({("pods", "default", "x=y"): fakes.api_error(403, 'pods is forbidden: User "dev"')})
    with pytest.raises(KubeError, match=r'^list pods -n default -l x=y: forbidden \(403\): pods is forbidden'):
        kube.pods("default", "x=y")


def test_expired_cluster_credentials_say_how_to_refresh(fakes: Any) -> None:
    text = describe_api_error(fakes.api_error(401), "get deployment default/x")
    assert text == ("get deployment default/x: the cluster rejected the credentials (401): refresh the kubeconfig "
                    "with `aws eks update-kubeconfig --name <eks-cluster>` and check the AWS credentials")


class _Raw:
    def __init__(self, pieces: list[bytes], chunked: bool) -> None:
        self.pieces, self.chunked, self.released = list(pieces), chunked, False

    def read_chunked(self, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.pieces

    def read1(self, amount: int) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""

    def release_conn(self) -> None:
        self.released = True


class _RestResponse:
    def __init__(self, status: int, raw: _Raw) -> None:
        self.status, self.response = status, raw


@pytest.mark.parametrize("chunked", [True, False])
def test_service_proxy_posts_json_with_the_bearer_token(monkeypatch: pytest.MonkeyPatch, chunked: bool) -> None:
    configuration = Configuration(host="https://eks.example:443")
    configuration.api_key = {"authorization": "Bearer t0ken"}
    api = ApiClient(configuration)
    sent: dict[str, Any] = {}
    raw = _Raw([b"data: {}\n\n", b"data: [DONE]\n\n"], chunked)

    def call_api(method: str, url: str, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> _RestResponse:
        sent.update(method=method, url=url, headers=header_params, body=body, timeout=_request_timeout)
        return _RestResponse(200, raw)

    monkeypatch.setattr(api, "call_api", call_api)
    response = ServiceProxyTransport(api).post("hyperpod-inference-system", "dpd-test-default-routing-service",
                                               443, "v1/chat/completions", {"stream": True}, timeout=30)
    assert sent["method"] == "POST"
    assert sent["url"] == ("https://eks.example:443/api/v1/namespaces/hyperpod-inference-system/services/"
                           "dpd-test-default-routing-service:443/proxy/v1/chat/completions")
    assert sent["headers"]["authorization"] == "Bearer t0ken"
    assert sent["headers"]["Content-Type"] == "application/json"
    assert sent["body"] == {"stream": True}
    assert sent["timeout"] == (10.0, 30)
    assert response.status == 200
    assert b"".join(response.chunks()) == b"data: {}\n\ndata: [DONE]\n\n"
    assert raw.released


def test_pod_proxy_posts_to_the_pods_port(monkeypatch: pytest.MonkeyPatch) -> None:
    api = ApiClient(Configuration(host="https://eks.example:443"))
    sent: dict[str, Any] = {}

    def call_api(method: str, url: str, header_params: Any = None, body: Any = None, post_params: Any = None,
                 _request_timeout: Any = None) -> _RestResponse:
        sent.update(method=method, url=url, body=body)
        return _RestResponse(200, _Raw([b"{}"], False))

    monkeypatch.setattr(api, "call_api", call_api)
    response = ServiceProxyTransport(api).pod_post("default", "decode-dpd-test-5c4b-fghij", 8000,
                                                   "/v1/chat/completions", {"seed": 1}, timeout=30)
    assert (sent["method"], sent["body"]) == ("POST", {"seed": 1})
    assert sent["url"] == ("https://eks.example:443/api/v1/namespaces/default/pods/decode-dpd-test-5c4b-fghij:8000/"
                           "proxy/v1/chat/completions")
    assert b"".join(response.chunks()) == b"{}"


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match=r"^cannot load the kubeconfig \(context 'prod'\): .*aws eks update-kubeconfig"):
        load_kube("prod", str(tmp_path / "nope"))


def test_a_kubeconfig_context_builds_real_clients(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text("""
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://eks.example"}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: dpd, context: {cluster: c, user: u}}]
current-context: dpd
""")
    kube = load_kube("dpd", str(config))
    assert type(kube.apps).__name__ == "AppsV1Api"
    assert isinstance(kube.transport, ServiceProxyTransport)


class _Http:
    """The urllib3 response the REST layer wraps, for a recorded body."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.reason = status, "OK" if status == 200 else "Not Found"
        self.data = (body if isinstance(body, str) else __import__("json").dumps(body)).encode()
        self.headers = {"Content-Type": "text/plain" if isinstance(body, str) else "application/json"}


def test_the_real_client_classes_against_recorded_http(monkeypatch: pytest.MonkeyPatch, fakes: Any) -> None:
    """The adapter's calls match the generated client's signatures, URLs and deserialization."""
    from kubernetes import client as k8s
    from kubernetes.client.rest import RESTResponse

    from hyperpod_dpd.clients.kube import KubeApi

    recorded = {
        "/apis/inference.sagemaker.aws.amazon.com/v1/namespaces/default/inferenceendpointconfigs/dpd-test":
            fakes.endpoint_config("DeploymentComplete", fakes.READY_CONDITIONS),
        "/apis/apps/v1/namespaces/default/deployments/prefill-dpd-test":
            fakes.deployment("prefill-dpd-test", "default", 1),
        "/api/v1/namespaces/default/pods": fakes.pod_list(fakes.pod("prefill-dpd-test-1", "default", "prefill", 3)),
        "/api/v1/namespaces/hyperpod-inference-system/services/dpd-test-default-routing-service":
            fakes.service("dpd-test-default-routing-service"),
        "/api/v1/namespaces/hyperpod-inference-system/pods/r-1/log":
            "[INFO] Conditional routing: estimated_tokens=12, threshold=4096, disaggregate=False\n",
    }
    urls: list[str] = []
    api = ApiClient(Configuration(host="https://eks.example"))

    def request(method: str, url: str, headers: Any = None, body: Any = None, post_params: Any = None,
                _request_timeout: Any = None) -> RESTResponse:
        urls.append(url)
        path = url.removeprefix("https://eks.example").split("?")[0]
        return RESTResponse(_Http(200, recorded[path]) if path in recorded else _Http(404, {"message": "nf"}))

    monkeypatch.setattr(api.rest_client, "request", request)
    kube = KubeApi(custom=k8s.CustomObjectsApi(api), apps=k8s.AppsV1Api(api), core=k8s.CoreV1Api(api))
    iec = kube.endpoint_config("default", "dpd-test")
    assert iec is not None and iec["status"]["state"] == "DeploymentComplete"
    deployment = kube.deployment("default", "prefill-dpd-test")
    assert deployment is not None and deployment["status"]["readyReplicas"] == 1
    assert kube.deployment("default", "absent") is None
    assert kube.pods("default", fakes.PREFILL_SELECTOR)[0]["metadata"]["name"] == "prefill-dpd-test-1"
    assert urls[-1].endswith("/pods?labelSelector=inference.sagemaker.aws.amazon.com/dpd-role%3Dprefill")
    assert kube.service("hyperpod-inference-system", "dpd-test-default-routing-service") is not None
    log = kube.pod_log("hyperpod-inference-system", "r-1", "router-container", 60)
    assert "disaggregate=False" in log
    assert "container=router-container" in urls[-1] and "sinceSeconds=60" in urls[-1]


def test_a_failing_exec_credential_plugin_is_one_line(make_kube: Any, fakes: Any) -> None:
    from kubernetes.config import ConfigException

    kube, _ = make_kube({("deployments", "default", "x"): ConfigException("exec: process returned 255. "
                                                                          "Unable to locate credentials")})
    with pytest.raises(KubeError) as raised:
        kube.deployment("default", "x")
    assert str(raised.value) == ("get deployment default/x: the kubeconfig credentials failed (exec: process "
                                 "returned 255. Unable to locate credentials): check `aws eks get-token` works")


def test_a_dropped_stream_is_a_kube_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3

    class Dropping(_Raw):
        def read_chunked(self, decode_content: bool = True) -> Iterator[bytes]:
            yield b"data: {}\n\n"
            raise urllib3.exceptions.ReadTimeoutError(None, "/", "Read timed out.")

    api = ApiClient(Configuration(host="https://eks.example"))
    raw = Dropping([], chunked=True)
    monkeypatch.setattr(api, "call_api", lambda *a, **k: _RestResponse(200, raw))
    response = ServiceProxyTransport(api).post("ns", "svc", 443, "v1/chat/completions", {}, timeout=1)
    chunks = response.chunks()
    assert next(chunks) == b"data: {}\n\n"
    with pytest.raises(KubeError, match=r"^reading the router's answer failed \(ReadTimeoutError"):
        next(chunks)
    assert raw.released
