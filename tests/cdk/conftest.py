"""Session-wide CDK fixtures: each app below is synthesized once and shared by every test that needs it.

Synthesizing one EKS stack costs seconds of jsii time, so the tests read templates from these
fixtures instead of building their own; bad-input tests fail before anything heavy is built.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk  # jsii already runs on the packaged Node.js: tests/conftest.py imported hyperpod_dpd
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from cdk import cdk_support

from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ClusterEndpointAccess, ExistingEksCluster, HyperPodDpdStack

HERE = Path(__file__).resolve().parent


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
    """Two endpoints in an existing VPC, with an existing bucket, a prepared chart and an admin; the EKS
    API endpoint public from one CIDR only, no bootstrap admin for the cluster's creator, NetworkPolicies."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("multi")))
    stack = HyperPodDpdStack(
        app, "Multi", env=cdk.Environment(region=REGION),
        endpoints=[cdk_support.with_bucket(default_spec(), "my-weights"), cdk_support.second_spec()],
        vpc=cdk_support.EXISTING_VPC, hyperpod_subnet_ids=cdk_support.HYPERPOD_SUBNETS, availability_zone_id="usw2-az2",
        model_bucket_name="my-weights", dependency_chart_dir=prepared_chart,
        admin_role_arns=["arn:aws:iam::111122223333:role/PlatformAdmin"],
        eks_endpoint_access=cdk_support.ADMIN_NETWORK_ACCESS, cluster_creator_admin=False, network_policies=True)
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def existing_cluster_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The default endpoint on an existing EKS cluster in an existing VPC, with NetworkPolicies (not enforced)."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("existing")))
    stack = HyperPodDpdStack(
        app, "OnExistingCluster", env=cdk.Environment(region=REGION), endpoints=[default_spec()],
        vpc=cdk_support.EXISTING_VPC, hyperpod_subnet_ids=cdk_support.HYPERPOD_SUBNETS,
        existing_cluster=ExistingEksCluster(
            cluster_name="platform", oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
            oidc_provider_arn=cdk_support.EXISTING_OIDC_PROVIDER, cluster_security_group_id="sg-0eee0000000000005"),
        network_policies=True)
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def hf_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three Hugging Face endpoints the stack stages: the user's token secret, a stack-created one, and a
    second endpoint on the first one's revision. ``HF_TOKEN`` is set while synthesizing: a token in the
    deployer's shell must not reach the template."""
    saved = os.environ.get("HF_TOKEN")
    os.environ["HF_TOKEN"] = cdk_support.HF_TOKEN_SENTINEL
    try:
        app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("hf")))
        hf, revision, arn = cdk_support.hf_source, cdk_support.HF_REVISION, cdk_support.HF_SECRET_ARN
        llama = "meta-llama/Llama-3.3-70B-Instruct"
        stack = HyperPodDpdStack(app, "HfStaged", env=cdk.Environment(region=REGION), endpoints=[
            hf(default_spec(), llama, revision=revision, token_secret_arn=arn),
            hf(cdk_support.second_spec(), "meta-llama/Llama-3.1-70B-Instruct", revision=revision),
            hf(dataclasses.replace(default_spec(), name="dpd-again", endpoint_name="dpd-again"), llama,
               revision=revision, token_secret_arn=arn)], benchmark=False, observability=False)
        yield cdk_support.synthesize(app, stack)
    finally:
        os.environ.pop("HF_TOKEN")
        if saved is not None:
            os.environ["HF_TOKEN"] = saved


@pytest.fixture(scope="session")
def private_endpoint_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The default endpoint with a private-only EKS API endpoint (``eks_endpoint_access=private``) and
    NetworkPolicies enforced by the VPC CNI."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("private")))
    stack = HyperPodDpdStack(app, "PrivateApi", env=cdk.Environment(region=REGION), endpoints=[default_spec()],
                             eks_endpoint_access=ClusterEndpointAccess.private_only(), network_policies=True)
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def kms_bucket_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    """An SSE-KMS model bucket imported with its key: an S3 endpoint reads it, a Hugging Face one is staged into it."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("kms")))
    imports = cdk.Stack(app, "Imports", env=cdk.Environment(region=REGION))  # literal ARNs: nothing exported
    cdk.CfnWaitConditionHandle(imports, "Placeholder")  # a stack must hold a resource
    key = kms.Key.from_key_arn(imports, "WeightsKey", cdk_support.WEIGHTS_KEY_ARN)
    bucket = s3.Bucket.from_bucket_attributes(imports, "Weights", bucket_name="my-weights", encryption_key=key)
    stack = HyperPodDpdStack(app, "KmsBucket", env=cdk.Environment(region=REGION), model_bucket=bucket,
                             observability=False, endpoints=[
        cdk_support.with_bucket(default_spec(), "my-weights"),
        cdk_support.hf_source(cdk_support.second_spec(), "meta-llama/Llama-3.1-70B-Instruct",
                              revision=cdk_support.HF_REVISION, token_secret_arn=cdk_support.HF_SECRET_ARN)])
    return cdk_support.synthesize(app, stack)


@pytest.fixture(scope="session")
def all_apps(default_app: Any, multi_app: Any, existing_cluster_app: Any, hf_app: Any,
             kms_bucket_app: Any) -> dict[str, Any]:
    return {"default": default_app, "multi": multi_app, "existing-cluster": existing_cluster_app,
            "hf-staged": hf_app, "kms-bucket": kms_bucket_app}
