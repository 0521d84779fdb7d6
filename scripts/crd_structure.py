#!/usr/bin/env python3
"""Strip the operator's ``InferenceEndpointConfig`` CRD to the structure the package validates against.

Keeps the ``v1`` ``openAPIV3Schema`` (types, required, enums, patterns, bounds, defaults and the
``x-kubernetes-*`` keys) and drops every ``description``: the prose is AWS's, the structure is what a
validator needs. The result, with its provenance, is ``k8s/hyperpod_dpd/data/inferenceendpointconfig-v1.json``.

Usage::

    scripts/crd_structure.py path/to/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml

The source is the raw CRD of ``aws/sagemaker-hyperpod-cli`` at the commit in ``PROVENANCE`` below.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parents[1] / "k8s" / "hyperpod_dpd" / "data" / "inferenceendpointconfig-v1.json"
VERSION = "v1"
PROVENANCE = {
    "repository": "aws/sagemaker-hyperpod-cli",
    "commit": "0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b",
    "path": "helm_chart/HyperPodHelmChart/charts/inference-operator/config/crd/"
            "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml",
    "operator_version": "v3.3",
    "eks_addon_version": "v1.4.0-eksbuild.1",
    "crd_version": VERSION,
}
# Schema keywords whose values are maps from a property name to a schema, not schemas themselves.
_NAMED_SCHEMAS = ("properties", "patternProperties", "definitions", "$defs")


def strip(schema: Any) -> Any:
    """``schema`` without ``description`` keywords; a property *named* ``description`` stays."""
    if isinstance(schema, list):
        return [strip(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description":
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            result[key] = {name: strip(sub) for name, sub in value.items()}
        else:
            result[key] = strip(value)
    return result


def v1_schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def structure(source: Path) -> dict[str, Any]:
    raw = source.read_bytes()
    crd = yaml.safe_load(raw)
    return {
        "provenance": {**PROVENANCE, "source_sha256": hashlib.sha256(raw).hexdigest(),
                       "generator": "scripts/crd_structure.py", "stripped": ["description"]},
        "group": crd["spec"]["group"],
        "kind": crd["spec"]["names"]["kind"],
        "version": VERSION,
        "openAPIV3Schema": strip(v1_schema(crd)),
    }


def main(argv: list[str] | None = None) -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("crd", type=Path, help="the upstream CRD YAML")
    cli.add_argument("--out", default=str(OUT), help="output file, '-' for stdout (default: the package data)")
    args = cli.parse_args(argv)
    text = json.dumps(structure(args.crd), indent=1, sort_keys=True) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
