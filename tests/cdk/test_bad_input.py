"""Bad input fails at synth time with one SpecError naming the field, the value and the fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk.cdk_support import EXISTING_VPC, HYPERPOD_SUBNETS

from hyperpod_dpd import DpdSpec, InstanceType, SpecError
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import ExistingEksCluster, HyperPodDpd, HyperPodDpdStack, InstanceGroup
from hyperpod_dpd_cdk.hyperpod_cluster import instance_group_problems


def build(*, region: str = "us-west-2", endpoints: list[DpdSpec] | None = None, **props: Any) -> HyperPodDpdStack:
    app = cdk.App()
    return HyperPodDpdStack(app, "Bad", env=cdk.Environment(region=region),
                            endpoints=endpoints if endpoints is not None else [default_spec()], **props)


def problems(error: pytest.ExceptionInfo[SpecError]) -> dict[str, Any]:
    return {p.field: p for p in error.value.problems}


def test_instance_type_not_offered_in_the_region() -> None:
    spec = dataclasses.replace(default_spec(), instance_type=InstanceType.P6_B300_48XLARGE)
    with pytest.raises(SpecError) as error:
        build(region="eu-west-1", availability_zone_id="euw1-az1", endpoints=[spec])
    problem = problems(error)["endpoints[0].instance_type"]
    assert problem.value == "ml.p6-b300.48xlarge"
    assert "not offered by HyperPod in eu-west-1" in problem.message
    assert "us-west-2" in problem.fix


def test_p5e_needs_a_training_plan() -> None:
    spec = dataclasses.replace(default_spec(), instance_type=InstanceType.P5E_48XLARGE)
    with pytest.raises(SpecError) as error:
        build(endpoints=[spec])
    problem = problems(error)["endpoints[0].instance_type"]
    assert "training plan" in problem.message and "training_plan_arn" in problem.fix


def test_p5e_with_a_training_plan_is_accepted_up_to_construction() -> None:
    spec = dataclasses.replace(default_spec(), instance_type=InstanceType.P5E_48XLARGE)
    plan = "arn:aws:sagemaker:us-west-2:111122223333:training-plan/dpd-plan"
    stack = build(endpoints=[spec], training_plan_arn=plan)
    assert all(g.training_plan_arn == plan for g in stack.hyperpod.instance_groups)


def test_az_id_not_in_the_existing_vpc() -> None:
    with pytest.raises(SpecError) as error:
        build(vpc=EXISTING_VPC, hyperpod_subnet_ids=HYPERPOD_SUBNETS, availability_zone_id="usw2-az3")
    problem = problems(error)["availability_zone_id"]
    assert problem.value == "usw2-az3"
    assert "usw2-az1, usw2-az2" in problem.message
    assert "hyperpod_subnet_ids" in problem.fix


def test_existing_vpc_needs_two_azs_of_eks_subnets() -> None:
    one_az = dataclasses.replace(EXISTING_VPC, availability_zones=("us-west-2a",),
                                 private_subnet_ids=("subnet-0aaa0000000000001",))
    with pytest.raises(SpecError) as error:
        build(vpc=one_az, hyperpod_subnet_ids=HYPERPOD_SUBNETS)
    assert "two AZs" in problems(error)["vpc.private_subnet_ids"].message


def test_az_id_of_another_region() -> None:
    with pytest.raises(SpecError) as error:
        build(availability_zone_id="use1-az4")
    problem = problems(error)["availability_zone_id"]
    assert "us-east-1" in problem.message and "us-west-2" in problem.message


def test_az_name_instead_of_id() -> None:
    with pytest.raises(SpecError) as error:
        build(availability_zone_id="us-west-2a")
    assert "not an Availability Zone ID" in problems(error)["availability_zone_id"].message


def test_zero_replicas() -> None:
    base = default_spec()
    spec = dataclasses.replace(base, decode=dataclasses.replace(base.decode, replicas=0))
    with pytest.raises(SpecError) as error:
        build(endpoints=[spec])
    problem = problems(error)["endpoints[0].decode.replicas"]
    assert problem.value == 0 and "at least 1" in problem.message


def test_conflicting_names_across_endpoints() -> None:
    first = default_spec()
    second = dataclasses.replace(first, namespace="other", endpoint_name="other")
    with pytest.raises(SpecError) as error:
        build(endpoints=[first, second])
    found = problems(error)
    assert set(found) == {"endpoints[1].name"}
    assert found["endpoints[1].name"].value == "dpd-test"
    assert "endpoints[0]" in found["endpoints[1].name"].message
    assert "distinct name" in found["endpoints[1].name"].fix


def test_conflicting_sagemaker_endpoint_names() -> None:
    first = default_spec()
    second = dataclasses.replace(first, name="second")
    with pytest.raises(SpecError) as error:
        build(endpoints=[first, second])
    assert set(problems(error)) == {"endpoints[1].endpoint_name"}


def test_every_problem_is_reported_at_once() -> None:
    base = default_spec()
    spec = dataclasses.replace(base, prefill=dataclasses.replace(base.prefill, replicas=0))
    with pytest.raises(SpecError) as error:
        build(endpoints=[spec, spec], availability_zone_id="use1-az4")
    assert {"endpoints[0].prefill.replicas", "endpoints[1].prefill.replicas", "endpoints[1].name",
            "availability_zone_id"} <= set(problems(error))


def test_instance_group_names_and_counts_are_checked_by_the_construct() -> None:
    # Specs cannot produce these (their names are DNS labels); HyperPodCluster used on its own can.
    groups = [InstanceGroup(name="dpd.test-prefill", instance_type=InstanceType.P5_48XLARGE, count=1),
              InstanceGroup(name="x", instance_type=InstanceType.P5_48XLARGE, count=0),
              InstanceGroup(name="x", instance_type=InstanceType.P5_48XLARGE, count=1, threads_per_core=4)]
    found = {p.field: p for p in instance_group_problems(groups)}
    assert set(found) == {"instance_groups[0].name", "instance_groups[1].count", "instance_groups[2].name",
                          "instance_groups[2].threads_per_core"}
    assert "no dots" in found["instance_groups[0].name"].message


def test_no_endpoints_is_allowed_until_synthesis() -> None:
    stack = build(endpoints=[])  # endpoints may come later with add_endpoint (tests/cdk/test_compose.py)
    assert stack.endpoint_specs == () and stack.hyperpod.instance_groups == ()


def test_unprepared_dependency_chart(tmp_path: Path) -> None:
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    with pytest.raises(SpecError) as error:
        build(dependency_chart_dir=tmp_path)
    problem = problems(error)["dependency_chart_dir"]
    assert "helm dependency" in problem.message and "prepare_hyperpod_chart.sh" in problem.fix


def test_a_missing_dependency_chart_is_reported_with_the_other_option_problems(tmp_path: Path) -> None:
    # One run names every problem: the chart folder used to surface only in the run after the others were fixed.
    with pytest.raises(SpecError) as error:
        build(dependency_chart_dir=tmp_path / "missing", admin_role_arns=["ADMIN"])
    found = problems(error)
    assert found["dependency_chart_dir"].message == "has no Chart.yaml (not a Helm chart folder)"
    assert "admin_role_arns[0]" in found


def test_existing_cluster_needs_its_vpc() -> None:
    with pytest.raises(SpecError) as error:
        build(existing_cluster=ExistingEksCluster(cluster_name="platform", oidc_issuer_url="https://oidc.example"))
    assert "vpc=" in problems(error)["existing_cluster"].fix


def test_existing_cluster_needs_its_oidc_provider() -> None:
    # IAM refuses a second OIDC provider for the same issuer, so none may be created for an existing cluster.
    with pytest.raises(SpecError) as error:
        build(vpc=EXISTING_VPC, hyperpod_subnet_ids=HYPERPOD_SUBNETS,
              existing_cluster=ExistingEksCluster(cluster_name="platform", oidc_issuer_url="https://oidc.example"))
    problem = problems(error)["existing_cluster.oidc_provider_arn"]
    assert "second provider" in problem.message
    assert "list-open-id-connect-providers" in problem.fix and "-c oidc_provider_arn" in problem.fix


def test_stack_options_are_checked_together() -> None:
    with pytest.raises(SpecError) as error:
        build(hyperpod_cluster_name="-bad-", ebs_volume_gb=0, training_plan_arn="plan-1",
              admin_role_arns=["arn:aws:iam::111122223333:role/Ok", "alice"])
    assert set(problems(error)) == {"hyperpod_cluster_name", "ebs_volume_gb", "training_plan_arn",
                                    "admin_role_arns[1]"}


def test_errors_are_spec_errors_not_jsii_errors() -> None:
    with pytest.raises(SpecError) as error:
        build(availability_zone_id="nowhere")
    assert "RuntimeError" not in str(error.value)
    assert str(error.value).startswith("invalid DPD spec")


def test_replicas_beyond_sagemakers_instance_count_are_a_problem_not_a_traceback() -> None:
    """CloudFormation's schema caps an instance group at 6758 instances; cdk.json's template validation turned
    that into a jsii error at synth. The stack refuses it first, naming the spec field."""
    base = default_spec()
    spec = dataclasses.replace(base, prefill=dataclasses.replace(base.prefill, replicas=100_000))
    with pytest.raises(SpecError) as error:
        build(endpoints=[spec])
    problem = problems(error)["endpoints[0].prefill.replicas"]
    assert problem.value == 100_000 and "6758" in problem.message and problem.fix


def test_an_environment_agnostic_stack_is_refused_with_the_fix() -> None:
    """F3: without a region neither the AZ ID nor the instance types can be placed; a deploy elsewhere fails."""
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(cdk.App(), "Agnostic", endpoints=[default_spec()])
    problem = problems(error)["region"]
    assert "usw2-az2" in problem.message and "environment-agnostic" in problem.message
    assert "env=cdk.Environment(region=" in problem.fix


def test_a_model_bucket_name_is_held_to_s3s_rules() -> None:
    """F7: the name is checked as the specs' bucket names are, before it is compared with them."""
    with pytest.raises(SpecError) as error:
        build(model_bucket_name="Dpd_Models")
    assert "is not a valid S3 bucket name" in problems(error)["model_bucket"].message


def test_an_option_object_of_the_wrong_type_gets_its_fix() -> None:
    """F10: a dict where HyperPodOptions belongs is a problem with the call to make, not an AttributeError."""
    stack = cdk.Stack(cdk.App(), "Typed", env=cdk.Environment(region="us-west-2"))
    with pytest.raises(SpecError) as error:
        HyperPodDpd(stack, "I", endpoints=[default_spec()],
                    hyperpod={"availability_zone_id": "usw2-az2"})  # type: ignore[arg-type]
    problem = problems(error)["hyperpod"]
    assert "is a dict, not HyperPodOptions" in problem.message
    assert problem.fix == "pass hyperpod=HyperPodOptions(**{'availability_zone_id': 'usw2-az2'})"
