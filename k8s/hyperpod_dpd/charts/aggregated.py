"""The aggregated twin of a DPD endpoint: the baseline DPD is measured against.

The same model, image, tensor parallelism, arguments, environment and router as the spec, on one
node with prefill and decode in one vLLM, that is the DPD manifest without ``pdSpec`` and with one
replica. The router stays (``intelligentRoutingSpec``) so both endpoints are reached the same way and
an A/B benchmark differs only in disaggregation. Its name is ``<name>-agg``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hyperpod_dpd.charts.inference_endpoint_config import render_inference_endpoint_config
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.validation import CheckedSpec, check

SUFFIX = "-agg"


def aggregated_spec(spec: DpdSpec | CheckedSpec) -> DpdSpec:
    """``spec`` renamed for its twin (``<name>-agg``, endpoint ``<endpoint_name>-agg``); checked, so a name
    too long for the twin's router Service is a :class:`SpecError` naming ``name``."""
    source = spec.spec if isinstance(spec, CheckedSpec) else spec
    twin = dataclasses.replace(source, name=f"{source.name}{SUFFIX}", endpoint_name=(
        f"{source.endpoint_name}{SUFFIX}" if source.endpoint_name is not None else None))
    try:
        check(twin)
    except SpecError as err:
        raise SpecError([Problem(field=p.field, value=p.value, message=f"{p.message} (in the aggregated twin "
                                 f"{twin.name!r})", fix=f"{p.fix}; the twin adds {SUFFIX!r} to the names")
                         for p in err.problems]) from None
    return twin


def layout_identity(spec: DpdSpec | CheckedSpec) -> dict[str, Any]:
    """What a DPD run's figures depend on beyond model and hardware: bench records it, calibration compares it."""
    source = spec.spec if isinstance(spec, CheckedSpec) else spec
    return {"tensor_parallel_size": source.tensor_parallel_size, "prefill_replicas": source.prefill.replicas,
            "decode_replicas": source.decode.replicas, "args": list(source.args),
            "prefill_args": list(source.prefill.args), "decode_args": list(source.decode.args)}


def twin_layout_identity(spec: DpdSpec | CheckedSpec) -> dict[str, Any]:
    """The twin's :func:`layout_identity`: one replica with the shared args and no per-role ones, as rendered by
    :func:`render_aggregated_endpoint_config` (no ``pdSpec``, ``replicas: 1``)."""
    source = spec.spec if isinstance(spec, CheckedSpec) else spec
    return {"tensor_parallel_size": source.tensor_parallel_size, "replicas": 1, "args": list(source.args)}


def render_aggregated_endpoint_config(spec: DpdSpec | CheckedSpec, *, region: str | None = None,
                                      node_selector: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The twin's ``InferenceEndpointConfig``: no ``pdSpec``, one replica.

    :param node_selector: node labels the twin's pod must match (a HyperPod instance group); they become
        ``nodeAffinity``, which the CRD allows only without ``instanceType``. :default: - placed by ``instanceType``
    """
    twin = aggregated_spec(spec)
    manifest = render_inference_endpoint_config(twin, region=region)
    body = dict(manifest["spec"])
    del body["pdSpec"]
    body["replicas"] = 1
    if node_selector:
        del body["instanceType"]
        body["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": key, "operator": "In", "values": [value]}
                                 for key, value in sorted(node_selector.items())]}]}}
    return {**manifest, "spec": body}
