"""Session-wide CDK fixtures: each app below is synthesized once and shared by every test that needs it.

Synthesizing one EKS stack costs seconds of jsii time, so the tests read templates from these
fixtures instead of building their own; bad-input tests fail before anything heavy is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from hyperpod_dpd import _node

_node.ensure_node()  # before aws_cdk: jsii must start the packaged Node.js

import aws_cdk as cdk  # noqa: E402
import pytest  # noqa: E402
from support import load_module  # noqa: E402

from hyperpod_dpd.defaults import default_spec  # noqa: E402
from hyperpod_dpd_cdk import ExistingEksCluster, HyperPodDpdStack  # noqa: E402

HERE = Path(__file__).resolve().parent


load_module("cdk_template_queries", HERE / "cdk_template_queries.py")
cdk_support = load_module("cdk_support", HERE / "cdk_support.py")
Synthesized = cdk_support.Synthesized
REGION: str = cdk_support.REGION


@pytest.fixture(scope="session")
def app_module() -> ModuleType:
    return cdk_support.load_app_module()  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def cdk_context() -> dict[str, Any]:
    """The feature flags of cdk.json, so tests synthesize what ``cdk deploy`` deploys."""
    context: dict[str, Any] = json.loads((cdk_support.REPO / "cdk.json").read_text())["context"]
    return context


@pytest.fixture(scope="session", autouse=True)
def _no_account() -> Iterator[None]:
    """The app reads CDK_DEFAULT_ACCOUNT; tests must not depend on the machine's credentials."""
    saved = os.environ.pop("CDK_DEFAULT_ACCOUNT", None)
    yield
    if saved is not None:
        os.environ["CDK_DEFAULT_ACCOUNT"] = saved


@pytest.fixture(scope="session")
def default_app(app_module: ModuleType, cdk_context: dict[str, Any],
                tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The app exactly as ``cdk synth`` builds it: embedded spec, cdk.json context, no options."""
    app, stack = app_module.build(cdk_context, outdir=str(tmp_path_factory.mktemp("default")))
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def prepared_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in for the folder scripts/prepare_hyperpod_chart.sh produces."""
    folder = tmp_path_factory.mktemp("chart") / "HyperPodHelmChart"
    (folder / "charts").mkdir(parents=True)
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: hyperpod-helm-chart\nversion: 0.1.0\n")
    (folder / "charts" / "aws-efa-k8s-device-plugin-0.5.20.tgz").write_bytes(b"stand-in")
    return folder


@pytest.fixture(scope="session")
def multi_app(cdk_context: dict[str, Any], prepared_chart: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two endpoints in an existing VPC, with an existing bucket, a prepared chart and an admin."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("multi")))
    stack = HyperPodDpdStack(
        app, "Multi", env=cdk.Environment(region=REGION),
        endpoints=[cdk_support.with_bucket(default_spec(), "my-weights"), cdk_support.second_spec()],
        vpc=cdk_support.EXISTING_VPC, hyperpod_subnet_ids=cdk_support.HYPERPOD_SUBNETS, availability_zone_id="usw2-az2",
        model_bucket_name="my-weights", dependency_chart_dir=prepared_chart,
        admin_role_arns=["arn:aws:iam::111122223333:role/PlatformAdmin"])
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def existing_cluster_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The default endpoint on an existing EKS cluster in an existing VPC."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("existing")))
    stack = HyperPodDpdStack(
        app, "OnExistingCluster", env=cdk.Environment(region=REGION), endpoints=[default_spec()],
        vpc=cdk_support.EXISTING_VPC, hyperpod_subnet_ids=cdk_support.HYPERPOD_SUBNETS,
        existing_cluster=ExistingEksCluster(
            cluster_name="platform", oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
            oidc_provider_arn=cdk_support.EXISTING_OIDC_PROVIDER, cluster_security_group_id="sg-0eee0000000000005"))
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def all_apps(default_app: Any, multi_app: Any, existing_cluster_app: Any) -> dict[str, Any]:
    return {"default": default_app, "multi": multi_app, "existing-cluster": existing_cluster_app}
