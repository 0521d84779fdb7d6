"""U5: an SSE-KMS model bucket, imported with its key, gives every reader ``kms:Decrypt`` and every writer
``kms:GenerateDataKey`` on that key, through S3 only; a bucket without a key gives no KMS statement."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import aws_iam as iam
from cdk.cdk_support import WEIGHTS_KEY_ARN, Synthesized, policy_statements

VIA_S3 = {"StringEquals": {"kms:ViaService": {"Fn::Join": ["", ["s3.", {"Ref": "AWS::Region"}, ".",
                                                                {"Ref": "AWS::URLSuffix"}]]}}}


def key_actions(s: Synthesized, role: iam.IRole) -> list[str]:
    """The KMS actions ``role`` has on the bucket's key, each statement conditioned on S3."""
    found: list[str] = []
    for statement in policy_statements(s, role):
        if statement.get("Resource") == WEIGHTS_KEY_ARN:
            assert statement["Condition"] == VIA_S3, statement
            actions = statement["Action"]
            found += [actions] if isinstance(actions, str) else actions
    return sorted(found)


def readers_and_writers(s: Synthesized) -> dict[str, tuple[list[iam.IRole], list[str]]]:
    platform: Any = s.stack
    staging = [w.role for w in {id(w): w for w in platform.weights_staging.values()}.values()]
    bench = [b.role for b in platform.benchmark_access]
    assert len(staging) == 1 and len(bench) == 2  # one staged revision, two namespaces
    return {"nodes": ([platform.execution_role.role], ["kms:Decrypt"]),
            "s3 csi driver": ([platform.operator.s3_csi_role], ["kms:Decrypt"]),
            "benchmark": (bench, ["kms:Decrypt", "kms:GenerateDataKey"]),
            "staging job": (staging, ["kms:Decrypt", "kms:GenerateDataKey"])}


@pytest.mark.parametrize("who", ["nodes", "s3 csi driver", "benchmark", "staging job"])
def test_every_reader_and_writer_gets_the_buckets_key(kms_bucket_app: Synthesized, who: str) -> None:
    roles, expected = readers_and_writers(kms_bucket_app)[who]
    for role in roles:
        assert key_actions(kms_bucket_app, role) == expected


def test_a_bucket_without_a_key_gives_no_kms_statement(default_app: Synthesized) -> None:
    policies = default_app.resources("AWS::IAM::Policy")
    kms = [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]
           if any(str(a).startswith("kms:") for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
           and "ViaService" in str(s.get("Condition"))]
    assert kms == []
