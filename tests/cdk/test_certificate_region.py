"""An ACM certificate serves load balancers of its own region only: another region's ARN is refused at synth."""

from __future__ import annotations

import dataclasses

import aws_cdk as cdk
import pytest

from hyperpod_dpd import DpdSpec, SpecError, TlsSpec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import HyperPodDpd
from hyperpod_dpd_cdk.hyperpod_dpd import certificate_region_problems

ARN = "arn:aws:acm:{}:123456789012:certificate/0a1b2c3d-4e5f-6789-abcd-ef0123456789"


def _with_certificate(region: str) -> DpdSpec:
    return dataclasses.replace(default_spec(), tls=TlsSpec(acm_certificate_arn=ARN.format(region),
                                                           domain_name="dpd.example.com"))


def test_a_certificate_of_the_stacks_region_passes() -> None:
    assert list(certificate_region_problems(_with_certificate("us-west-2"), region="us-west-2", field="f")) == []


def test_another_regions_certificate_is_refused_by_the_construct() -> None:
    stack = cdk.Stack(cdk.App(), "Platform", env=cdk.Environment(region="us-west-2"))
    with pytest.raises(SpecError) as raised:
        HyperPodDpd(stack, "Inference", endpoints=[_with_certificate("us-east-1")])
    (found,) = [p for p in raised.value.problems if p.field == "endpoints[0].tls.acm_certificate_arn"]
    assert "us-east-1" in found.message and "the stack deploys to us-west-2" in found.message
    assert "in us-west-2" in found.fix
