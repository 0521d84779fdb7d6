"""Fixtures shared by every test folder: the embedded spec, the operator's CRD and Kubernetes schemas.

Nothing here reads outside the repository, except ``published_example`` and ``upstream_crd``, which
skip with a message when the reference notes are not beside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import support  # tests/support.py: the tests folder is on sys.path (pyproject's pythonpath)
import yaml
from hypothesis import settings
from referencing import Registry, Resource

import hyperpod_dpd  # noqa: F401 - points jsii at the wheel's Node before anything imports aws_cdk or cdk8s
from hyperpod_dpd.advisor.kernel_cache import CACHE_ENV
from hyperpod_dpd.contracts import crd
from hyperpod_dpd.scaling import RoleCapacity
from hyperpod_dpd.scaling.shape import pin_capacities
from hyperpod_dpd.spec import DpdSpec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk.versions import KUBERNETES_VERSION as CLUSTER_KUBERNETES_VERSION

support.register_fuzz_profiles()


def pytest_configure(config: pytest.Config) -> None:
    """Load the fuzz profile HYPERPOD_DPD_FUZZ names (before collection builds the tests' settings), and keep the
    advisor's on-disk cache in this run's own folder: a run neither reads nor fills the user's ``~/.cache``."""
    settings.load_profile(support.fuzz_profile(os.environ))
    cache = Path(tempfile.mkdtemp(prefix="dpd-test-cache-"))
    os.environ[CACHE_ENV] = str(cache)
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses a fixture of :data:`support.SLOW_FIXTURES` (``make test-fast`` leaves them
    out); a test that asks for one by name at run time carries the mark itself."""
    for item in items:
        if support.SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)

REPO = Path(__file__).resolve().parents[1]
SHARED_REFERENCE = REPO.parent / "shared" / "reference"
UPSTREAM_CRD_FILE = SHARED_REFERENCE / "crds" / "v3.3-inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml"
KUBERNETES_VERSION = f"{CLUSTER_KUBERNETES_VERSION}.0"  # the schemas of the cluster the stack creates

Validate = Callable[[dict[str, Any]], list[str]]


@pytest.fixture
def spec() -> DpdSpec:
    """The embedded default spec (the published Llama 3.3 70B example)."""
    return default_spec()


@pytest.fixture(scope="session")
def slo_spec() -> DpdSpec:
    """The default spec with an SLO and SLO autoscaling on both roles (a folder may size another under this name)."""
    return support.slo_autoscaled()


@pytest.fixture(scope="session")
def advised(slo_spec: DpdSpec) -> dict[str, RoleCapacity]:
    """Both roles' capacities by the advisor (AIConfigurator's data: about 8 s, once per session)."""
    from hyperpod_dpd.advisor.capacity import capacities

    return capacities(slo_spec)


@pytest.fixture(scope="session")
def resolved(slo_spec: DpdSpec, advised: dict[str, RoleCapacity]) -> DpdSpec:
    """The spec with the advisor's capacities pinned, as synth renders it."""
    return pin_capacities(slo_spec, {role: round(c.tokens_per_s, 1) for role, c in advised.items()})


@pytest.fixture(scope="session")
def crd_v1_schema() -> dict[str, Any]:
    """The ``v1`` openAPIV3Schema of the operator's InferenceEndpointConfig CRD (v3.3), as the package ships it."""
    return crd.v1_schema()


@pytest.fixture(scope="session")
def upstream_crd_file() -> Path:
    """The upstream CRD YAML (operator v3.3) the shipped structure was made from, when it is beside the checkout."""
    if not UPSTREAM_CRD_FILE.exists():
        pytest.skip(f"the upstream CRD is not beside the checkout ({UPSTREAM_CRD_FILE.relative_to(REPO.parent)}); "
                    "the shipped structure is compared with it only where it is")
    return UPSTREAM_CRD_FILE


@pytest.fixture(scope="session")
def upstream_crd(upstream_crd_file: Path) -> dict[str, Any]:
    """The parsed upstream CRD."""
    loaded: dict[str, Any] = yaml.safe_load(upstream_crd_file.read_bytes())
    return loaded


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
    """The complete DPD example of the operator's documentation, read from the reference notes.

    AWS's text is not copied into the repository, so the tests that compare with it skip without it.
    """
    notes = SHARED_REFERENCE / "hyperpod-dpd.md"
    if not notes.exists():
        pytest.skip("AWS's published DPD example is read from reference notes beside the checkout "
                    f"({notes.relative_to(REPO.parent)}), which are absent here")
    text = notes.read_text(encoding="utf-8")
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
