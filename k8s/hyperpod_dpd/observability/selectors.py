"""Label matchers that pick one endpoint's series out of a cluster's metrics.

The HyperPod pipeline labels every inference series with ``resource_name`` (``prefill-<name>`` or
``decode-<name>``, the operator's Deployment names, as AWS's Inference dashboard matches them) and
``namespace``. The router's ``dpd_*`` series carry ``resource_name`` too, but its value is not
documented: the matcher accepts the operator's router Deployment name ``<name>-<namespace>-router``
(optionally with a pod suffix) or the bare endpoint name, and nothing else, so endpoint ``dpd`` never
reads ``dpd-test``'s router (PromQL regexes are anchored at both ends). Kubernetes series
(kube-state-metrics, DCGM) carry the object's own ``namespace``, ``deployment`` and ``pod`` labels.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.contracts.operator import role_deployment, router_deployment
from hyperpod_dpd.spec import DpdSpec

# A Deployment's pods are ``<deployment>-<replicaset hash>-<suffix>``: exactly two more parts, so the
# pods of ``prefill-dpd`` never match those of ``prefill-dpd-test``.
POD_OF_DEPLOYMENT = "-[a-z0-9]+-[a-z0-9]+"


def regex_literal(text: str) -> str:
    """``text`` as a literal inside a PromQL regex string (names may hold dots)."""
    return text.replace(".", "\\\\.")


@dataclass(frozen=True, kw_only=True)
class EndpointSelectors:
    """PromQL label matchers (without braces) for one endpoint's series.

    ``prefill``/``decode``/``pods`` select the HyperPod pipeline's model-pod series, ``router`` the
    router's, ``deployments``-style matchers the Kubernetes objects (see :meth:`deployment`, :meth:`pod`).
    """

    prefill: str
    decode: str
    pods: str
    router: str
    namespace: str

    @classmethod
    def of(cls, spec: DpdSpec) -> EndpointSelectors:
        namespace = f'namespace="{spec.namespace}"'
        prefill, decode = role_deployment(spec, "prefill"), role_deployment(spec, "decode")
        router = regex_literal(router_deployment(spec))
        return cls(prefill=f'resource_name="{prefill}", {namespace}',
                   decode=f'resource_name="{decode}", {namespace}',
                   pods=f'resource_name=~"{prefill}|{decode}", {namespace}',
                   router=f'resource_name=~"{router}({POD_OF_DEPLOYMENT})?|{regex_literal(spec.name)}"',
                   namespace=namespace)

    def deployment(self, name: str) -> str:
        """kube-state-metrics' series of one Deployment of the endpoint."""
        return f'{self.namespace}, deployment="{name}"'

    def pod(self, *deployments: str) -> str:
        """Series labelled with a pod of the given Deployments (kube-state-metrics, DCGM)."""
        names = "|".join(regex_literal(d) for d in deployments)
        return f'{self.namespace}, pod=~"({names}){POD_OF_DEPLOYMENT}"'


def select(metric: str, matchers: str, *extra: str) -> str:
    """``metric{matchers, extra...}``."""
    return f"{metric}{{{', '.join((matchers, *extra))}}}"
