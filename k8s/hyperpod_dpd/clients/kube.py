"""The few Kubernetes calls verify makes, behind typed seams.

The Kubernetes Python client is untyped, so it is reached only through the Protocols below.
:class:`KubeApi` turns its model objects into plain JSON dictionaries (camelCase keys, as
``kubectl get -o json`` prints them), so every check reads one shape whether the objects come from
a cluster or from a recorded response in a test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from hyperpod_dpd.contracts.operator import IEC_GROUP, IEC_PLURAL, IEC_VERSION
from hyperpod_dpd.errors import DpdError

JsonDict = dict[str, Any]


# --- seams ---------------------------------------------------------------------------------------


class CustomObjects(Protocol):
    def get_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                     name: str) -> Any: ...

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> Any: ...


class AppsApi(Protocol):
    def read_namespaced_deployment(self, name: str, namespace: str) -> Any: ...


class CoreApi(Protocol):
    def list_namespaced_pod(self, namespace: str, *, label_selector: str) -> Any: ...

    def read_namespaced_service(self, name: str, namespace: str) -> Any: ...

    def read_namespaced_pod_log(self, name: str, namespace: str, *, container: str,
                                since_seconds: int | None = None, limit_bytes: int | None = None) -> Any: ...

    def connect_get_namespaced_pod_proxy_with_path(self, name: str, namespace: str, path: str) -> Any: ...

    def delete_namespaced_pod(self, name: str, namespace: str) -> Any: ...


class NetworkingApi(Protocol):
    def read_namespaced_ingress(self, name: str, namespace: str) -> Any: ...

    def list_namespaced_network_policy(self, namespace: str) -> Any: ...


class StreamedResponse(Protocol):
    """An HTTP response whose body arrives in pieces, so time to first token can be measured."""

    status: int

    def chunks(self) -> Iterator[bytes]: ...


class RouterTransport(Protocol):
    def post(self, namespace: str, service: str, port: int, path: str, body: Mapping[str, Any],
             *, timeout: float) -> StreamedResponse: ...

    def pod_post(self, namespace: str, pod: str, port: int, path: str, body: Mapping[str, Any],
                 *, timeout: float) -> StreamedResponse: ...


class KubeError(DpdError):
    """A Kubernetes API call failed; the message is one line with the next step."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def describe_api_error(err: Exception, what: str) -> str:
    status = getattr(err, "status", None)
    reason = getattr(err, "reason", None) or ""
    body = getattr(err, "body", None)
    message = ""
    if body:
        try:
            message = str(json.loads(body).get("message", ""))
        except (ValueError, AttributeError):
            message = str(body)[:200]
    if status == 401:
        return (f"{what}: the cluster rejected the credentials (401): refresh the kubeconfig with "
                "`aws eks update-kubeconfig --name <eks-cluster>` and check the AWS credentials")
    if status == 403:
        return f"{what}: forbidden (403){': ' + message if message else ''}: the kubeconfig user needs RBAC for it"
    if status:
        return f"{what}: HTTP {status} {reason}{': ' + message if message else ''}".rstrip()
    if type(err).__name__ == "ConfigException":
        return f"{what}: the kubeconfig credentials failed ({str(err)[:200]}): check `aws eks get-token` works"
    return f"{what}: cannot reach the Kubernetes API ({type(err).__name__}: {str(err)[:200]})"


def _to_dict(obj: Any) -> Any:
    if obj is None or isinstance(obj, dict | list | str | int | float | bool):
        return obj
    from kubernetes.client import ApiClient  # noqa: PLC0415

    # sanitize_for_serialization needs no configuration, so skip building a connection pool
    sanitizer: Any = ApiClient.__new__(ApiClient)
    return sanitizer.sanitize_for_serialization(obj)


def _api_errors() -> tuple[type[Exception], ...]:
    """What a call can raise: HTTP errors, connection errors, a failing exec credential plugin, bad data."""
    from kubernetes.client.exceptions import ApiException  # noqa: PLC0415
    from kubernetes.config import ConfigException  # noqa: PLC0415
    from urllib3.exceptions import HTTPError  # noqa: PLC0415

    return (ApiException, HTTPError, OSError, ConfigException, ValueError)


@dataclass
class KubeApi:
    """Read-only views of one cluster, plus a POST through the router for ``--smoke``."""

    custom: CustomObjects
    apps: AppsApi
    core: CoreApi
    transport: RouterTransport | None = None
    networking: NetworkingApi | None = None

    def _call(self, what: str, call: Any, *args: Any, missing_ok: bool = True, **kwargs: Any) -> Any:
        try:
            return _to_dict(call(*args, **kwargs))
        except _api_errors() as err:
            if missing_ok and getattr(err, "status", None) == 404:
                return None
            raise KubeError(describe_api_error(err, what), status=getattr(err, "status", None)) from None

    def endpoint_config(self, namespace: str, name: str) -> JsonDict | None:
        found: JsonDict | None = self._call(
            f"get inferenceendpointconfig {namespace}/{name}", self.custom.get_namespaced_custom_object,
            IEC_GROUP, IEC_VERSION, namespace, IEC_PLURAL, name)
        return found

    def crd(self, name: str) -> JsonDict | None:
        """A CustomResourceDefinition (cluster-scoped ``apiextensions.k8s.io/v1``), or None when absent."""
        found: JsonDict | None = self._call(
            f"get customresourcedefinition {name}", self.custom.get_cluster_custom_object,
            "apiextensions.k8s.io", "v1", "customresourcedefinitions", name)
        return found

    def deployment(self, namespace: str, name: str) -> JsonDict | None:
        found: JsonDict | None = self._call(
            f"get deployment {namespace}/{name}", self.apps.read_namespaced_deployment, name, namespace)
        return found

    def service(self, namespace: str, name: str) -> JsonDict | None:
        found: JsonDict | None = self._call(
            f"get service {namespace}/{name}", self.core.read_namespaced_service, name, namespace)
        return found

    def ingress(self, namespace: str, name: str) -> JsonDict | None:
        if self.networking is None:
            raise KubeError(f"get ingress {namespace}/{name}: no networking.k8s.io client")
        found: JsonDict | None = self._call(
            f"get ingress {namespace}/{name}", self.networking.read_namespaced_ingress, name, namespace)
        return found

    def network_policies(self, namespace: str) -> list[JsonDict]:
        if self.networking is None:
            raise KubeError(f"list networkpolicies -n {namespace}: no networking.k8s.io client")
        found = self._call(f"list networkpolicies -n {namespace}", self.networking.list_namespaced_network_policy,
                           namespace, missing_ok=False)
        items: list[JsonDict] = (found or {}).get("items") or []
        return items

    def delete_pod(self, namespace: str, pod: str) -> None:
        """Delete one pod (its Deployment makes a new one): ``verify --restart-drill``'s only write."""
        self._call(f"delete pod {pod} -n {namespace}", self.core.delete_namespaced_pod, pod, namespace,
                   missing_ok=False)

    def pods(self, namespace: str, label_selector: str) -> list[JsonDict]:
        found = self._call(f"list pods -n {namespace} -l {label_selector}", self.core.list_namespaced_pod,
                           namespace, label_selector=label_selector, missing_ok=False)
        items: list[JsonDict] = (found or {}).get("items") or []
        return items

    def pod_log(self, namespace: str, pod: str, container: str, since_seconds: int | None = None,
                limit_bytes: int | None = None) -> str:
        """The container's log: the last ``since_seconds``, or the first ``limit_bytes`` from its start."""
        options: dict[str, int] = {}
        if since_seconds is not None:
            options["since_seconds"] = since_seconds
        if limit_bytes is not None:
            options["limit_bytes"] = limit_bytes
        text = self._call(f"logs {namespace}/{pod} -c {container}", self.core.read_namespaced_pod_log,
                          pod, namespace, container=container, missing_ok=False, **options)
        return str(text or "")

    def pod_get(self, namespace: str, pod: str, port: int, path: str) -> str:
        """GET ``path`` on the pod's ``port`` through the API server's pod proxy (RBAC: get pods/proxy)."""
        text = self._call(f"GET {namespace}/{pod}:{port}/{path.lstrip('/')}",
                          self.core.connect_get_namespaced_pod_proxy_with_path, f"{pod}:{port}", namespace,
                          path.lstrip("/"), missing_ok=False)
        return str(text or "")


# --- the real thing ------------------------------------------------------------------------------


class _Urllib3Response:
    def __init__(self, status: int, raw: Any) -> None:
        self.status = status
        self._raw = raw

    def chunks(self) -> Iterator[bytes]:
        """The body as it arrives; a dropped or timed-out stream is a :class:`KubeError`."""
        try:
            if getattr(self._raw, "chunked", False) and hasattr(self._raw, "read_chunked"):
                yield from self._raw.read_chunked(decode_content=True)
            else:
                while True:
                    piece = self._raw.read1(4096) if hasattr(self._raw, "read1") else self._raw.read(4096)
                    if not piece:
                        break
                    yield piece
        except _api_errors() as err:
            raise KubeError(f"reading the router's answer failed ({type(err).__name__}: {str(err)[:200]})") from None
        finally:
            self._raw.release_conn()


class ServiceProxyTransport:
    """POST to a Service through the API server's service proxy (``services/<name>:<port>/proxy``).

    Works from a laptop with nothing but the kubeconfig; needs RBAC ``create`` on ``services/proxy``
    in ``hyperpod-inference-system``. The router speaks plain HTTP on port 443 (the docs call it with
    ``http://...:443``), which is the proxy's default scheme.
    """

    def __init__(self, api_client: Any) -> None:
        self._api = api_client

    def post(self, namespace: str, service: str, port: int, path: str, body: Mapping[str, Any],
             *, timeout: float) -> StreamedResponse:
        return self._post(f"/api/v1/namespaces/{quote(namespace)}/services/{quote(service)}:{port}/proxy/"
                          f"{quote(path.lstrip('/'), safe='/')}", f"POST {service}:{port}/{path}", body, timeout)

    def pod_post(self, namespace: str, pod: str, port: int, path: str, body: Mapping[str, Any],
                 *, timeout: float) -> StreamedResponse:
        """POST to one pod's ``port`` through the pod proxy (RBAC: ``create`` on ``pods/proxy``)."""
        return self._post(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}:{port}/proxy/"
                          f"{quote(path.lstrip('/'), safe='/')}", f"POST {namespace}/{pod}:{port}/{path}", body,
                          timeout)

    def _post(self, resource: str, what: str, body: Mapping[str, Any], timeout: float) -> StreamedResponse:
        method, url, headers, payload, _ = self._api.param_serialize(
            "POST", resource, header_params={"Content-Type": "application/json",
                                             "Accept": "text/event-stream, application/json"},
            body=dict(body), auth_settings=["BearerToken"])
        try:
            response = self._api.call_api(method, url, header_params=headers, body=payload,
                                          _request_timeout=(10.0, timeout))
        except _api_errors() as err:
            raise KubeError(describe_api_error(err, what)) from None
        return _Urllib3Response(int(response.status), response.response)


def load_kube(context: str | None = None, kubeconfig: str | None = None) -> KubeApi:
    """Clients for the kubeconfig context (the current one by default); :class:`KubeError` if unusable."""
    from kubernetes import client, config  # noqa: PLC0415 - keeps `hyperpod-dpd --help` fast

    new_client: Any = config.new_client_from_config
    try:
        api_client = new_client(config_file=kubeconfig, context=context)
    except (config.ConfigException, OSError, ValueError) as err:
        where = f"context {context!r}" if context else "the current context"
        raise KubeError(f"cannot load the kubeconfig ({where}): {err}; run `aws eks update-kubeconfig "
                        "--name <eks-cluster>` or pass --kubeconfig/--kube-context") from None
    return KubeApi(custom=client.CustomObjectsApi(api_client), apps=client.AppsV1Api(api_client),
                   core=client.CoreV1Api(api_client), transport=ServiceProxyTransport(api_client),
                   networking=client.NetworkingV1Api(api_client))
