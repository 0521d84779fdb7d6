"""The operator's internal ALB can reach the HyperPod AZ: the HyperPod subnet is tagged for internal load
balancers, as AWS's HyperPod setup tags its HyperPod subnets (aws/sagemaker-hyperpod-cluster-setup
private-subnet-tagging-template.yaml: ``kubernetes.io/role/internal-elb: '1'`` on PrivateSubnetStack's
subnets)."""

from __future__ import annotations

from typing import Any

from cdk.cdk_support import Synthesized

from hyperpod_dpd_cdk.network import INTERNAL_ELB_TAG, PUBLIC_ELB_TAG


def tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource["Properties"].get("Tags", [])}


def test_the_hyperpod_subnet_is_a_subnet_for_internal_load_balancers(default_app: Synthesized) -> None:
    subnets = default_app.resources("AWS::EC2::Subnet")
    (hyperpod,) = [s for s in subnets.values() if "AvailabilityZoneId" in s["Properties"]]
    assert hyperpod["Properties"]["AvailabilityZoneId"] == default_app.stack.network.availability_zone_id
    assert tags(hyperpod)[INTERNAL_ELB_TAG] == "1"
    assert PUBLIC_ELB_TAG not in tags(hyperpod)


def test_internal_load_balancers_span_the_eks_azs_and_the_hyperpod_az(default_app: Synthesized) -> None:
    tagged = [s for s in default_app.resources("AWS::EC2::Subnet").values() if tags(s).get(INTERNAL_ELB_TAG) == "1"]
    by_name = [s for s in tagged if "AvailabilityZone" in s["Properties"]]
    by_id = [s for s in tagged if "AvailabilityZoneId" in s["Properties"]]
    assert len(by_name) == 2, "the two private EKS subnets, for the two AZs an ALB needs"
    assert len(by_id) == 1, "and the subnet of the AZ ID where the model pods run"
