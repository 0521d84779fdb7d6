"""Label matchers that pick one endpoint's series out of a cluster's metrics.

The HyperPod pipeline labels every inference series with ``resource_name`` (``prefill-<name>`` or
``decode-<name>``, the operator's Deployment names, as AWS's Inference dashboard matches them) and
``namespace``. The router's ``dpd_*`` series carry ``resource_name`` too, but its value is not
documented: the rules read the operator's router Deployment name ``<name>-<namespace>-router``
(optionally with a pod suffix), which holds the namespace, or the bare endpoint name only together with
the endpoint's ``namespace`` label, and nothing else: endpoint ``dpd`` never reads ``dpd-test``'s router
(PromQL regexes are anchored at both ends), nor ``dpd`` in another namespace. Kubernetes series
(kube-state-metrics, DCGM) carry the object's own ``namespace``, ``deployment`` and ``pod`` labels; the
pipeline labels each model pod's series with ``pod_name`` (AWS's inference observability page).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hyperpod_dpd.contracts.operator import role_deployment, router_deployment
from hyperpod_dpd.spec import DpdSpec

# A Deployment's pods are ``<deployment>-<replicaset hash>-<suffix>``: exactly two more parts, so the
# pods of ``prefill-dpd`` never match those of ``prefill-dpd-test``.
POD_OF_DEPLOYMENT = "-[a-z0-9]+-[a-z0-9]+"
# The label the HyperPod pipeline puts the model pod's name in (AWS's Inference dashboard counts
# replicas with ``count by (pod_name)``).
PIPELINE_POD = "pod_name"


def regex_literal(text: str) -> str:
    """``text`` as a literal inside a PromQL regex string (names may hold dots)."""
    return text.replace(".", "\\\\.")


@dataclass(frozen=True, kw_only=True)
class EndpointSelectors:
    """PromQL label matchers (without braces) for one endpoint's series.

    ``prefill``/``decode``/``pods`` select the HyperPod pipeline's model-pod series, ``routers`` the
    router's (two forms, see :meth:`router_series`), ``deployments``-style matchers the Kubernetes objects
    (see :meth:`deployment`, :meth:`pod`).
    """

    prefill: str
    decode: str
    pods: str
    routers: tuple[str, str]
    namespace: str

    @classmethod
    def of(cls, spec: DpdSpec) -> EndpointSelectors:
        namespace = f'namespace="{spec.namespace}"'
        prefill, decode = role_deployment(spec, "prefill"), role_deployment(spec, "decode")
        router = regex_literal(router_deployment(spec))
        return cls(prefill=f'resource_name="{prefill}", {namespace}',
                   decode=f'resource_name="{decode}", {namespace}',
                   pods=f'resource_name=~"{prefill}|{decode}", {namespace}',
                   routers=(f'resource_name=~"{router}({POD_OF_DEPLOYMENT})?"',
                            f'resource_name="{spec.name}", {namespace}'),
                   namespace=namespace)

    def router_series(self, metric: str, per_series: Callable[[str], str] = lambda selector: selector,
                      *extra: str) -> str:
        """``per_series`` applied to the router's series of ``metric`` under either label form, joined by ``or``.

        ``per_series`` takes a selector and returns an instant-vector expression, e.g. a ``rate()``; ``extra``
        matchers are added to both forms.
        """
        first, second = (per_series(select(metric, matchers, *extra)) for matchers in self.routers)
        return f"({first} or {second})"

    def deployment(self, name: str) -> str:
        """kube-state-metrics' series of one Deployment of the endpoint."""
        return f'{self.namespace}, deployment="{name}"'

    def pod(self, *deployments: str) -> str:
        """Series labelled with a pod of the given Deployments (kube-state-metrics, DCGM)."""
        names = "|".join(regex_literal(d) for d in deployments)
        return f'{self.namespace}, pod=~"({names}){POD_OF_DEPLOYMENT}"'


def le_matcher(bound: float) -> str:
    """The ``le`` matcher of one finite bucket bound, in either of the forms exporters write it.

    prometheus_client (vLLM, LMCache) writes ``5000.0`` and ``0.05``, Go's client and some pipelines
    ``5000``: an integral bound matches with or without ``.0``.
    """
    text = f"{bound:g}"
    optional = "" if "." in text or "e" in text else "(\\\\.0)?"
    return f'le=~"{regex_literal(text)}{optional}"'


def select(metric: str, matchers: str, *extra: str) -> str:
    """``metric{matchers, extra...}``."""
    return f"{metric}{{{', '.join((matchers, *extra))}}}"
