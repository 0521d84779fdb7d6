"""The stack's observability: the add-on and its role, rule groups on the workspace, the topic, the log alarms."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import cdk_nag
import pytest
import yaml
from cdk.cdk_support import (
    REGION,
    Synthesized,
    is_cdk_lambda_role_dependency,
    logical_id,
    policy_statements,
    second_spec,
    synthesize,
    trust_policy,
)
from cdk.cdk_template_queries import by_addon, by_type, depends_on, rendered
from cfnlint.api import lint

from hyperpod_dpd import SpecError
from hyperpod_dpd.observability import rules_yaml
from hyperpod_dpd.observability.alerts import inhibit_rules
from hyperpod_dpd.observability.log_patterns import LOG_PATTERNS
from hyperpod_dpd.observability.slo import BURN_ALERTS
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import HyperPodDpdStack, ObservabilityOptions
from hyperpod_dpd_cdk.observability import (
    COLLECTOR_SERVICE_ACCOUNT,
    CONTAINER_LOGS_ADDON,
    CONTAINER_LOGS_SERVICE_ACCOUNT,
    OBSERVABILITY_ADDON,
    alertmanager_definition,
    option_problems,
    rule_namespace_name,
)

EXISTING_WORKSPACE = "arn:aws:aps:us-west-2:111122223333:workspace/ws-0a1b2c3d-4e5f-6789-abcd-ef0123456789"
GRAFANA_WORKSPACE = "g-0123456789"


@pytest.fixture(scope="module")
def options_app(cdk_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Your AMP workspace, your log group and an AMG workspace to import the dashboards into."""
    app = cdk.App(context=cdk_context, outdir=str(tmp_path_factory.mktemp("observability-options")))
    stack = HyperPodDpdStack(app, "WithOptions", env=cdk.Environment(region=REGION), endpoints=[default_spec()],
                             observability=ObservabilityOptions(
                                 amp_workspace_arn=EXISTING_WORKSPACE, log_group_name="/my/inference/logs",
                                 grafana_workspace_id=GRAFANA_WORKSPACE, efa_metrics=True))
    return synthesize(app, stack)


def _ids(s: Synthesized) -> dict[str, str]:
    """Logical ids of the observability resources (other constructs add keys and topics of their own)."""
    observability = s.stack.observability
    assert observability is not None
    ids = {"topic": logical_id(observability.topic), "key": logical_id(observability.key)}
    if observability.workspace is not None:
        ids["workspace"] = logical_id(observability.workspace)
    return ids


def _addon(s: Synthesized) -> dict[str, Any]:
    resource: dict[str, Any] = s.template["Resources"][by_addon(s.template, OBSERVABILITY_ADDON)]
    return resource


def _configuration(s: Synthesized) -> dict[str, Any]:
    value: dict[str, Any] = rendered(_addon(s)["Properties"]["ConfigurationValues"], placeholder="TOKEN")
    return value


def test_addon_writes_to_the_stacks_workspace_through_pod_identity(default_app: Synthesized) -> None:
    props = _addon(default_app)["Properties"]
    observability = default_app.stack.observability
    assert observability is not None
    assert props["ResolveConflicts"] == "OVERWRITE"
    assert props["PodIdentityAssociations"] == [{"RoleArn": {"Fn::GetAtt": [logical_id(observability.addon_role),
                                                                             "Arn"]},
                                                 "ServiceAccount": COLLECTOR_SERVICE_ACCOUNT}]
    workspace_id = _ids(default_app)["workspace"]
    parts = props["ConfigurationValues"]["Fn::Join"][1]
    assert {"Fn::GetAtt": [workspace_id, "Arn"]} in parts and {"Fn::GetAtt": [workspace_id, "WorkspaceId"]} in parts
    config = _configuration(default_app)
    assert config["ampWorkspace"]["prometheusEndpoint"].startswith(f"https://aps-workspaces.{REGION}.")
    assert config["metricsProvider"]["inferenceMetrics"]["level"] == "BASIC"
    assert config["metricsProvider"]["networkMetrics"]["level"] == "DISABLED"
    # The shape of AWS's current template and Terraform: logging at the top level, customMetrics, no rayMetrics.
    assert config["logging"] == {"enabled": True}
    assert set(config["metricsProvider"]) == {"trainingMetrics", "inferenceMetrics", "taskGovernanceMetrics",
                                              "scalingMetrics", "customMetrics", "nodeMetrics",
                                              "acceleratedComputeMetrics", "networkMetrics"}


def test_addon_comes_after_the_hyperpod_cluster_and_the_pod_identity_agent(default_app: Synthesized) -> None:
    template = default_app.template
    addon = by_addon(template, OBSERVABILITY_ADDON)
    hyperpod_id, _ = default_app.one("AWS::SageMaker::Cluster")
    assert depends_on(template, addon, hyperpod_id)
    assert depends_on(template, addon, by_addon(template, "eks-pod-identity-agent"))


def test_addon_role_trusts_only_pod_identity_for_this_cluster(default_app: Synthesized) -> None:
    observability = default_app.stack.observability
    assert observability is not None
    (statement,) = trust_policy(default_app, observability.addon_role)["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(statement["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    eks_id = logical_id(default_app.stack.eks.cluster)
    assert statement["Condition"]["ArnEquals"] == {"aws:SourceArn": {"Fn::GetAtt": [eks_id, "Arn"]}}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


def test_addon_role_is_least_privilege(default_app: Synthesized) -> None:
    observability = default_app.stack.observability
    assert observability is not None
    statements = policy_statements(default_app, observability.addon_role)
    workspace_id = _ids(default_app)["workspace"]
    remote_write = [s for s in statements if s["Action"] == "aps:RemoteWrite"]
    assert remote_write == [{"Action": "aps:RemoteWrite", "Effect": "Allow",
                             "Resource": {"Fn::GetAtt": [workspace_id, "Arn"]}}]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert all(a.startswith(("aps:RemoteWrite", "logs:")) for a in actions)
    (logs,) = [s for s in statements if "logs:PutLogEvents" in s["Action"]]
    text = json.dumps(logs["Resource"])
    cluster_name = default_app.stack.hyperpod.cluster_name
    assert f"log-group:/aws/sagemaker/Clusters/{cluster_name}/*" in text
    (describe,) = [s for s in statements if s["Resource"] == "*"]
    assert describe["Action"] == "logs:DescribeLogGroups"


def test_one_rule_group_per_endpoint_with_the_rendered_rules(multi_app: Synthesized) -> None:
    groups = by_type(multi_app.template, "AWS::APS::RuleGroupsNamespace")
    workspace_id = _ids(multi_app)["workspace"]
    by_name = {g["Properties"]["Name"]: g["Properties"] for g in groups.values()}
    specs = {f"dpd_{s.namespace}_{s.name}": s for s in multi_app.stack.endpoint_specs}
    assert set(by_name) == set(specs)
    for name, props in by_name.items():
        assert props["Workspace"] == {"Fn::GetAtt": [workspace_id, "Arn"]}
        assert props["Data"] == rules_yaml(specs[name])


def test_alertmanager_routes_every_alert_to_the_topic(default_app: Synthesized) -> None:
    ids = _ids(default_app)
    workspace, topic_id = default_app.template["Resources"][ids["workspace"]], ids["topic"]
    separator, parts = workspace["Properties"]["AlertManagerDefinition"]["Fn::Join"]
    assert {"Ref": topic_id} in parts
    text = separator.join(p if isinstance(p, str) else "arn:aws:sns:us-west-2:111122223333:topic" for p in parts)
    config = yaml.safe_load(yaml.safe_load(text)["alertmanager_config"])
    assert config["route"]["receiver"] == "sns"
    (receiver,) = config["receivers"]
    (sns,) = receiver["sns_configs"]
    assert sns["topic_arn"] == "arn:aws:sns:us-west-2:111122223333:topic"
    assert sns["sigv4"] == {"region": REGION}
    assert config["inhibit_rules"] == inhibit_rules()
    assert workspace["DeletionPolicy"] == "Retain"


def test_topic_is_encrypted_tls_only_and_publishable_only_by_amp_and_alarms(default_app: Synthesized) -> None:
    ids = _ids(default_app)
    resources = default_app.template["Resources"]
    topic, key = resources[ids["topic"]], resources[ids["key"]]
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [ids["key"], "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    (policy,) = [p for p in by_type(default_app.template, "AWS::SNS::TopicPolicy").values()
                 if p["Properties"]["Topics"] == [{"Ref": ids["topic"]}]]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert sorted(s["Principal"]["Service"] for s in allows) == ["aps.amazonaws.com", "cloudwatch.amazonaws.com"]
    for statement in allows:
        assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        assert "aws:SourceArn" in statement["Condition"]["ArnLike"]
    key_principals = {json.dumps(s["Principal"]) for s in key["Properties"]["KeyPolicy"]["Statement"]}
    assert any("aps.amazonaws.com" in p for p in key_principals)
    assert any("cloudwatch.amazonaws.com" in p for p in key_principals)


def test_log_filters_watch_the_group_container_insights_ships_pod_output_to(default_app: Synthesized) -> None:
    """Audit O2: the filters watch the documented group for container stdout, which the stack creates."""
    template = default_app.template
    observability = default_app.stack.observability
    assert observability is not None and observability.log_group is not None
    group_id = logical_id(observability.log_group)
    group = template["Resources"][group_id]
    name = group["Properties"]["LogGroupName"]
    text = name if isinstance(name, str) else "".join(p if isinstance(p, str) else "EKS" for p in name["Fn::Join"][1])
    assert text.startswith("/aws/containerinsights/") and text.endswith("/application")
    filters = by_type(template, "AWS::Logs::MetricFilter")
    patterns = sorted(f["Properties"]["FilterPattern"] for f in filters.values())
    assert patterns == sorted(["", *(p.endpoint_pattern(default_spec()) for p in LOG_PATTERNS)])
    for metric_filter in filters.values():
        assert metric_filter["Properties"]["LogGroupName"] == {"Ref": group_id}


def test_log_alarms_are_per_endpoint_and_role_pod(multi_app: Synthesized) -> None:
    """T4-13: each endpoint's filters select its namespace, its role's container and pods; its alarm reads only
    its own metric, so a neighbour's PD buffer filling up pages nobody about ours."""
    template = multi_app.template
    filters = [f["Properties"] for f in by_type(template, "AWS::Logs::MetricFilter").values()
               if f["Properties"]["FilterPattern"]]
    endpoints = [default_spec(), second_spec()]
    assert len(filters) == len(LOG_PATTERNS) * len(endpoints)
    by_metric = {f["MetricTransformations"][0]["MetricName"]: f["FilterPattern"] for f in filters}
    for spec in endpoints:
        for pattern in LOG_PATTERNS:
            text = by_metric[f"{pattern.metric_name}/{spec.namespace}/{spec.name}"]
            container = f"{pattern.role}-{spec.name}"
            assert f'($.kubernetes.namespace_name = "{spec.namespace}")' in text
            assert f'($.kubernetes.container_name = "{container}")' in text
            assert f'($.kubernetes.pod_name = "{container}-*")' in text
    alarms = [a["Properties"] for a in by_type(template, "AWS::CloudWatch::Alarm").values()
              if a["Properties"]["MetricName"].startswith("PdBufferFull/")]
    assert sorted(a["MetricName"] for a in alarms) == ["PdBufferFull/default/dpd-test",
                                                      "PdBufferFull/inference/qwen-dpd"]
    assert all(a["AlarmDescription"].startswith("[warning] ") and "(decode pods)" in a["AlarmDescription"]
               for a in alarms)
    # LMCache retries every 10 ms: a page needs a chunk stuck a second in each of 2 of 3 minutes.
    assert {(a["Threshold"], a["DatapointsToAlarm"], a["EvaluationPeriods"]) for a in alarms} == {(100, 2, 3)}


def test_a_log_group_of_unknown_format_keeps_one_group_wide_set(options_app: Synthesized) -> None:
    """Your own group's events need not be Container Insights' JSON: its filters match the lines' terms alone."""
    patterns = sorted(f["Properties"]["FilterPattern"]
                      for f in by_type(options_app.template, "AWS::Logs::MetricFilter").values())
    assert patterns == sorted(["", *(p.filter_pattern for p in LOG_PATTERNS)])


def test_container_logs_addon_ships_through_pod_identity(default_app: Synthesized) -> None:
    template = default_app.template
    addon_id = by_addon(template, CONTAINER_LOGS_ADDON)
    props = template["Resources"][addon_id]["Properties"]
    (association,) = props["PodIdentityAssociations"]
    assert association["ServiceAccount"] == CONTAINER_LOGS_SERVICE_ACCOUNT
    # Logs on; Application Signals' auto-instrumentation, its agent pipelines and the accelerated compute
    # metrics off, with the keys of AWS's add-on page (container_logs_configuration).
    assert rendered(props["ConfigurationValues"], placeholder="TOKEN") == {
        "containerLogs": {"enabled": True},
        "manager": {"applicationSignals": {"autoMonitor": {"monitorAllServices": False}}},
        "agent": {"config": {"logs": {"metrics_collected": {"kubernetes": {
            "enhanced_container_insights": True, "accelerated_compute_metrics": False}}}}}}
    role = template["Resources"][association["RoleArn"]["Fn::GetAtt"][0]]
    assert "CloudWatchAgentServerPolicy" in json.dumps(role["Properties"]["ManagedPolicyArns"])
    hyperpod_id, _ = default_app.one("AWS::SageMaker::Cluster")
    assert depends_on(template, addon_id, hyperpod_id)
    # Deleted before its log group, so Fluent Bit's last flush cannot recreate the group without retention.
    (group_id,) = [k for k, v in by_type(template, "AWS::Logs::LogGroup").items()
                   if "/aws/containerinsights/" in json.dumps(v["Properties"].get("LogGroupName"))]
    assert depends_on(template, addon_id, group_id)


def test_each_log_pattern_has_an_alarm_to_the_topic(default_app: Synthesized) -> None:
    topic_id = _ids(default_app)["topic"]
    alarms = {a["Properties"]["MetricName"]: a["Properties"]
              for a in by_type(default_app.template, "AWS::CloudWatch::Alarm").values()}
    for pattern in LOG_PATTERNS:
        alarm = alarms[f"{pattern.metric_name}/default/dpd-test"]
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["Namespace"] == f"HyperPodDPD/{default_app.stack.hyperpod.cluster_name}"
        assert (alarm["Threshold"], alarm["DatapointsToAlarm"], alarm["EvaluationPeriods"]) == (
            pattern.threshold, pattern.datapoints, pattern.periods)
        assert alarm["TreatMissingData"] == "missing", "no data is not health"
        assert "Fix: " in alarm["AlarmDescription"]
    silent = alarms["LogLines"]
    assert (silent["ComparisonOperator"], silent["Threshold"], silent["TreatMissingData"]) == (
        "LessThanThreshold", 1, "breaching")
    assert silent["AlarmActions"] == [{"Ref": topic_id}]


def test_outputs_tell_how_to_subscribe(default_app: Synthesized) -> None:
    outputs = default_app.template["Outputs"]
    (command,) = [o for k, o in outputs.items() if k.startswith("ObservabilitySubscribeCommand")]
    topic_id = _ids(default_app)["topic"]
    _, parts = command["Value"]["Fn::Join"]
    assert parts[0].startswith("aws sns subscribe --region us-west-2 --topic-arn ")
    assert {"Ref": topic_id} in parts


def test_existing_workspace_gets_the_rules_and_keeps_its_alertmanager(options_app: Synthesized) -> None:
    assert by_type(options_app.template, "AWS::APS::Workspace") == {}
    (group,) = by_type(options_app.template, "AWS::APS::RuleGroupsNamespace").values()
    assert group["Properties"]["Workspace"] == EXISTING_WORKSPACE
    config = _configuration(options_app)
    assert config["ampWorkspace"]["arn"] == EXISTING_WORKSPACE
    assert config["ampWorkspace"]["prometheusEndpoint"].endswith("/workspaces/ws-0a1b2c3d-4e5f-6789-abcd-ef0123456789")
    assert config["metricsProvider"]["networkMetrics"]["level"] == "ADVANCED"


def test_a_given_log_group_is_used_after_the_cluster_exists(options_app: Synthesized) -> None:
    hyperpod_id, _ = options_app.one("AWS::SageMaker::Cluster")
    for name, metric_filter in by_type(options_app.template, "AWS::Logs::MetricFilter").items():
        assert metric_filter["Properties"]["LogGroupName"] == "/my/inference/logs"
        assert depends_on(options_app.template, name, hyperpod_id)


def test_grafana_import_carries_every_dashboard(options_app: Synthesized) -> None:
    (resource,) = by_type(options_app.template, "Custom::GrafanaDashboards").values()
    assert resource["Properties"]["WorkspaceId"] == GRAFANA_WORKSPACE
    (dashboard,) = json.loads(resource["Properties"]["Dashboards"])
    assert dashboard["uid"] == "hyperpod-dpd-default-dpd-test"
    observability = options_app.stack.observability
    assert observability is not None and observability.grafana is not None
    function = options_app.template["Resources"][logical_id(observability.grafana.function)]
    assert function["Properties"]["Handler"] == "index.on_event"
    grafana = [s for p in by_type(options_app.template, "AWS::IAM::Policy").values()
               for s in p["Properties"]["PolicyDocument"]["Statement"]
               if any(str(a).startswith("grafana:") for a in ([s["Action"]] if isinstance(s["Action"], str)
                                                              else s["Action"]))]
    (statement,) = grafana
    assert f"/workspaces/{GRAFANA_WORKSPACE}" in json.dumps(statement["Resource"])


@pytest.mark.slow  # more than about 5 s on a quiet 2-core machine (make test-fast leaves it out)
def test_options_stack_passes_cfn_lint_and_cdk_nag(options_app: Synthesized) -> None:
    # The same accepted-warning filter test_checks.py applies to the other apps.
    template = options_app.template
    remaining = [m for m in lint(json.dumps(template), regions=[REGION])
                 if not is_cdk_lambda_role_dependency(template, m)]
    assert [f"{m.rule.id} {m.message}" for m in remaining] == []
    report = cdk_nag.AwsSolutionsChecks().validate_scope(options_app.app)
    assert {v.rule_name: [r.construct_path for r in v.violating_resources] for v in report.violations} == {}


def test_observability_can_be_left_out(app_module: ModuleType, cdk_context: dict[str, Any],
                                       tmp_path: Path) -> None:
    app, stack = app_module.build({**cdk_context, "observability": "false"}, outdir=str(tmp_path))
    assert stack.observability is None
    template = synthesize(app, stack).template
    for type_ in ("AWS::APS::Workspace", "AWS::APS::RuleGroupsNamespace", "AWS::SNS::Topic",
                  "AWS::Logs::MetricFilter"):
        assert by_type(template, type_) == {}
    assert not [k for k, v in by_type(template, "AWS::EKS::Addon").items()
                if v["Properties"]["AddonName"] == OBSERVABILITY_ADDON]


def test_a_bad_switch_is_refused_before_anything_is_built(app_module: ModuleType,
                                                          cdk_context: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match=r"observability: is not true or false \(got 'maybe'\)"):
        app_module.build({**cdk_context, "observability": "maybe"})


@pytest.mark.parametrize(("options", "field"), [
    (ObservabilityOptions(amp_workspace_arn="ws-123"), "observability.amp_workspace_arn"),
    (ObservabilityOptions(log_group_name="bad name!"), "observability.log_group_name"),
    (ObservabilityOptions(grafana_workspace_id="my-grafana"), "observability.grafana_workspace_id"),
])
def test_bad_options_name_the_field(options: ObservabilityOptions, field: str) -> None:
    (problem,) = option_problems(options)
    assert problem.field == field
    assert problem.fix


def test_app_writes_rules_and_dashboards_beside_the_manifests(app_module: ModuleType, default_app: Synthesized,
                                                             tmp_path: Path) -> None:
    written = app_module.write_observability_files(default_app.stack, tmp_path)
    assert [p.name for p in written] == ["default-dpd-test.rules.yaml", "default-dpd-test.dashboard.json"]
    assert all(p.parent == tmp_path / "observability" for p in written)


AMTOOL = shutil.which("amtool")


@pytest.mark.skipif(AMTOOL is None, reason="amtool is missing: apt-get install prometheus-alertmanager")
def test_alertmanager_definition_passes_amtool(tmp_path: Path) -> None:
    """Alertmanager's own checker accepts the route, the SNS receiver and the inhibit rules, and rejects
    a broken inhibit matcher (so the check can fail)."""
    assert AMTOOL is not None
    definition = yaml.safe_load(alertmanager_definition("arn:aws:sns:us-west-2:111122223333:dpd", REGION))
    good = tmp_path / "good.yml"
    good.write_text(definition["alertmanager_config"])
    result = subprocess.run([AMTOOL, "check-config", str(good)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    # The two input-absent inhibitions, and each burn-rate page silencing its ticket.
    assert len(inhibit_rules()) == 2 + len(BURN_ALERTS)
    assert f"{len(inhibit_rules())} inhibit rules" in result.stdout and "1 receivers" in result.stdout
    assert {"source_matchers": ['alertname="DpdErrorBudgetBurnFast"'],
            "target_matchers": ['alertname=~"DpdErrorBudgetBurnSlow"'],
            "equal": ["dpd_namespace", "dpd_endpoint", "resource_name"]} in inhibit_rules()
    bad = tmp_path / "bad.yml"
    bad.write_text(definition["alertmanager_config"].replace('alertname="DpdNoReadyPod"', 'alertname=="x'))
    assert subprocess.run([AMTOOL, "check-config", str(bad)], capture_output=True, text=True, timeout=60,
                          check=False).returncode != 0


def test_every_alarm_tells_the_topic_when_it_clears(default_app: Synthesized) -> None:
    """An alarm without an OK action leaves its page open after the fault clears."""
    alarms = [a["Properties"] for a in by_type(default_app.template, "AWS::CloudWatch::Alarm").values()]
    assert len(alarms) == 4  # three log patterns and LogsNotArriving
    for alarm in alarms:
        assert alarm.get("OKActions") == alarm["AlarmActions"] and len(alarm["AlarmActions"]) == 1, alarm["MetricName"]


def test_rule_namespaces_of_look_alike_endpoints_differ() -> None:
    """O11: the AMP rule groups namespace of (team-a, dpd) is not (team, a-dpd)'s, even shortened to 64."""
    spec = default_spec()
    pairs = [(("team-a", "dpd"), ("team", "a-dpd")), (("t" * 40 + "-a", "d" * 30), ("t" * 40, "a-" + "d" * 30))]
    for (ns1, name1), (ns2, name2) in pairs:
        first = rule_namespace_name(dataclasses.replace(spec, namespace=ns1, name=name1))
        second = rule_namespace_name(dataclasses.replace(spec, namespace=ns2, name=name2))
        assert first != second and len(first) <= 64 and len(second) <= 64
