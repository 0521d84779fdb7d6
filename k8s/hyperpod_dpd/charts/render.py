"""Synthesize specs to YAML files through cdk8s, deterministically, each manifest checked against the CRD."""

from __future__ import annotations

from collections.abc import Sequence

import cdk8s
import yaml

from hyperpod_dpd.charts.inference_endpoint_config import (
    KIND,
    InferenceEndpointConfigChart,
    render_inference_endpoint_config,
)
from hyperpod_dpd.contracts.crd import check_manifest
from hyperpod_dpd.errors import SpecWarning
from hyperpod_dpd.scaling.shape import with_stand_in_capacities
from hyperpod_dpd.spec import DpdSpec, S3Source
from hyperpod_dpd.validation import CheckedSpec, check

# Only for the CRD check of ``validate``: the bucket's region is a free string in the CRD, and a spec
# may leave it to the stack it is deployed with.
_ANY_REGION = "us-east-1"


def synth_documents(specs: Sequence[DpdSpec | CheckedSpec], *,
                    region: str | None = None) -> tuple[dict[str, str], list[SpecWarning]]:
    """File name -> YAML text for each spec's chart, and the warnings the specs raised."""
    app = cdk8s.App()
    warnings: list[SpecWarning] = []
    documents: dict[str, str] = {}
    for spec in specs:
        checked = spec if isinstance(spec, CheckedSpec) else check(spec)
        warnings += checked.warnings
        chart = InferenceEndpointConfigChart(app, f"{checked.spec.namespace}-{checked.spec.name}", spec=checked,
                                             region=region)
        name = f"{chart.node.id}.k8s.yaml"
        rendered = chart.to_json()
        for document in rendered:
            if document.get("kind") == KIND:
                check_manifest(document, source=name)
        documents[name] = yaml.safe_dump_all(rendered, sort_keys=False, width=1000)
    return documents, warnings


def check_against_crd(spec: DpdSpec | CheckedSpec, *, region: str | None = None) -> None:
    """Render ``spec`` without cdk8s and validate it against the operator's CRD (raises :class:`SpecError`).

    A spec whose S3 source leaves the region to the stack is checked with a stand-in region, and SLO autoscaling
    that synth will size with the advisor with a stand-in capacity.
    """
    checked = spec if isinstance(spec, CheckedSpec) else check(spec)
    source = checked.spec.model.source
    if region is None and isinstance(source, S3Source) and source.region is None:
        region = _ANY_REGION
    stand_in = with_stand_in_capacities(checked.spec)  # synth computes them; their form is what is checked here
    render_inference_endpoint_config(checked if stand_in is checked.spec else stand_in, region=region)
