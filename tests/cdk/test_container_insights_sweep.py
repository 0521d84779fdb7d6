"""Container Insights log groups after ``cdk destroy``: the add-on's agents create
``/aws/containerinsights/<cluster>/{application,dataplane,host,performance}`` outside CloudFormation. On a
cluster the stack created, the log sweep deletes exactly those four, after the add-on is gone; on an existing
cluster they hold other workloads' logs and are never named.

The handler runs against botocore's Stubber with AWS's recorded answers: CloudWatch Logs API reference,
DescribeLogGroups (a prefix listing: a group that merely starts with the name comes back too) and DeleteLogGroup
(``ResourceNotFoundException``, 400), Common Errors (``ThrottlingException``, 400)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from cdk.cdk_support import Synthesized, logical_id
from cdk.cdk_template_queries import by_addon, by_type, depends_on
from support import FakeClock, load_module

from hyperpod_dpd_cdk.observability import CONTAINER_INSIGHTS_GROUPS, container_insights_log_groups
from hyperpod_dpd_cdk.teardown import HANDLER_DIR

handler = load_module("teardown_handler_ci", HANDLER_DIR / "index.py")
CLUSTER = "dpd-eks"
NAMES = container_insights_log_groups(CLUSTER)


def group(name: str) -> dict[str, Any]:
    return {"logGroupName": name, "arn": f"arn:aws:logs:us-west-2:123456789012:log-group:{name}:*",
            "creationTime": 1, "storedBytes": 0}


def sweep_event() -> dict[str, Any]:
    return {"RequestType": "Delete", "PhysicalResourceId": "teardown-logs", "Data": {handler.STARTED: "1000.0"},
            "ResourceProperties": {"Kind": "logs", "LogGroupNames": NAMES, "GraceSeconds": 0,
                                   "DeadlineSeconds": 3000}}


class Logs:
    """One stubbed CloudWatch Logs client, answering in the order the handler asks."""

    def __init__(self) -> None:
        self.client = boto3.client("logs", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
        self.stub = Stubber(self.client)

    def __call__(self, service: str) -> Any:
        assert service == "logs", service
        return self.client

    def listing(self, existing: dict[str, list[str]]) -> None:
        """One look: DescribeLogGroups per name, returning the groups ``existing`` lists for it."""
        for name in NAMES:
            self.stub.add_response("describe_log_groups", {"logGroups": [group(n) for n in existing.get(name, [])]},
                                   {"logGroupNamePrefix": name})

    def answer_error(self, operation: str, code: str, *, status: int = 400,
                     params: dict[str, Any] | None = None) -> None:
        self.stub.add_client_error(operation, service_error_code=code, service_message=code,
                                   http_status_code=status, expected_params=params)


def poll(logs: Logs) -> dict[str, Any]:
    with logs.stub:
        result = handler.is_complete(sweep_event(), clock=FakeClock(), clients=logs)
        logs.stub.assert_no_pending_responses()
    return result


def test_existing_groups_are_deleted_then_the_sweep_completes() -> None:
    logs = Logs()
    logs.listing({name: [name] for name in NAMES})
    for name in sorted(NAMES):
        logs.stub.add_response("delete_log_group", {}, {"logGroupName": name})
    assert poll(logs) == {"IsComplete": False}
    logs = Logs()
    logs.listing({})
    assert poll(logs) == {"IsComplete": True}


def test_groups_that_never_existed_complete_at_once_and_a_longer_name_survives() -> None:
    logs = Logs()
    # dataplane and host never existed (Amazon Linux 2023 nodes write neither); a group that only starts with
    # the application group's name is someone else's.
    application, performance = NAMES[0], NAMES[3]
    logs.listing({application: [application, f"{application}-archive"], performance: [performance]})
    logs.stub.add_response("delete_log_group", {}, {"logGroupName": application})
    logs.stub.add_response("delete_log_group", {}, {"logGroupName": performance})
    assert poll(logs) == {"IsComplete": False}
    logs = Logs()
    logs.listing({application: [f"{application}-archive"]})
    assert poll(logs) == {"IsComplete": True}


def test_a_group_gone_before_its_delete_is_not_an_error() -> None:
    logs = Logs()
    logs.listing({NAMES[2]: [NAMES[2]]})
    logs.answer_error("delete_log_group", "ResourceNotFoundException", params={"logGroupName": NAMES[2]})
    assert poll(logs) == {"IsComplete": False}
    logs = Logs()
    logs.listing({})
    assert poll(logs) == {"IsComplete": True}


def test_throttling_waits_for_the_next_poll_and_fails_only_at_the_deadline() -> None:
    logs = Logs()
    logs.answer_error("describe_log_groups", "ThrottlingException", params={"logGroupNamePrefix": NAMES[0]})
    assert poll(logs) == {"IsComplete": False}
    late = {**sweep_event(), "Data": {handler.STARTED: str(1000.0 - 3000)}}
    logs = Logs()
    logs.answer_error("describe_log_groups", "ThrottlingException", params={"logGroupNamePrefix": NAMES[0]})
    with logs.stub, pytest.raises(RuntimeError, match="ThrottlingException"):
        handler.is_complete(late, clock=FakeClock(), clients=logs)


def test_access_denied_fails_at_once_with_the_fix() -> None:
    logs = Logs()
    logs.answer_error("describe_log_groups", "AccessDeniedException", params={"logGroupNamePrefix": NAMES[0]})
    with logs.stub, pytest.raises(RuntimeError, match=r"AccessDeniedException.*Grant what is missing"):
        handler.is_complete(sweep_event(), clock=FakeClock(), clients=logs)


def sweep(s: Synthesized) -> tuple[str, dict[str, Any]]:
    found = [(k, v) for k, v in by_type(s.template, "Custom::HyperPodDpdTeardown").items()
             if v["Properties"]["Kind"] == "logs"]
    assert len(found) == 1, found
    return found[0]


def delete_log_group_resources(s: Synthesized) -> list[str]:
    """The sweep's DeleteLogGroup ARNs, rendered as text (the cluster name is a Ref)."""
    policies = [p for k, p in by_type(s.template, "AWS::IAM::Policy").items() if k.startswith("CausedLogGroupsSweep")]
    assert len(policies) == 1, list(policies)
    statements = [st for st in policies[0]["Properties"]["PolicyDocument"]["Statement"]
                  if st["Action"] == "logs:DeleteLogGroup"]
    assert len(statements) == 1, statements
    return [json.dumps(r, sort_keys=True) for r in statements[0]["Resource"]]


def test_a_cluster_the_stack_created_sweeps_exactly_its_four_groups_after_the_addon(default_app: Synthesized) -> None:
    key, resource = sweep(default_app)
    cluster = {"Ref": logical_id(default_app.stack.eks.cluster)}
    names = resource["Properties"]["LogGroupNames"]
    assert [n["Fn::Join"][1][-1] for n in names] == [f"/{kind}" for kind in CONTAINER_INSIGHTS_GROUPS]
    assert all(n["Fn::Join"][1] == ["/aws/containerinsights/", cluster, n["Fn::Join"][1][-1]] for n in names)
    arns = delete_log_group_resources(default_app)
    insights = [json.loads(a)["Fn::Join"][1] for a in arns if "containerinsights" in a]
    # Each ARN is one exact group (and its streams, ``:*``), never a wildcard over the cluster's prefix.
    assert sorted(parts[-1] for parts in insights) == sorted(f"/{kind}:*" for kind in CONTAINER_INSIGHTS_GROUPS)
    assert all(parts[-3:-1] == [":log-group:/aws/containerinsights/", cluster] for parts in insights), insights
    addon = by_addon(default_app.template, "amazon-cloudwatch-observability")
    assert depends_on(default_app.template, addon, key), "the add-on must be deleted before the sweep runs"
    # The group CloudFormation owns (and its metric filters) goes first; the sweep takes what was remade.
    observability = default_app.stack.observability
    assert observability is not None and observability.log_group is not None
    group = logical_id(observability.log_group)
    assert depends_on(default_app.template, group, key)
    for metric_filter in by_type(default_app.template, "AWS::Logs::MetricFilter"):
        assert depends_on(default_app.template, metric_filter, key), metric_filter


def test_an_existing_cluster_never_has_its_container_insights_groups_touched(existing_cluster_app: Synthesized) -> None:
    _, resource = sweep(existing_cluster_app)
    assert "LogGroupNames" not in resource["Properties"]
    assert not [a for a in delete_log_group_resources(existing_cluster_app) if "containerinsights" in a]
