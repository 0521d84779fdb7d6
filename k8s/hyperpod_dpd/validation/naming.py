"""Names and labels: what Kubernetes, SageMaker and the CRD accept for the spec's names, tags and paths.

See ``docs/checks.md`` for what is checked and why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from hyperpod_dpd.contracts.aws_names import MAX_TAGS, RESERVED_TAG_PREFIX, TAG_SYMBOLS, tag_text_error
from hyperpod_dpd.contracts.operator import router_service
from hyperpod_dpd.errors import Problem
from hyperpod_dpd.validation.context import Finding, RuleContext, problem

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# The CRD anchors modelName only at the start; the published example uses dots ("Llama-3.3-70B-Instruct").
MODEL_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$")
HTTP_PATH = re.compile(r"^/[a-zA-Z0-9\-_./]*$")


def is_sagemaker_name(value: str) -> bool:
    """A SageMaker resource name (endpoint, HyperPod cluster or instance group): the pattern and 1-63
    characters (the pattern alone lets repeated hyphens run past 63)."""
    return len(value) <= 63 and SAGEMAKER_NAME.match(value) is not None


def _sagemaker_name(field: str, value: str) -> Iterator[Problem]:
    if not is_sagemaker_name(value):
        yield problem(field, value, "must be 1-63 letters, digits and hyphens, starting and ending with a letter or "
                      "digit", "rename it, e.g. 'llama-3-3-70b'")


def names(ctx: RuleContext) -> Iterator[Finding]:
    spec = ctx.spec
    if not DNS_1035_LABEL.match(spec.name) or len(spec.name) > 63:
        yield problem("name", spec.name, "must be a DNS label that starts with a letter: lower-case letters, digits "
                      "and '-', at most 63 characters (the router Service is named after it)",
                      "rename it, e.g. 'llama70b-dpd'")
    if not DNS_LABEL.match(spec.namespace) or len(spec.namespace) > 63:
        yield problem("namespace", spec.namespace, "must be a DNS label: lower-case letters, digits and '-', at most "
                      "63 characters", "use an existing namespace such as 'default'")
    service = router_service(spec)
    if len(service) > 63:
        yield problem("name", spec.name, f"with namespace {spec.namespace!r} makes the router Service name "
                      f"{service!r} {len(service)} characters long; Kubernetes allows 63",
                      f"shorten name and namespace by {len(service) - 63} characters together")
    if spec.endpoint_name is not None:
        yield from _sagemaker_name("endpoint_name", spec.endpoint_name)
    if not MODEL_NAME.match(spec.model.name):
        yield problem("model.name", spec.model.name, "must be 1-63 letters, digits, '.', '_' and '-', starting with a "
                      "letter or digit", "rename it, e.g. 'Llama-3.3-70B-Instruct'")
    for key, value in spec.tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            yield problem(f"tags.{key}", value, "tag keys must be 1-128 characters and values at most 256",
                          "shorten the tag")
        for what, text in (("key", key), ("value", value)):
            if (error := tag_text_error(text)) is not None:
                yield problem(f"tags.{key}", text, f"the tag's {what} {error} (letters, numbers, spaces and "
                              f"{TAG_SYMBOLS} only, the pattern of SageMaker's Tag): the stack fails to deploy",
                              f"rewrite the {what} with those characters")
        if key.lower().startswith(RESERVED_TAG_PREFIX):
            yield problem(f"tags.{key}", value, f"has a key starting with {key[:4]!r}: AWS reserves the "
                          f"{RESERVED_TAG_PREFIX!r} prefix (any case) for its own tags, and SageMaker refuses to "
                          "create the endpoint", f"rename the key, e.g. {key[4:] or 'team'!r}")
    if len(spec.tags) > MAX_TAGS:
        yield problem("tags", len(spec.tags), f"holds more than the {MAX_TAGS} tags a SageMaker resource may have",
                      f"keep at most {MAX_TAGS}")
