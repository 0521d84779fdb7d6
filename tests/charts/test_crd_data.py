"""The CRD structure the package ships: faithful to upstream, free of prose, and a guard that can fail."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import load_module

from hyperpod_dpd import SpecError
from hyperpod_dpd.charts import render_inference_endpoint_config
from hyperpod_dpd.contracts import crd
from hyperpod_dpd.spec import DpdSpec

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "k8s" / "hyperpod_dpd" / "data" / crd.DATA_FILE


def _script(name: str) -> ModuleType:
    return load_module(name, REPO / "scripts" / f"{name}.py")


def _without_descriptions(schema: Any, *, in_properties: bool = False) -> Any:
    """Upstream's schema minus every ``description`` keyword (a property called ``description`` stays)."""
    if isinstance(schema, list):
        return [_without_descriptions(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {key: _without_descriptions(value, in_properties=key == "properties" and not in_properties)
            for key, value in schema.items() if in_properties or key != "description"}


def _keys(schema: Any, *, in_properties: bool = False) -> set[str]:
    if isinstance(schema, list):
        return set().union(*(_keys(item) for item in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    found = set() if in_properties else set(schema)
    for key, value in schema.items():
        found |= _keys(value, in_properties=key == "properties" and not in_properties)
    return found


def test_shipped_structure_is_the_upstream_v1_schema_without_descriptions(upstream_crd: dict[str, Any]) -> None:
    (v1,) = [v for v in upstream_crd["spec"]["versions"] if v["name"] == "v1"]
    assert crd.v1_schema() == _without_descriptions(v1["schema"]["openAPIV3Schema"])


def test_the_generator_reproduces_the_shipped_file_byte_for_byte(tmp_path: Path, upstream_crd_file: Path) -> None:
    out = tmp_path / "crd.json"
    _script("crd_structure").main([str(upstream_crd_file), "--out", str(out)])
    assert out.read_bytes() == SHIPPED.read_bytes()


def test_provenance_names_the_v33_source_and_its_checksum(upstream_crd_file: Path,
                                                          upstream_crd: dict[str, Any]) -> None:
    provenance = crd.provenance()
    assert provenance["repository"] == "aws/sagemaker-hyperpod-cli"
    assert provenance["commit"] == "0986f2cc4eb14070d3aeb159c2c9b09d1b5f287b"
    assert provenance["path"].endswith("inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml")
    assert (provenance["operator_version"], provenance["eks_addon_version"]) == ("v3.3", "v1.4.0-eksbuild.1")
    assert provenance["source_sha256"] == hashlib.sha256(upstream_crd_file.read_bytes()).hexdigest()
    assert upstream_crd["spec"]["names"]["kind"] == json.loads(SHIPPED.read_text())["kind"]


def test_shipped_structure_has_no_prose_but_keeps_every_constraint_kind() -> None:
    keys = _keys(crd.v1_schema())
    assert "description" not in keys
    assert {"type", "required", "enum", "pattern", "minimum", "maximum", "maxLength", "default",
            "x-kubernetes-int-or-string", "x-kubernetes-list-type", "x-kubernetes-map-type"} <= keys
    pd_spec = crd.v1_schema()["properties"]["spec"]["properties"]["pdSpec"]
    assert pd_spec["properties"]["routingThreshold"]["type"] == "integer"


def test_the_data_files_are_package_data() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["hyperpod_dpd"]
    data = REPO / "k8s" / "hyperpod_dpd" / "data"
    shipped = [f"data/{f.name}" for f in sorted(data.iterdir()) if f.suffix not in {".py", ".pyc"} and f.is_file()]
    assert shipped, "the data folder is empty"
    assert [f for f in shipped if not any(fnmatch.fnmatch(f, p) for p in patterns)] == []
    assert "jsonschema" in " ".join(config["project"]["dependencies"])


def test_a_violation_names_the_manifest_path_and_the_crd_version(spec: DpdSpec) -> None:
    manifest = render_inference_endpoint_config(spec)
    manifest["spec"]["intelligentRoutingSpec"]["routingStrategy"] = "fastest"
    manifest["spec"]["pdSpec"]["routingThreshold"] = "4096"
    (strategy, threshold) = sorted(crd.violations(manifest), key=lambda p: p.field)
    assert strategy.field == "manifest spec.intelligentRoutingSpec.routingStrategy"
    assert strategy.value == "fastest"
    assert "breaks the operator's CRD (v3.3): 'fastest' is not one of" in strategy.message
    assert threshold.field == "manifest spec.pdSpec.routingThreshold"
    with pytest.raises(SpecError, match=r"(?s)in out\.yaml \(2 problems\).*Fix: change the spec field"):
        crd.check_manifest(manifest, source="out.yaml")


def test_rendering_runs_the_guard(spec: DpdSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema

    monkeypatch.setattr(crd, "_validator", lambda: jsonschema.Draft202012Validator(
        {"properties": {"spec": {"required": ["somethingNew"]}}}))
    with pytest.raises(SpecError, match=r"manifest spec: breaks the operator's CRD \(v3\.3\): 'somethingNew' is a "
                                        r"required property"):
        render_inference_endpoint_config(spec)


def test_synth_checks_the_documents_cdk8s_writes_not_only_the_rendered_body(
        spec: DpdSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels exist only in the chart's output, so a schema refusing them proves that output is checked."""
    import jsonschema

    from hyperpod_dpd.charts.render import synth_documents

    monkeypatch.setattr(crd, "_validator", lambda: jsonschema.Draft202012Validator(
        {"properties": {"metadata": {"not": {"required": ["labels"]}}}}))
    render_inference_endpoint_config(spec)  # the bare manifest has no labels
    with pytest.raises(SpecError, match=r"in default-dpd-test\.k8s\.yaml \(1 problem\):\n  - manifest metadata: "):
        synth_documents([spec])
