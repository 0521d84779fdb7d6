"""What Kubernetes and AWS accept for the names, keys, tags and counts a spec carries.

Each rule is the real system's own, with its source beside it; ``validation`` turns a refusal into a
problem with the field, the value and the fix, so the cluster or AWS never sees it.
"""

from __future__ import annotations

import ipaddress
import re

# AWS region codes, as the AWS General Reference lists them ("Regions and Zones"): us-west-2, us-gov-west-1, and
# the ISO partitions' us-iso-east-1, us-isob-east-1 and eu-isoe-west-1. botocore (1.44, utils.py
# validate_region_name) refuses anything that is not a DNS host label with InvalidRegionError.
REGION_NAME = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")

# Kubernetes, k8s.io/apimachinery pkg/util/validation/validation.go: IsQualifiedName (label and
# annotation keys: an optional DNS-1123 subdomain prefix and '/', then a name of at most 63 characters),
# IsDNS1123Subdomain (at most 253 characters), IsValidLabelValue (empty, or a name of at most 63).
QUALIFIED_NAME_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_error(key: str) -> str | None:
    """Why Kubernetes refuses ``key`` as a label key (IsQualifiedName), or None when it accepts it."""
    parts = key.split("/")
    if len(parts) > 2:
        return "has more than one '/': a label key is an optional DNS subdomain prefix, '/', and a name"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "has an empty prefix before '/'"
        if len(prefix) > DNS1123_SUBDOMAIN_MAX:
            return (f"has a prefix of {len(prefix)} characters; the prefix is a DNS subdomain of at most "
                    f"{DNS1123_SUBDOMAIN_MAX}")
        if not _DNS1123_SUBDOMAIN.match(prefix):
            return ("has a prefix that is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', "
                    "starting and ending with a letter or digit)")
    if not name:
        return "has an empty name part"
    if len(name) > QUALIFIED_NAME_MAX:
        return f"has a name part of {len(name)} characters; Kubernetes allows {QUALIFIED_NAME_MAX}"
    if not _QUALIFIED_NAME.match(name):
        return ("has a name part that is not letters, digits, '-', '_' and '.', starting and ending with a "
                "letter or digit")
    return None


def label_value_error(value: str) -> str | None:
    """Why Kubernetes refuses ``value`` as a label value (IsValidLabelValue), or None."""
    if len(value) > LABEL_VALUE_MAX:
        return f"is {len(value)} characters; a label value has at most {LABEL_VALUE_MAX}"
    if value and not _QUALIFIED_NAME.match(value):
        return "is not letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    return None


# Amazon S3 general purpose bucket naming rules
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3-63 characters of
# lower-case letters, digits, '.' and '-', beginning and ending with a letter or digit; no two adjacent
# periods; not formatted as an IP address; not starting or ending with the reserved prefixes and
# suffixes below (access points, Object Lambda, Multi-Region Access Points, directory and table buckets).
S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
S3_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
S3_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# Object keys are at most 1,024 bytes of UTF-8 (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
S3_KEY_MAX_BYTES = 1024
# The longest file name read under a model prefix: a sharded checkpoint's shard, named by transformers'
# "model-{:05d}-of-{:05d}.safetensors" (32 characters; the index, configs and the staging marker
# '.hyperpod-dpd-complete' are shorter).
LONGEST_MODEL_FILE = "model-00001-of-00099.safetensors"


def bucket_name_error(name: str) -> str | None:
    """Why S3 refuses ``name`` as a general purpose bucket name, or None."""
    if not S3_BUCKET.match(name):
        return "is not 3-63 lower-case letters, digits, '.' and '-', starting and ending with a letter or digit"
    if ".." in name:
        return "has two adjacent periods"
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        return "is formatted as an IP address"
    prefix = next((p for p in S3_RESERVED_PREFIXES if name.startswith(p)), None)
    if prefix is not None:
        return f"starts with {prefix!r}, a prefix S3 reserves"
    suffix = next((s for s in S3_RESERVED_SUFFIXES if name.endswith(s)), None)
    if suffix is not None:
        return f"ends with {suffix!r}, a suffix S3 reserves"
    return None


def longest_key_bytes(prefix: str) -> int:
    """The UTF-8 length of the longest object key read under ``prefix`` (``prefix/<longest file>``)."""
    clean = prefix.strip("/")
    return len(f"{clean}/{LONGEST_MODEL_FILE}".lstrip("/").encode())


# AWS tagging: "Do not use aws:, AWS:, or any upper or lowercase combination of such as a prefix for either
# keys or values as it is reserved for Amazon Web Services use" (ECS API reference, Tag; the tagging guide,
# https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html, reserves the prefix for every
# service). SageMaker API Tag: Key 1-128 characters, Value 0-256; at most 50 tags per resource.
RESERVED_TAG_PREFIX = "aws:"
MAX_TAGS = 50

# ACM certificate ARNs: arn:<partition>:acm:<region>:<account>:certificate/<id>. An Application Load Balancer
# listener uses certificates of its own region only (ELB user guide, "SSL certificates for your Application
# Load Balancer": "the certificate must be in the same Region as your load balancer").
ACM_ARN_REGION = re.compile(r"^arn:aws[a-z-]*:acm:([a-z0-9-]+):")

# SageMaker HyperPod: AWS::SageMaker::Cluster ClusterInstanceGroup.InstanceCount is 0-6758 (CloudFormation
# resource schema; CDK's template validation reports "greater than the maximum of 6758").
MAX_INSTANCE_COUNT = 6758


# Tag keys and values: the characters the AWS Tag pattern ^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$ allows (SageMaker
# ``Tag``, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Tag.html): letters, separators (spaces),
# numbers and these symbols.
TAG_SYMBOLS = "_.:/=+-@"


def tag_text_error(text: str) -> str | None:
    """The first character AWS's tag pattern refuses in ``text``, described; None when every one is allowed."""
    import unicodedata  # noqa: PLC0415 - only tags need it

    for char in text:
        if char not in TAG_SYMBOLS and unicodedata.category(char)[0] not in ("L", "Z", "N"):
            return f"holds {char!r}, which AWS tags do not allow"
    return None
