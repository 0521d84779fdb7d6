"""Synthesize specs to YAML files through cdk8s, deterministically."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cdk8s
import yaml

from hyperpod_dpd.charts.inference_endpoint_config import InferenceEndpointConfigChart
from hyperpod_dpd.errors import Warning
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.validation import CheckedSpec, check


def synth_documents(specs: Sequence[DpdSpec | CheckedSpec], *,
                    region: str | None = None) -> tuple[dict[str, str], list[Warning]]:
    """File name -> YAML text for each spec's chart, and the warnings the specs raised."""
    app = cdk8s.App()
    warnings: list[Warning] = []
    documents: dict[str, str] = {}
    for spec in specs:
        checked = spec if isinstance(spec, CheckedSpec) else check(spec)
        warnings += checked.warnings
        chart = InferenceEndpointConfigChart(app, f"{checked.spec.namespace}-{checked.spec.name}", spec=checked,
                                             region=region)
        text = yaml.safe_dump_all(chart.to_json(), sort_keys=False, width=1000)
        documents[f"{chart.node.id}.k8s.yaml"] = text
    return documents, warnings


def synth_to_directory(specs: Sequence[DpdSpec | CheckedSpec], out: Path, *, region: str | None = None) -> tuple[
        list[Path], list[Warning]]:
    """Write every spec's manifest into ``out`` (nothing is written if any spec is invalid)."""
    documents, warnings = synth_documents(specs, region=region)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in documents.items():
        path = out / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written, warnings
