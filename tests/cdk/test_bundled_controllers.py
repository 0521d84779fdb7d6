"""The inference add-on's bundled AWS Load Balancer Controller and KEDA can be left to the cluster's own."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from cdk import cdk_support
from cdk.cdk_template_queries import by_type

from hyperpod_dpd import SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ClusterOptions, ExistingEksCluster, HyperPodDpd, HyperPodOptions
from hyperpod_dpd_cdk.inference_operator import ALB_SA, KEDA_SA

EXISTING = ExistingEksCluster(
    cluster_name="platform", oidc_issuer_url="https://oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B7",
    oidc_provider_arn=cdk_support.EXISTING_OIDC_PROVIDER)


def _synth(cdk_context: dict[str, Any], *, existing: bool = True, **props: Any) -> tuple[HyperPodDpd, dict[str, Any]]:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region=cdk_support.REGION))
    cluster = ClusterOptions(existing=EXISTING if existing else None, **props)
    platform = HyperPodDpd(stack, "Inference", endpoints=[default_spec()], cluster=cluster,
                           vpc=cdk_support.EXISTING_VPC if existing else None,
                           hyperpod=HyperPodOptions(subnet_ids=cdk_support.HYPERPOD_SUBNETS) if existing else None)
    return platform, app.synth().get_stack_artifact(stack.artifact_id).template


def _operator_configuration(template: dict[str, Any]) -> dict[str, Any]:
    (addon,) = [a for a in by_type(template, "AWS::EKS::Addon").values()
                if a["Properties"]["AddonName"] == "amazon-sagemaker-hyperpod-inference"]
    # Fn::Join of literal text and tokens: the tokens stand in for role ARNs, so replace them by a marker.
    parts = addon["Properties"]["ConfigurationValues"]["Fn::Join"][1]
    configuration: dict[str, Any] = json.loads("".join(p if isinstance(p, str) else '"TOKEN"' for p in parts)
                                               .replace('""TOKEN""', '"TOKEN"'))
    return configuration


def _trusted_subjects(template: dict[str, Any]) -> str:
    """Every role's trust, and the CfnJson values its conditions are written through."""
    roles = [r["Properties"]["AssumeRolePolicyDocument"] for r in by_type(template, "AWS::IAM::Role").values()]
    return json.dumps(roles + [v for v in template["Resources"].values() if v["Type"].startswith("Custom::")])


def test_by_default_the_addon_runs_its_own_controller_and_keda(cdk_context: dict[str, Any]) -> None:
    platform, template = _synth(cdk_context)
    configuration = _operator_configuration(template)
    assert configuration["alb"]["enabled"] is True and configuration["keda"]["enabled"] is True
    assert platform.operator.alb_role is not None and platform.operator.keda_role is not None
    assert ALB_SA in _trusted_subjects(template) and KEDA_SA in _trusted_subjects(template)


@pytest.mark.parametrize(("option", "key", "subject"), [("bundled_load_balancer_controller", "alb", ALB_SA),
                                                        ("bundled_keda", "keda", KEDA_SA)])
def test_a_cluster_running_its_own_gets_the_bundled_one_switched_off(cdk_context: dict[str, Any], option: str,
                                                                     key: str, subject: str) -> None:
    platform, template = _synth(cdk_context, **{option: False})
    configuration = _operator_configuration(template)
    assert configuration[key] == {"enabled": False}
    other = "keda" if key == "alb" else "alb"
    assert configuration[other]["enabled"] is True
    # No role for a service account nobody runs as.
    assert subject not in _trusted_subjects(template)
    assert (platform.operator.alb_role if key == "alb" else platform.operator.keda_role) is None


def _warnings(cdk_context: dict[str, Any], **props: Any) -> list[str]:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region=cdk_support.REGION))
    HyperPodDpd(stack, "Inference", endpoints=[default_spec()], cluster=ClusterOptions(existing=EXISTING, **props),
                vpc=cdk_support.EXISTING_VPC, hyperpod=HyperPodOptions(subnet_ids=cdk_support.HYPERPOD_SUBNETS))
    messages = app.synth().get_stack_artifact(stack.artifact_id).messages
    return [str(m.entry.data) for m in messages if "OwnLoadBalancerController" in str(m.entry.data)]


def test_the_clusters_own_controller_warns_that_the_deny_and_the_barrier_tag_are_its_own(
        cdk_context: dict[str, Any]) -> None:
    (warning,) = _warnings(cdk_context, bundled_load_balancer_controller=False)
    assert "deny on internet-facing load balancers does not apply" in warning
    assert "--cluster-name" in warning and "EKS cluster name" in warning
    assert _warnings(cdk_context) == []


@pytest.mark.parametrize("option", ["bundled_load_balancer_controller", "bundled_keda"])
def test_a_new_cluster_refuses_to_go_without_them(cdk_context: dict[str, Any], option: str) -> None:
    with pytest.raises(SpecError) as error:
        _synth(cdk_context, existing=False, **{option: False})
    assert option in [p.field for p in error.value.problems]


def test_lifting_the_internet_facing_deny_needs_the_bundled_controller(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    stack = cdk.Stack(app, "Platform", env=cdk.Environment(region=cdk_support.REGION))
    with pytest.raises(SpecError) as error:
        HyperPodDpd(stack, "Inference", endpoints=[default_spec()], vpc=cdk_support.EXISTING_VPC,
                    hyperpod=HyperPodOptions(subnet_ids=cdk_support.HYPERPOD_SUBNETS),
                    cluster=ClusterOptions(existing=EXISTING, bundled_load_balancer_controller=False),
                    allow_internet_facing_load_balancers=True)
    assert "allow_internet_facing_load_balancers" in [p.field for p in error.value.problems]


EXISTING_CONTEXT = {"eks_cluster": "platform", "oidc_issuer_url": EXISTING.oidc_issuer_url,
                    "oidc_provider_arn": cdk_support.EXISTING_OIDC_PROVIDER, "vpc_id": "vpc-0123456789abcdef0",
                    "eks_subnets": "us-west-2a=subnet-0aaa0000000000001,us-west-2b=subnet-0bbb0000000000002",
                    "hyperpod_subnets": "usw2-az2=subnet-0ccc0000000000003"}


@pytest.mark.parametrize(("key", "alb", "keda"), [("bundled_load_balancer_controller", False, True),
                                                  ("bundled_keda", True, False)])
def test_the_cdk_app_turns_them_off_with_a_context_key(app_module: Any, cdk_context: dict[str, Any], key: str,
                                                        alb: bool, keda: bool) -> None:
    """N2 from the command line: ``-c bundled_load_balancer_controller=false`` / ``-c bundled_keda=false``."""
    _, stack = app_module.build({**cdk_context, **EXISTING_CONTEXT, key: "false"})
    assert (stack.operator.alb_role is not None, stack.operator.keda_role is not None) == (alb, keda)
    _, default = app_module.build({**cdk_context, **EXISTING_CONTEXT})
    assert default.operator.alb_role is not None and default.operator.keda_role is not None


@pytest.mark.parametrize("key", ["bundled_load_balancer_controller", "bundled_keda"])
def test_the_cdk_app_refuses_a_bad_value_and_a_new_cluster_with_field_value_and_fix(
        app_module: Any, cdk_context: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, **EXISTING_CONTEXT, key: "off"})
    (problem,) = error.value.problems
    assert (problem.field, problem.value) == (key, "off")
    assert problem.message == "is not true or false" and problem.fix == f"-c {key}=true, or leave the key out"
    with pytest.raises(SpecError) as error:
        app_module.build({**cdk_context, key: "false"})  # a new cluster has no controller of its own
    (problem,) = error.value.problems
    assert (problem.field, problem.value) == (key, False)
    assert "existing cluster" in problem.message and problem.fix == f"drop {key}, or pass the existing cluster"
