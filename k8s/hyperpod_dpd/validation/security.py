"""Who can call the model, as far as the spec decides it: TLS, the front doors, DNS and data capture.

See ``docs/checks.md`` and ``docs/security.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_dpd.contracts.aws_names import ACM_ARN_REGION, bucket_name_error
from hyperpod_dpd.contracts.zones import zone_settings
from hyperpod_dpd.errors import SpecWarning
from hyperpod_dpd.validation.context import Finding, RuleContext, is_token, problem

TLS_S3_URI = re.compile(r"^s3://([^/]+)/?(.*)$")
ACM_ARN = re.compile(r"^arn:aws:acm:[a-z0-9-]+:[0-9]{12}:certificate/[a-fA-F0-9-]+$")
DOMAIN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")
# Patterns of the CRD (inferenceendpointconfig-v1.json): dnsConfig.hostedZoneId, dataCapture.s3Uri.
HOSTED_ZONE_ID = re.compile(r"^Z[A-Z0-9]+$")
CAPTURE_S3_URI = re.compile(r"^s3://([^/]+)(/[^,=]*)?$")
CAPTURE_S3_URI_MAX = 512


def tls(ctx: RuleContext) -> Iterator[Finding]:
    tls_spec = ctx.spec.tls
    if tls_spec is None:
        return
    uri = tls_spec.certificate_output_s3_uri
    if uri is not None and not is_token(uri):
        match = TLS_S3_URI.match(uri)
        error = bucket_name_error(match.group(1)) if match else None
        if match is None:
            yield problem("tls.certificate_output_s3_uri", uri, "must be an s3:// URI", "write s3://bucket/prefix")
        elif error is not None:
            yield problem("tls.certificate_output_s3_uri", uri, f"names bucket {match.group(1)!r}, which {error} "
                          "(S3 bucket naming rules); the operator could never write its certificate there",
                          "write s3://<your bucket>/<prefix>")
    arn, domain = tls_spec.acm_certificate_arn, tls_spec.domain_name
    if (arn is None) != (domain is None):
        yield problem("tls.acm_certificate_arn" if arn is None else "tls.domain_name", arn or domain,
                      "a custom certificate needs both acm_certificate_arn and domain_name", "set both or neither")
    if arn is not None and not ACM_ARN.match(arn):
        yield problem("tls.acm_certificate_arn", arn, "is not an ACM certificate ARN",
                      "copy the ARN from ACM: arn:aws:acm:<region>:<account>:certificate/<id>")
    region = ACM_ARN_REGION.match(arn) if arn is not None else None
    endpoint_regions = {z.region for z in zone_settings(ctx.spec) if z.region is not None}
    if arn is not None and region is not None and endpoint_regions and region.group(1) not in endpoint_regions:
        yield problem("tls.acm_certificate_arn", arn, f"is a certificate in {region.group(1)}, but the endpoint "
                      f"runs in {', '.join(sorted(endpoint_regions))} (its zone settings); a load balancer uses "
                      "certificates of its own region only", "request or import the certificate in the endpoint's "
                      "region and use that ARN")
    if domain is not None and (len(domain) > 253 or not DOMAIN.match(domain)):
        yield problem("tls.domain_name", domain, "is not a lower-case DNS name", "write e.g. 'llm.example.com'")


def front_doors(ctx: RuleContext) -> Iterator[Finding]:
    """Warn, with the fix, when no door to the model checks its caller or no client can verify the ALB.

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
    capture_match = CAPTURE_S3_URI.match(uri) if uri is not None and not is_token(uri) else None
    if uri is not None and not is_token(uri) and (len(uri) > CAPTURE_S3_URI_MAX or capture_match is None):
        yield problem("data_capture.s3_uri", uri, f"must be an s3:// URI of at most {CAPTURE_S3_URI_MAX} characters "
                      "without ',' or '='", "write s3://bucket/prefix, or leave it out for the operator's default")
    elif capture_match is not None and (error := bucket_name_error(capture_match.group(1))) is not None:
        yield problem("data_capture.s3_uri", uri, f"names bucket {capture_match.group(1)!r}, which {error} (S3 "
                      "bucket naming rules)", "write s3://<your bucket>/<prefix>, or leave it out for the "
                      "operator's default")
    if not capture.load_balancer:
        yield problem("data_capture.load_balancer", False, "captures nothing", "set it true, or remove data_capture")
    elif uri is not None:
        yield SpecWarning(code="CaptureBucketPermissions", field="data_capture.s3_uri",
                      message="is your own bucket: its policy must let logdelivery.elasticloadbalancing.amazonaws.com "
                              "s3:PutObject there, and the operator's execution role needs s3:PutObject on it; the "
                              "stack grants both only for the default location")
