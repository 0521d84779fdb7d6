"""Who can call the model, as the spec decides it: warnings with the fix, and the dnsConfig and
dataCapture checks."""

from __future__ import annotations

import dataclasses

import pytest

from hyperpod_dpd import DataCaptureSpec, SpecError, TlsSpec, check
from hyperpod_dpd.spec.defaults import default_spec

CERT = "arn:aws:acm:us-west-2:123456789012:certificate/0f1e2d3c-4b5a-6978-8091-a2b3c4d5e6f7"


def _codes(**changes: object) -> dict[str, str]:
    checked = check(dataclasses.replace(default_spec(), **changes))  # type: ignore[arg-type]
    return {w.code: w.render() for w in checked.warnings}


def test_the_default_spec_registers_the_authenticated_door_and_is_quiet() -> None:
    assert default_spec().endpoint_name == "dpd-test"
    assert not {"NoAuthenticatedFrontDoor", "SelfSignedCertificate"} & set(_codes())


def test_no_endpoint_name_warns_with_the_fix() -> None:
    found = _codes(endpoint_name=None)
    assert found["NoAuthenticatedFrontDoor"].startswith("[NoAuthenticatedFrontDoor] endpoint_name: is not set")
    assert "set endpoint_name to register a SageMaker endpoint" in found["NoAuthenticatedFrontDoor"]
    assert "set tls.acm_certificate_arn and tls.domain_name" in found["SelfSignedCertificate"]


def test_a_custom_certificate_silences_the_certificate_warning() -> None:
    found = _codes(endpoint_name=None, tls=TlsSpec(acm_certificate_arn=CERT, domain_name="llm.example.com"))
    assert "NoAuthenticatedFrontDoor" in found and "SelfSignedCertificate" not in found


@pytest.mark.parametrize(("changes", "field", "fragment"), [
    ({"tls": TlsSpec(acm_certificate_arn=CERT, domain_name="llm.example.com", hosted_zone_id="z123")},
     "tls.hosted_zone_id", "is not a Route 53 hosted zone id"),
    ({"tls": TlsSpec(hosted_zone_id="Z0123456789ABCDEFGHIJ")}, "tls.hosted_zone_id", "needs a custom certificate"),
    ({"data_capture": DataCaptureSpec(s3_uri="logs/dpd")}, "data_capture.s3_uri", "must be an s3:// URI"),
    ({"data_capture": DataCaptureSpec(s3_uri="s3://b/a=b")}, "data_capture.s3_uri", "without ',' or '='"),
    ({"data_capture": DataCaptureSpec(load_balancer=False)}, "data_capture.load_balancer", "captures nothing"),
])
def test_dns_and_capture_problems_name_field_value_and_fix(changes: dict[str, object], field: str,
                                                           fragment: str) -> None:
    with pytest.raises(SpecError) as caught:
        check(dataclasses.replace(default_spec(), **changes))  # type: ignore[arg-type]
    (found,) = [p for p in caught.value.problems if p.field == field]
    assert fragment in found.message and found.fix


def test_capture_to_your_own_bucket_names_the_grants_it_needs() -> None:
    assert "logdelivery.elasticloadbalancing.amazonaws.com" in _codes(
        data_capture=DataCaptureSpec(s3_uri="s3://audit-logs/dpd"))["CaptureBucketPermissions"]
    assert "CaptureBucketPermissions" not in _codes(data_capture=DataCaptureSpec())
