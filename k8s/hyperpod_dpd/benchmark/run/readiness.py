"""What ``bench`` checks before it creates any Job, so a run that cannot work fails in seconds, not minutes.

The traffic against the spec (the routing threshold and ``max_model_len``: :mod:`route`), the
``model`` the requests name against the spec's ``--served-model-name``, and that every endpoint to
benchmark exists on the cluster (the aggregated twin only exists with ``-c aggregated_baseline=true``),
and that the Kubernetes user may do everything the run will do (SelfSubjectAccessReview).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from hyperpod_dpd.benchmark.run.results import METADATA_FILE
from hyperpod_dpd.benchmark.run.target import BenchmarkTarget
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.contracts.operator import IEC_GROUP, IEC_PLURAL, OPERATOR_NAMESPACE
from hyperpod_dpd.contracts.vllm import flag_values
from hyperpod_dpd.errors import Problem
from hyperpod_dpd.spec import DpdSpec

SERVED_MODEL_FLAG = "--served-model-name"


def served_model(spec: DpdSpec) -> str:
    """The ``model`` vLLM accepts: the first ``--served-model-name`` in the decoder's args, else the mount path.

    The decoder's per-role args come after the shared ones and win (the operator's merge rule).
    """
    value = flag_values([*spec.args, *spec.decode.args]).get(SERVED_MODEL_FLAG)
    names = (value or "").split()
    return names[0] if names else spec.model.mount_path


def missing_endpoints(kube: KubeApi, targets: Sequence[tuple[str, BenchmarkTarget]], *,
                      namespace: str) -> list[Problem]:
    """Every target whose InferenceEndpointConfig is not in the endpoint's ``namespace`` (the Job may run
    elsewhere, with ``--namespace``)."""
    problems = []
    for label, target in targets:
        if kube.endpoint_config(namespace, target.name) is None:
            fix = ("deploy the stack with -c aggregated_baseline=true, or drop --aggregated" if label == "aggregated"
                   else "deploy the endpoint first, or pass the spec it was deployed from")
            problems.append(Problem(field=f"{label} endpoint", value=f"{namespace}/{target.name}",
                                    message="has no InferenceEndpointConfig on the cluster", fix=fix))
    return problems


def api_base_of(files: Mapping[str, str]) -> str | None:
    """The router the run measured: the ``--api-base`` genai-bench recorded in ``experiment_metadata.json``
    (its ``cmd``), or the first URL of an aiperf summary's ``input_config``; None when neither says."""
    import json  # noqa: PLC0415

    from hyperpod_dpd.benchmark.run.aiperf_results import AIPERF_FILE  # noqa: PLC0415

    try:
        for name in sorted(files):
            if AIPERF_FILE.match(name):
                urls = ((json.loads(files[name]).get("input_config") or {}).get("endpoint") or {}).get("urls") or []
                return str(urls[0]) if urls else None
        command = str(json.loads(files.get(METADATA_FILE) or "{}").get("cmd") or "")
        words = shlex.split(command)
    except (ValueError, AttributeError, TypeError):
        return None
    return words[words.index("--api-base") + 1] if "--api-base" in words[:-1] else None


@dataclass(frozen=True)
class Permission:
    """One Kubernetes RBAC verb on a resource (``pods/proxy`` is resource ``pods``, subresource ``proxy``)."""

    verb: str
    resource: str
    namespace: str
    group: str = ""
    subresource: str = ""

    def render(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {resource}{'.' + self.group if self.group else ''} in {self.namespace}"


def needed_permissions(targets: Sequence[tuple[str, BenchmarkTarget]], spec: DpdSpec, *,
                       missing_accounts: Collection[str] = ()) -> list[Permission]:
    """What ``bench`` does on the cluster: the Job and its ServiceAccount (created only in the namespaces
    of ``missing_accounts``), the pod's progress and log, the endpoints, and the DPD counters through the
    pod proxy."""
    needed = []
    for _, target in targets:
        ns = target.namespace
        if ns in missing_accounts:
            needed.append(Permission("create", "serviceaccounts", ns))
        needed += [Permission("create", "jobs", ns, group="batch"),
                   Permission("get", "jobs", ns, group="batch"), Permission("delete", "jobs", ns, group="batch"),
                   Permission("list", "pods", ns), Permission("get", "pods", ns, subresource="log")]
    needed += [Permission("get", IEC_PLURAL, spec.namespace, group=IEC_GROUP),
               Permission("list", "pods", OPERATOR_NAMESPACE),
               Permission("get", "pods", OPERATOR_NAMESPACE, subresource="proxy"),
               # The router's routing line, counted when its metrics carry no routing counter.
               Permission("get", "pods", OPERATOR_NAMESPACE, subresource="log"),
               Permission("list", "pods", spec.namespace),
               Permission("get", "pods", spec.namespace, subresource="proxy")]
    return list(dict.fromkeys(needed))


def permission_problems(allowed: Callable[[Permission], bool | None],
                        needed: Sequence[Permission]) -> list[Problem]:
    """Every permission the cluster denies (``allowed`` answers None when it cannot tell: not a problem)."""
    denied = [p for p in needed if allowed(p) is False]
    if not denied:
        return []
    return [Problem(field="RBAC", value=", ".join(p.render() for p in denied),
                    message="is denied to the current Kubernetes user, so the run would fail part-way",
                    fix="grant these verbs (a Role and RoleBinding per namespace), or run as a user who has them")]
