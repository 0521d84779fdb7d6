"""verify's exposure rows against a recorded Ingress, NetworkPolicies and stubbed ELBv2, EC2 and SageMaker."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.clients.kube import KubeApi
from hyperpod_dpd.ops.exposure import (
    check_ingress,
    check_load_balancer,
    check_network_policies,
    check_sagemaker_endpoint,
)
from hyperpod_dpd.ops.table import render_table
from hyperpod_dpd.spec import DpdSpec

MakeKube = Callable[..., tuple[KubeApi, Any]]
INGRESS_KEY = ("ingresses", "hyperpod-inference-system", "alb-dpd-test-default")
ALB_SG = "sg-0aaaa1111bbbb2222"


@pytest.fixture
def ec2(fakes: Any) -> Iterator[tuple[Any, Stubber]]:
    made = fakes.client("ec2")
    stub = Stubber(made)
    stub.activate()
    yield made, stub
    stub.deactivate()


def _security_group(stub: Stubber, *sources: str) -> None:
    """The frontend group the controller creates: 443 from the Ingress's inbound CIDRs (0.0.0.0/0 unless told)."""
    stub.add_response("describe_security_groups", {"SecurityGroups": [{
        "GroupId": ALB_SG, "GroupName": "k8s-hyperpod-albdpdte-0123456789", "VpcId": "vpc-0123456789abcdef0",
        "IpPermissions": [{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
                           "IpRanges": [{"CidrIp": s} for s in sources]}]}]}, {"GroupIds": [ALB_SG]})


# --- the Ingress ------------------------------------------------------------------------------------


def test_internal_ingress_passes_and_prints_what_it_asks_for(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube()
    finding = check_ingress(kube, spec)
    assert finding.check.status is Status.PASS
    assert finding.hostname == fakes.ALB_HOSTNAME
    lines = finding.check.detail.splitlines()
    assert lines[:5] == [
        f"Ingress hyperpod-inference-system/alb-dpd-test-default: internal, {fakes.ALB_HOSTNAME}",
        "scheme internal (not annotated: the controller default)",
        "listeners HTTPS:443",
        "security groups created by the controller (no annotation)",
        "source ranges 0.0.0.0/0 (the controller default): any host routed into the VPC, no client authentication"]
    assert "  alb.ingress.kubernetes.io/target-type: ip" in lines


def test_internet_facing_annotation_fails(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube(fakes.healthy_cluster(**{}) | {INGRESS_KEY: fakes.ingress(
        scheme="internet-facing", hostname=fakes.PUBLIC_ALB_HOSTNAME)})
    finding = check_ingress(kube, spec)
    assert (finding.check.status, finding.check.settled) == (Status.FAIL, True)
    assert finding.check.detail.splitlines()[0].startswith(
        "Ingress hyperpod-inference-system/alb-dpd-test-default: INTERNET-FACING (scheme internet-facing): the "
        "model is reachable from the internet without authentication")
    assert finding.hostname == fakes.PUBLIC_ALB_HOSTNAME  # so the AWS row looks at it too


def test_public_hostname_fails_even_without_the_annotation(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube(fakes.healthy_cluster() | {INGRESS_KEY: fakes.ingress(hostname=fakes.PUBLIC_ALB_HOSTNAME)})
    check = check_ingress(kube, spec).check
    assert check.status is Status.FAIL
    assert f"hostname {fakes.PUBLIC_ALB_HOSTNAME} is not internal-" in check.detail


def test_explicit_internal_with_inbound_cidrs(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube(fakes.healthy_cluster() | {INGRESS_KEY: fakes.ingress(
        scheme="internal", annotations={"alb.ingress.kubernetes.io/inbound-cidrs": "10.192.0.0/16"})})
    check = check_ingress(kube, spec).check
    assert check.status is Status.PASS
    assert check.detail.splitlines()[1:4:2] == ["scheme internal", "security groups created by the controller "
                                                "(no annotation)"]
    assert "source ranges 10.192.0.0/16" in check.detail.splitlines()


def test_no_ingress_or_no_load_balancer_yet_is_not_settled(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    answers = fakes.healthy_cluster()
    del answers[INGRESS_KEY]
    kube, _ = make_kube(answers)
    assert (check_ingress(kube, spec).check.status, check_ingress(kube, spec).check.settled) == (Status.FAIL, False)
    kube, _ = make_kube(fakes.healthy_cluster() | {INGRESS_KEY: fakes.ingress(hostname=None)})
    finding = check_ingress(kube, spec)
    assert (finding.check.status, finding.check.settled, finding.hostname) == (Status.FAIL, False, None)


def test_forbidden_ingress_is_an_error(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube(fakes.healthy_cluster() | {INGRESS_KEY: fakes.api_error(403, "ingresses is forbidden")})
    check = check_ingress(kube, spec).check
    assert check.status is Status.ERROR and "forbidden (403)" in check.detail


# --- the ALB (AWS) ---------------------------------------------------------------------------------------


def test_internal_alb_reports_listeners_and_vpc_wide_sources(stubs: Any, ec2: Any, fakes: Any) -> None:
    client, stub = ec2
    stubs.load_balancer(security_groups=(ALB_SG,))
    _security_group(stub, "0.0.0.0/0")
    check = check_load_balancer(stubs.elbv2, client, fakes.ALB_HOSTNAME)
    assert check.status is Status.PASS
    assert check.detail.splitlines() == [
        "k8s-hyperpod-albdpdte: scheme internal, application", "listeners HTTPS:443", f"security groups {ALB_SG}",
        f"  {ALB_SG} tcp/443 from 0.0.0.0/0 (VPC-wide: any host routed into the VPC, no client authentication)"]


def test_internet_facing_alb_fails(stubs: Any, ec2: Any, fakes: Any) -> None:
    client, stub = ec2
    stubs.load_balancer(fakes.PUBLIC_ALB_HOSTNAME, scheme="internet-facing", security_groups=(ALB_SG,))
    _security_group(stub, "0.0.0.0/0")
    check = check_load_balancer(stubs.elbv2, client, fakes.PUBLIC_ALB_HOSTNAME)
    assert check.status is Status.FAIL
    assert "reachable from the internet without authentication" in check.detail
    assert check.detail.endswith("from 0.0.0.0/0 (THE INTERNET)")


def test_alb_not_found_or_denied(stubs: Any, ec2: Any) -> None:
    client, _ = ec2
    stubs.elbv2_stub.add_response("describe_load_balancers", {"LoadBalancers": []}, {})
    assert check_load_balancer(stubs.elbv2, client, "internal-x.elb.amazonaws.com").status is Status.FAIL
    stubs.elbv2_stub.add_client_error("describe_load_balancers", "AccessDenied", "no", 403)
    denied = check_load_balancer(stubs.elbv2, client, "internal-x.elb.amazonaws.com")
    assert denied.status is Status.ERROR and "elasticloadbalancing:DescribeLoadBalancers" in denied.detail
    assert check_load_balancer(stubs.elbv2, client, None).status is Status.SKIP


# --- the SageMaker endpoint --------------------------------------------------------------------------------


def test_sagemaker_endpoint_in_service(stubs: Any, spec: DpdSpec) -> None:
    stubs.endpoint("dpd-test")
    check = check_sagemaker_endpoint(stubs.sagemaker, spec)
    assert (check.status, check.detail) == (Status.PASS, "dpd-test: InService; callers authenticate with IAM SigV4 "
                                            "(sagemaker:InvokeEndpoint on arn:aws:sagemaker:us-west-2:123456789012:"
                                            "endpoint/dpd-test)")


def test_sagemaker_endpoint_missing_creating_or_not_asked_for(stubs: Any, spec: DpdSpec) -> None:
    stubs.sagemaker_stub.add_client_error("describe_endpoint", "ValidationException",
                                          'Could not find endpoint "dpd-test".', 400)
    missing = check_sagemaker_endpoint(stubs.sagemaker, spec)
    assert (missing.status, missing.settled) == (Status.FAIL, False)
    stubs.endpoint("dpd-test", status="Creating")
    assert check_sagemaker_endpoint(stubs.sagemaker, spec).settled is False
    unset = check_sagemaker_endpoint(stubs.sagemaker, dataclasses.replace(spec, endpoint_name=None))
    assert unset.status is Status.SKIP and "no IAM-authenticated front door" in unset.detail


# --- NetworkPolicies ------------------------------------------------------------------------------------------


def test_network_policies_none_or_listed(make_kube: MakeKube, spec: DpdSpec, fakes: Any) -> None:
    kube, _ = make_kube()
    assert check_network_policies(kube, spec).detail.startswith("none: any pod in any namespace can call")
    kube, _ = make_kube(fakes.healthy_cluster() | {
        ("networkpolicies", "default"): fakes.network_policies("dpd-test-model-pods")})
    check = check_network_policies(kube, spec)
    assert check.detail == "default: dpd-test-model-pods; hyperpod-inference-system: none"


# --- the output docs/security.md quotes -----------------------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _quoted_blocks() -> list[str]:
    """The ``text`` blocks of docs/security.md that follow a ``<!-- verify-exposure -->`` marker."""
    parts = DOC.read_text(encoding="utf-8").split("<!-- verify-exposure -->")[1:]
    return [part.split("```text\n", 1)[1].split("```", 1)[0].rstrip("\n") for part in parts]


def test_the_security_page_quotes_the_rows_verify_prints(make_kube: MakeKube, spec: DpdSpec, stubs: Any, ec2: Any,
                                                         fakes: Any) -> None:
    client, stub = ec2
    kube, _ = make_kube()
    stubs.load_balancer(security_groups=(ALB_SG,))
    _security_group(stub, "0.0.0.0/0")
    stubs.endpoint("dpd-test")
    ingress = check_ingress(kube, spec)
    healthy = render_table([ingress.check, check_load_balancer(stubs.elbv2, client, ingress.hostname),
                            check_sagemaker_endpoint(stubs.sagemaker, spec), check_network_policies(kube, spec)])
    kube, _ = make_kube(fakes.healthy_cluster() | {INGRESS_KEY: fakes.ingress(
        scheme="internet-facing", hostname=fakes.PUBLIC_ALB_HOSTNAME)})
    public = render_table([check_ingress(kube, spec).check])
    assert _quoted_blocks() == [healthy, public]
