"""The AWS Load Balancer Controller's IAM policy, exactly as aws-cdk-lib ships it for a controller version.

The inference operator bundles the controller (its own chart dependency), so the stack creates only
the controller's role. aws-cdk-lib keeps one upstream ``iam_policy.json`` per controller version for
``aws_eks_v2.AlbController``; reading that file keeps the role in step with upstream (listener and
rule tagging from v2.13, the ownership-tag conditions, WAF and Shield) instead of a hand-kept copy.
The files live in the jsii bundle of the installed aws-cdk-lib and have no public accessor.
"""

from __future__ import annotations

import json
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import aws_cdk._jsii as jsii_bundle  # the package folder that holds aws-cdk-lib's jsii tarball
from aws_cdk import Aws
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam

from hyperpod_dpd_cdk.versions import ALB_CONTROLLER_VERSION


def known_versions() -> set[str]:
    """Controller versions aws-cdk-lib knows (``AlbControllerVersion.V2_x_y``)."""
    return {getattr(eks.AlbControllerVersion, name).version for name in dir(eks.AlbControllerVersion)
            if name.startswith("V")}


@cache
def policy_document(version: str = ALB_CONTROLLER_VERSION) -> dict[str, Any]:
    """The upstream policy document of ``version`` (``v2.13.2``) from aws-cdk-lib's bundle."""
    if version not in known_versions():
        raise ValueError(f"aws-cdk-lib has no AWS Load Balancer Controller policy for {version}; "
                         f"known: {', '.join(sorted(known_versions()))}")
    (tarball,) = Path(jsii_bundle.__file__).parent.glob("aws-cdk-lib@*.jsii.tgz")
    member = f"package/aws-eks-v2/lib/addons/alb-iam_policy-{version}.json"
    with tarfile.open(tarball, "r:gz") as archive:
        extracted = archive.extractfile(member)
        assert extracted is not None, member
        document: dict[str, Any] = json.load(extracted)
    return document


def controller_statements(version: str = ALB_CONTROLLER_VERSION) -> list[iam.PolicyStatement]:
    """The document's statements with ``arn:aws:`` made partition-aware, as ``AlbController`` does."""

    def partition_aware(resource: str) -> str:
        return resource.replace("arn:aws:", f"arn:{Aws.PARTITION}:", 1)

    statements = []
    for statement in policy_document(version)["Statement"]:
        resources = statement["Resource"]
        rewritten = ([partition_aware(r) for r in resources] if isinstance(resources, list)
                     else partition_aware(resources))
        statements.append(iam.PolicyStatement.from_json({**statement, "Resource": rewritten}))
    return statements


def wildcard_findings(version: str = ALB_CONTROLLER_VERSION) -> list[str]:
    """cdk-nag's IAM5 finding ids for the wildcard resources of the document (``Resource::...``)."""
    found: set[str] = set()
    for statement in policy_document(version)["Statement"]:
        resources = statement["Resource"]
        for resource in resources if isinstance(resources, list) else [resources]:
            if "*" in resource:
                found.add("Resource::" + resource.replace("arn:aws:", "arn:<AWS::Partition>:", 1))
    return sorted(found)
