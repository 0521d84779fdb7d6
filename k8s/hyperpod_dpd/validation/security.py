"""Who can call the model, as far as the spec decides it: warnings with the fix, and the checks of the
CRD's ``dnsConfig`` and ``dataCapture`` fields.

The operator's ALB authenticates nobody (no CRD field can add authentication or narrow its sources)
and the router Service is plain HTTP inside the cluster; the SageMaker endpoint is the one front door
that checks its caller (IAM SigV4, ``sagemaker:InvokeEndpoint``), and it exists only with
``endpoint_name`` (DPD page: "If endpointName is not set, no SageMaker AI endpoint is created and only
direct ALB invocation is available"). Without a custom certificate the ALB presents the operator's
self-signed one (CRD ``tlsConfig.customCertificateConfig``: "if not provided, operator auto-generates
self-signed certificate"), which no direct client can verify. That matters only without
``endpoint_name``: the SageMaker endpoint trusts the self-signed certificate through ``tlsConfig``, and
with it the ALB is not the door applications should use.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_dpd.errors import SpecWarning
from hyperpod_dpd.validation.check import Finding, RuleContext, register_rule
from hyperpod_dpd.validation.rules import is_token, problem

# Patterns of the CRD (inferenceendpointconfig-v1.json): dnsConfig.hostedZoneId, dataCapture.s3Uri.
HOSTED_ZONE_ID = re.compile(r"^Z[A-Z0-9]+$")
CAPTURE_S3_URI = re.compile(r"^s3://([^/]+)(/[^,=]*)?$")
CAPTURE_S3_URI_MAX = 512


@register_rule
def front_doors(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    if spec.endpoint_name is not None:
        return  # the SageMaker endpoint authenticates, and trusts the self-signed certificate (tlsConfig)
    yield SpecWarning(code="NoAuthenticatedFrontDoor", field="endpoint_name",
                  message="is not set: only the VPC-internal ALB and the in-cluster router reach this model, and "
                          "neither authenticates its callers; set endpoint_name to register a SageMaker endpoint "
                          "(IAM SigV4, sagemaker:InvokeEndpoint) for applications")
    if spec.tls is None or spec.tls.acm_certificate_arn is None:
        yield SpecWarning(code="SelfSignedCertificate", field="tls",
                      message="has no acm_certificate_arn: the ALB presents the operator's self-signed certificate, "
                              "which direct clients cannot verify; set tls.acm_certificate_arn and tls.domain_name "
                              "to a CA-signed ACM certificate")


@register_rule
def audit_trail(ctx: RuleContext) -> Iterator[Finding]:
    tls, capture = ctx.spec.tls, ctx.spec.data_capture
    zone = tls.hosted_zone_id if tls is not None else None
    if zone is not None:
        if not HOSTED_ZONE_ID.match(zone):
            yield problem("tls.hosted_zone_id", zone, "is not a Route 53 hosted zone id",
                          "copy it from `aws route53 list-hosted-zones` (Z followed by capitals and digits)")
        if tls is not None and tls.acm_certificate_arn is None:
            yield problem("tls.hosted_zone_id", zone, "needs a custom certificate: the operator writes the record "
                          "for tls.domain_name only with one", "set tls.acm_certificate_arn and tls.domain_name")
    if capture is None:
        return
    uri = capture.s3_uri
    if uri is not None and not is_token(uri) and (len(uri) > CAPTURE_S3_URI_MAX or not CAPTURE_S3_URI.match(uri)):
        yield problem("data_capture.s3_uri", uri, f"must be an s3:// URI of at most {CAPTURE_S3_URI_MAX} characters "
                      "without ',' or '='", "write s3://bucket/prefix, or leave it out for the operator's default")
    if not capture.load_balancer:
        yield problem("data_capture.load_balancer", False, "captures nothing", "set it true, or remove data_capture")
    elif uri is not None:
        yield SpecWarning(code="CaptureBucketPermissions", field="data_capture.s3_uri",
                      message="is your own bucket: its policy must let logdelivery.elasticloadbalancing.amazonaws.com "
                              "s3:PutObject there, and the operator's execution role needs s3:PutObject on it; the "
                              "stack grants both only for the default location")
