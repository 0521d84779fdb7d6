"""Label matchers that pick one endpoint's series out of a cluster's metrics.

The HyperPod pipeline labels every inference series with ``resource_name`` (``prefill-<name>`` or
``decode-<name>``, the operator's Deployment names, as AWS's Inference dashboard matches them) and
``namespace``. The router's ``dpd_*`` series carry ``resource_name`` too, but its value is not
documented, so the router matcher accepts the endpoint name as any hyphen-delimited part of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hyperpod_dpd.operator_names import role_deployment
from hyperpod_dpd.spec import DpdSpec


@dataclass(frozen=True, kw_only=True)
class EndpointSelectors:
    """PromQL label matchers (without braces) for one endpoint's prefill, decode, both, and router series."""

    prefill: str
    decode: str
    pods: str
    router: str

    @classmethod
    def of(cls, spec: DpdSpec) -> EndpointSelectors:
        namespace = f'namespace="{spec.namespace}"'
        prefill, decode = role_deployment(spec, "prefill"), role_deployment(spec, "decode")
        return cls(prefill=f'resource_name="{prefill}", {namespace}',
                   decode=f'resource_name="{decode}", {namespace}',
                   pods=f'resource_name=~"{prefill}|{decode}", {namespace}',
                   router=f'resource_name=~"(.+-)?{spec.name}(-.+)?"')


def select(metric: str, matchers: str, *extra: str) -> str:
    """``metric{matchers, extra...}``."""
    return f"{metric}{{{', '.join((matchers, *extra))}}}"
