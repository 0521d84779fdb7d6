"""The benchmark's Kubernetes writes: a ServiceAccount, a Job and a ConfigMap, beside :class:`KubeApi`'s reads.

Reached, like :class:`KubeApi`, only through the Protocols below, so tests hand in recorded clients.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from hyperpod_dpd.clients.kube import JsonDict, KubeApi, KubeError


class BatchApi(Protocol):
    def create_namespaced_job(self, namespace: str, body: Any) -> Any: ...

    def read_namespaced_job(self, name: str, namespace: str) -> Any: ...

    def delete_namespaced_job(self, name: str, namespace: str, *, propagation_policy: str) -> Any: ...


class ServiceAccountApi(Protocol):
    def read_namespaced_service_account(self, name: str, namespace: str) -> Any: ...

    def create_namespaced_service_account(self, namespace: str, body: Any) -> Any: ...


class ConfigMapApi(Protocol):
    def create_namespaced_config_map(self, namespace: str, body: Any) -> Any: ...

    def delete_namespaced_config_map(self, name: str, namespace: str) -> Any: ...


class AccessReviewApi(Protocol):
    def create_self_subject_access_review(self, body: Any) -> Any: ...


@dataclass
class BenchmarkKube(KubeApi):
    """:class:`KubeApi` plus the writes a benchmark needs: create a ServiceAccount, create/read/delete a Job."""

    batch: BatchApi | None = None
    accounts: ServiceAccountApi | None = None
    access: AccessReviewApi | None = None
    config_maps: ConfigMapApi | None = None

    @classmethod
    def from_kube(cls, kube: KubeApi) -> BenchmarkKube:
        """The batch client on the same connection as ``kube`` (see ``load_kube``)."""
        from kubernetes import client  # noqa: PLC0415 - keeps `hyperpod-dpd --help` fast

        api_client = getattr(kube.core, "api_client", None)
        return cls(custom=kube.custom, apps=kube.apps, core=kube.core, transport=kube.transport,
                   batch=client.BatchV1Api(api_client), accounts=kube.core,  # type: ignore[arg-type]
                   access=client.AuthorizationV1Api(api_client),
                   config_maps=kube.core)  # type: ignore[arg-type]

    def _batch(self) -> BatchApi:
        if self.batch is None:
            raise KubeError("no batch/v1 client: build BenchmarkKube with batch=")
        return self.batch

    def _accounts(self) -> ServiceAccountApi:
        if self.accounts is None:
            raise KubeError("no ServiceAccount client: build BenchmarkKube with accounts=")
        return self.accounts

    def _config_maps(self) -> ConfigMapApi:
        if self.config_maps is None:
            raise KubeError("no ConfigMap client: build BenchmarkKube with config_maps=")
        return self.config_maps

    def service_account(self, namespace: str, name: str) -> JsonDict | None:
        found: JsonDict | None = self._call(f"get serviceaccount {namespace}/{name}",
                                            self._accounts().read_namespaced_service_account, name, namespace)
        return found

    def create_service_account(self, namespace: str, body: JsonDict) -> bool:
        """Create it unless it exists; False when it does (kept as it is: the stack manages it), so a user
        who may not create ServiceAccounts can still run with the stack's."""
        name = body["metadata"]["name"]
        if self.service_account(namespace, name) is not None:
            return False
        try:
            self._call(f"create serviceaccount {namespace}/{name}", self._accounts().create_namespaced_service_account,
                       namespace, body, missing_ok=False)
        except KubeError as err:
            if err.status == 409:
                return False
            raise
        return True

    def allowed(self, verb: str, resource: str, namespace: str, *, group: str = "",
                subresource: str = "") -> bool | None:
        """Whether the current user may (a SelfSubjectAccessReview); None when the cluster cannot say."""
        if self.access is None:
            return None
        attributes = {"verb": verb, "resource": resource, "namespace": namespace, "group": group,
                      **({"subresource": subresource} if subresource else {})}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes}}
        try:
            review = self._call("create selfsubjectaccessreview", self.access.create_self_subject_access_review,
                                body, missing_ok=False)
        except KubeError:
            return None
        return bool(((review or {}).get("status") or {}).get("allowed"))

    def create_job(self, namespace: str, body: JsonDict) -> None:
        name = body["metadata"]["name"]
        try:
            self._call(f"create job {namespace}/{name}", self._batch().create_namespaced_job, namespace, body,
                       missing_ok=False)
        except KubeError as err:
            if err.status == 409:
                raise KubeError(f"a Job {namespace}/{name} already exists: pass another --run-id, or "
                                f"`kubectl delete job {name} -n {namespace}`", status=409) from None
            raise

    def job(self, namespace: str, name: str) -> JsonDict | None:
        found: JsonDict | None = self._call(f"get job {namespace}/{name}", self._batch().read_namespaced_job,
                                            name, namespace)
        return found

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete the Job and its pod (background propagation); already gone is fine."""
        self._call(f"delete job {namespace}/{name}", self._batch().delete_namespaced_job, name, namespace,
                   propagation_policy="Background")

    def create_config_map(self, namespace: str, body: JsonDict) -> None:
        """Create a ConfigMap (``bench --trace``'s trace); one of the same name is an error naming the fix."""
        name = body["metadata"]["name"]
        try:
            self._call(f"create configmap {namespace}/{name}", self._config_maps().create_namespaced_config_map,
                       namespace, body, missing_ok=False)
        except KubeError as err:
            if err.status == 409:
                raise KubeError(f"a ConfigMap {namespace}/{name} already exists: pass another --run-id, or "
                                f"`kubectl delete configmap {name} -n {namespace}`", status=409) from None
            raise

    def delete_config_map(self, namespace: str, name: str) -> None:
        """Delete a ConfigMap; already gone is fine."""
        self._call(f"delete configmap {namespace}/{name}", self._config_maps().delete_namespaced_config_map, name,
                   namespace)
