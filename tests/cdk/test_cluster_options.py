"""Existing clusters and versions: declared pre-installed add-ons are not created, the Kubernetes version
and upgrade policy are explicit options, the inference add-on version is an option."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import aws_cdk as cdk
import pytest
from cdk import cdk_support
from cdk.cdk_support import Synthesized
from cdk.cdk_template_queries import by_type

from hyperpod_dpd import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ExistingEksCluster, HyperPodDpdStack
from hyperpod_dpd_cdk.versions import INFERENCE_ADDON_VERSION, PREREQUISITE_ADDONS

EXISTING = ExistingEksCluster(
    cluster_name="platform", oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
    oidc_provider_arn=cdk_support.EXISTING_OIDC_PROVIDER)


def addon_names(s: Synthesized) -> list[str]:
    return sorted(a["Properties"]["AddonName"] for a in by_type(s.template, "AWS::EKS::Addon").values())


def test_declared_preinstalled_addons_are_not_created(cdk_context: dict[str, Any],
                                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("preinstalled")))
    stack = HyperPodDpdStack(app, "Preinstalled", env=cdk.Environment(region=cdk_support.REGION),
                             endpoints=[default_spec()], vpc=cdk_support.EXISTING_VPC,
                             hyperpod_subnet_ids=cdk_support.HYPERPOD_SUBNETS, existing_cluster=EXISTING,
                             preinstalled_addons=list(PREREQUISITE_ADDONS))
    s = cdk_support.synthesize(app, stack)
    assert addon_names(s) == ["amazon-sagemaker-hyperpod-inference"]
    assert s.stack.observability is not None and s.stack.observability.addon is None
    # A pre-installed CloudWatch add-on writes the Container Insights group already: the stack watches it
    # and creates neither the add-on nor the group (CreateLogGroup would fail on the existing one).
    assert s.stack.observability.container_logs is None and s.stack.observability.log_group is None
    assert s.stack.observability.log_group_name == f"/aws/containerinsights/{EXISTING.cluster_name}/application"


def test_an_existing_cluster_gets_every_prerequisite_it_does_not_declare(existing_cluster_app: Synthesized) -> None:
    assert addon_names(existing_cluster_app) == sorted(["amazon-sagemaker-hyperpod-inference", *PREREQUISITE_ADDONS])


def test_the_new_cluster_states_version_and_support_type(default_app: Synthesized) -> None:
    (cluster,) = by_type(default_app.template, "AWS::EKS::Cluster").values()
    assert cluster["Properties"]["Version"] == "1.34"
    assert cluster["Properties"]["UpgradePolicy"] == {"SupportType": "EXTENDED"}


@pytest.mark.parametrize(("context", "field"), [
    ({"kubernetes_version": "1.35"}, "kubernetes_version"),
    ({"eks_support_type": "cheap"}, "eks_support_type"),
    ({"preinstalled_addons": "cert-manager"}, "preinstalled_addons"),
    ({"weights_staging_hours": "13"}, "weights_staging_hours"),  # the key typed, checked before the stack
    ({"weights_staging_hours": "soon"}, "weights_staging_hours"),
    ({"eks_cluster": "platform", "oidc_issuer_url": EXISTING.oidc_issuer_url, "oidc_provider_arn":
      EXISTING.oidc_provider_arn, "vpc_id": "vpc-0123456789abcdef0", "eks_subnets": "us-west-2a=subnet-0aaa",
      "hyperpod_subnets": "usw2-az2=subnet-0ccc", "preinstalled_addons": "cert-manager,kube-dns"},
     "preinstalled_addons[1]"),
])
def test_bad_cluster_options_name_the_field(app_module: ModuleType, cdk_context: dict[str, Any],
                                            context: dict[str, str], field: str) -> None:
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, **context})
    assert field in [p.field for p in error.value.problems]


def test_the_inference_addon_version_is_an_option(app_module: ModuleType, cdk_context: dict[str, Any]) -> None:
    _, stack = app_module.build({**cdk_context, "inference_addon_version": "v1.5.0-eksbuild.1"})
    assert stack.operator.addon.addon_version == "v1.5.0-eksbuild.1"
    warnings = [m.data for m in stack.operator.node.metadata if m.type == "aws:cdk:warning"]
    assert any(INFERENCE_ADDON_VERSION in str(w) for w in warnings)
