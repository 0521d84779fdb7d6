"""The operator's ``InferenceEndpointConfig`` CRD structure, shipped as data: the last guard on every manifest.

``inferenceendpointconfig-v1.json`` is the ``v1`` ``openAPIV3Schema`` of the CRD that the SageMaker
HyperPod Inference Operator v3.3 (EKS add-on ``amazon-sagemaker-hyperpod-inference``
v1.4.0-eksbuild.1) installs: types, required fields, enums, patterns, bounds, defaults and the
``x-kubernetes-*`` keys, with every ``description`` removed.

PROVENANCE: ``aws/sagemaker-hyperpod-cli`` at commit 0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b, file
``helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml``
(sha256 in the data file's ``provenance``). ``scripts/crd_structure.py`` regenerates the file from that
YAML. The spec rules should refuse anything the CRD would; a violation here means a rule is missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from hyperpod_dpd.errors import Problem, SpecError

DATA_FILE = "inferenceendpointconfig-v1.json"


@cache
def _data() -> dict[str, Any]:
    text = resources.files("hyperpod_dpd.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def v1_schema() -> dict[str, Any]:
    """The CRD's ``v1`` ``openAPIV3Schema`` without descriptions (a shared object: do not modify it)."""
    schema: dict[str, Any] = _data()["openAPIV3Schema"]
    return schema


def provenance() -> dict[str, Any]:
    """Repository, commit, path, operator and add-on version, and the source file's sha256."""
    return dict(_data()["provenance"])


@cache
def _validator() -> Any:
    import jsonschema  # noqa: PLC0415 - only rendering needs it, not loading a spec

    return jsonschema.Draft202012Validator(v1_schema())


def violations(manifest: Mapping[str, Any]) -> list[Problem]:
    """Every way ``manifest`` breaks the CRD, as problems naming the manifest path, sorted by path."""
    found = []
    for error in _validator().iter_errors(manifest):
        path = ".".join(str(part) for part in error.absolute_path) or "<root>"
        found.append(Problem(
            field=f"manifest {path}", value=error.instance,
            message=f"breaks the operator's CRD ({provenance()['operator_version']}): {error.message}",
            fix="change the spec field that renders this value; if the spec passed every check, report it as a "
                "hyperpod-dpd bug with the spec"))
    return sorted(found, key=lambda p: (p.field, p.message))


def check_manifest(manifest: Mapping[str, Any], *, source: str | None = None) -> None:
    """Raise :class:`SpecError` with every CRD violation of ``manifest``, if there is any."""
    found = violations(manifest)
    if found:
        raise SpecError(found, source=source)
