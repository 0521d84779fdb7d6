"""Fixtures shared by every test folder: the embedded spec, the real CRD and Kubernetes schemas."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

import hyperpod_dpd  # noqa: F401 - points jsii at the wheel's Node before anything imports aws_cdk or cdk8s
from hyperpod_dpd.defaults import default_spec
from hyperpod_dpd.spec import DpdSpec

REPO = Path(__file__).resolve().parents[1]
SHARED_REFERENCE = REPO.parent / "shared" / "reference"
CRD_FILE = SHARED_REFERENCE / "crds" / "inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
KUBERNETES_VERSION = "1.33.0"

Validate = Callable[[dict[str, Any]], list[str]]


@pytest.fixture
def spec() -> DpdSpec:
    """The embedded default spec (the published Llama 3.3 70B example)."""
    return default_spec()


@pytest.fixture(scope="session")
def crd_v1_schema() -> dict[str, Any]:
    """The ``v1`` openAPIV3Schema of the real InferenceEndpointConfig CRD (operator v3.2)."""
    crd = yaml.safe_load(CRD_FILE.read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _errors(validator: jsonschema.protocols.Validator, document: dict[str, Any]) -> list[str]:
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                  for e in validator.iter_errors(document))


@pytest.fixture(scope="session")
def crd_errors(crd_v1_schema: dict[str, Any]) -> Validate:
    """Every CRD schema violation of an InferenceEndpointConfig, as ``path: message`` lines."""
    validator = jsonschema.Draft202012Validator(crd_v1_schema)
    return lambda document: _errors(validator, document)


@pytest.fixture(scope="session")
def kubernetes_errors() -> Callable[[str, Any], list[str]]:
    """Violations of a core Kubernetes type (e.g. ``io.k8s.api.core.v1.ResourceRequirements``), strict."""
    import kubernetes_validate

    schemas = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    folder = schemas / f"v{KUBERNETES_VERSION}-local-strict"
    definitions = json.loads((folder / "_definitions.json").read_text(encoding="utf-8"))
    registry: Registry = Resource.from_contents(definitions) @ Registry()

    def check(type_name: str, value: Any) -> list[str]:
        schema = {"$ref": f"{definitions['$id']}#/$defs/{type_name}"}
        validator = jsonschema.Draft202012Validator(schema, registry=registry)
        return _errors(validator, value)

    return check


@pytest.fixture(scope="session")
def published_example() -> dict[str, Any]:
    """The complete DPD example of the operator's documentation, read from the reference notes."""
    text = (SHARED_REFERENCE / "hyperpod-dpd.md").read_text(encoding="utf-8")
    section = text[text.index("### 1.7 Complete example"):]
    block = section[section.index("```yaml") + len("```yaml"):]
    block = block[:block.index("```")]
    block = block.replace("<YOUR_BUCKET>", "my-model-bucket").replace("<YOUR_REGION>", "us-west-2")
    example: dict[str, Any] = yaml.safe_load(block)
    return example


@pytest.fixture(autouse=True)
def _no_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tests never see real credentials, so nothing can reach an account by accident."""
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    yield
