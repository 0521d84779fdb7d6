"""DPD observability: the HyperPod observability add-on writing to AMP, the DPD alert rules, log alarms, one topic.

What ``cdk deploy`` yields, with no manual step other than subscribing to the topic:

* the ``amazon-sagemaker-hyperpod-observability`` EKS add-on (after the HyperPod cluster, as AWS's
  templates install it), its pod-identity role limited to remote-writing into the workspace and to
  this HyperPod cluster's log groups;
* an Amazon Managed Service for Prometheus workspace (or yours), with one rule groups namespace per
  endpoint rendered by :mod:`hyperpod_dpd.observability.alerts`;
* on a workspace the stack creates, an Alertmanager definition routing every alert to an SNS topic
  the stack owns (KMS-encrypted, TLS-only, publishable only by this workspace and this account's
  CloudWatch alarms). A workspace you pass keeps its own Alertmanager routing: AMP holds one
  definition per workspace, and replacing it would drop yours;
* CloudWatch Logs metric filters and alarms for the failures only logs show, alarming to the same
  topic, on the log group where the pods' output is documented to land: the
  ``amazon-cloudwatch-observability`` add-on's Fluent Bit ships every container's stdout to
  ``/aws/containerinsights/<eks cluster>/application`` (CloudWatch Container Insights docs). No AWS
  page says the HyperPod add-on's logging carries pod stdout. A ``LogsNotArriving`` alarm breaches
  when the group receives nothing, and the failure alarms read missing data as missing, never as OK;
* when you name an Amazon Managed Grafana workspace, the per-endpoint DPD dashboards in it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import yaml
from aws_cdk import Arn, ArnFormat, Aws, CfnOutput, Duration, Fn, RemovalPolicy, Stack, Token
from aws_cdk import aws_aps as aps
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct, IConstruct

from hyperpod_dpd import DpdSpec, Problem
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd.observability.alerts import alert_rules, inhibit_rules, rule_group_name, rules_yaml
from hyperpod_dpd.observability.log_patterns import LOG_PATTERNS, METRIC_NAMESPACE, LogPattern
from hyperpod_dpd_cdk._private.nag import acknowledge, pseudo
from hyperpod_dpd_cdk.grafana_dashboards import GrafanaDashboards, workspace_problems
from hyperpod_dpd_cdk.ownership import ClusterOwnership
from hyperpod_dpd_cdk.versions import CONTAINER_LOGS_ADDON_VERSION, OBSERVABILITY_ADDON_VERSION

OBSERVABILITY_ADDON = "amazon-sagemaker-hyperpod-observability"
# The add-on's OTel collector runs as this service account; the pod identity association names it
# (AWS's observability CloudFormation template and troubleshooting page).
COLLECTOR_SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
# The add-on ships logs under this prefix (the log actions AWS's template grants it are scoped there),
# and HyperPod writes each cluster's logs to <prefix><cluster name>/<cluster id>.
CLUSTER_LOG_PREFIX = "/aws/sagemaker/Clusters/"
# Container Insights: the add-on, its agent's service account (in namespace amazon-cloudwatch), the
# managed policy AWS's setup guide attaches, and the group its Fluent Bit writes container logs to.
CONTAINER_LOGS_ADDON = "amazon-cloudwatch-observability"
CONTAINER_LOGS_SERVICE_ACCOUNT = "cloudwatch-agent"
CONTAINER_LOGS_POLICY = "CloudWatchAgentServerPolicy"
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
# An hour without one log line in the group means the alarms are blind, not that all is well.
SILENT_LOG_PERIODS = 4
SILENT_LOG_PERIOD = Duration.minutes(15)


# The log groups the add-on's agents create under /aws/containerinsights/<cluster>/, outside CloudFormation:
# Fluent Bit's three outputs (aws-observability/helm-charts charts/amazon-cloudwatch-observability/values.yaml,
# containerLogs.fluentBit.config.extraFiles application-log.conf, dataplane-log.conf, host-log.conf, each
# ``log_group_name /aws/containerinsights/${CLUSTER_NAME}/<kind>`` with ``auto_create_group true``) and the
# CloudWatch agent's Container Insights performance events (CloudWatch User Guide, "Container Insights
# performance log events": /aws/containerinsights/<cluster>/performance).
CONTAINER_INSIGHTS_GROUPS = ("application", "dataplane", "host", "performance")


def container_log_group(eks_cluster_name: str, kind: str = "application") -> str:
    """Where Container Insights' Fluent Bit puts every container's stdout and stderr (or ``kind``'s lines)."""
    return f"/aws/containerinsights/{eks_cluster_name}/{kind}"


def container_insights_log_groups(eks_cluster_name: str) -> list[str]:
    """Every group the add-on's agents create for this cluster, by exact name."""
    return [container_log_group(eks_cluster_name, kind) for kind in CONTAINER_INSIGHTS_GROUPS]
SCRAPE_INTERVAL_SECONDS = 30
AMP_WORKSPACE_ARN = re.compile(r"^arn:aws[a-z-]*:aps:[a-z0-9-]+:[0-9]{12}:workspace/ws-[a-zA-Z0-9-]+$")
MAX_RULE_NAMESPACE = 64  # AWS::APS::RuleGroupsNamespace Name


def hyperpod_log_group_name(hyperpod_cluster_name: str, hyperpod_cluster_arn: str) -> str:
    """``/aws/sagemaker/Clusters/<name>/<id>``, the id being the last part of the cluster's ARN."""
    return f"{CLUSTER_LOG_PREFIX}{hyperpod_cluster_name}/{Fn.select(1, Fn.split('/', hyperpod_cluster_arn))}"


@dataclass(frozen=True, kw_only=True)
class ObservabilityOptions:
    """How the stack observes its endpoints.

    :param amp_workspace_arn: an existing AMP workspace to write metrics and rules into; its
        Alertmanager routing stays yours. :default: - a new workspace routing alerts to the stack's topic
    :param addon_version: :default: - ``OBSERVABILITY_ADDON_VERSION`` (versions.py)
    :param efa_metrics: the add-on's EFA (network) metrics, ``ADVANCED`` level; off in AWS's defaults.
        :default: False
    :param container_logs: install the ``amazon-cloudwatch-observability`` add-on so that the pods'
        output reaches ``/aws/containerinsights/<eks cluster>/application`` (which the stack creates) and the
        log alarms watch it. :default: True
    :param log_group_name: where the inference pods' output lands, when you ship it yourself.
        :default: - the Container Insights application group with ``container_logs``, else the HyperPod
        cluster's log group ``/aws/sagemaker/Clusters/<name>/<id>`` (no AWS page says pod output lands there)
    :param grafana_workspace_id: an Amazon Managed Grafana workspace to import the DPD dashboards into
        (AMG needs IAM Identity Center, which a stack cannot set up). :default: - none; the dashboards
        are only written beside the manifests
    :param install_addon: create the observability add-on; ``False`` when the cluster runs it already
        (``CreateAddon`` fails on an existing add-on). The collector role is still created, for you to
        associate with the running add-on. :default: True
    """

    amp_workspace_arn: str | None = None
    addon_version: str | None = OBSERVABILITY_ADDON_VERSION
    efa_metrics: bool = False
    container_logs: bool = True
    log_group_name: str | None = None
    grafana_workspace_id: str | None = None
    install_addon: bool = True


def option_problems(options: ObservabilityOptions) -> list[Problem]:
    """Problems with the options, each naming the field and the fix."""
    problems = []
    arn = options.amp_workspace_arn
    if arn is not None and not Token.is_unresolved(arn) and not AMP_WORKSPACE_ARN.fullmatch(arn):
        problems.append(Problem(field="observability.amp_workspace_arn", value=arn,
                                message="is not an Amazon Managed Service for Prometheus workspace ARN",
                                fix="use arn:aws:aps:<region>:<account>:workspace/ws-..."))
    name = options.log_group_name
    if name is not None and not Token.is_unresolved(name) and not re.match(r"^[.\-_/#A-Za-z0-9]{1,512}$", name):
        problems.append(Problem(field="observability.log_group_name", value=name,
                                message="is not a CloudWatch Logs log group name",
                                fix="use letters, digits and . - _ / # only, e.g. /aws/sagemaker/Clusters/NAME/ID"))
    if options.grafana_workspace_id is not None:
        problems += workspace_problems(options.grafana_workspace_id)
    return problems


def rule_namespace_name(spec: DpdSpec) -> str:
    """The rule group's name, shortened with a hash to AMP's 64 characters when needed."""
    name = rule_group_name(spec)
    if len(name) <= MAX_RULE_NAMESPACE:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:MAX_RULE_NAMESPACE - 9]}-{digest}"


def addon_configuration(*, prometheus_endpoint: str, workspace_arn: str, efa_metrics: bool) -> dict[str, object]:
    """The add-on's ``configurationValues``, in the shape AWS's current templates send.

    AWS's sources disagree on three keys. An older ``observability-template.yaml`` of
    aws/sagemaker-hyperpod-cluster-setup (0ab564d7) nests ``clusterMetrics``, ``rayMetrics`` and ``logging``
    inside ``metricsProvider``. The same file at 12abe330 (``EksAddOnWithoutAmgWithLogging``) and AWS's
    Terraform (awsome-distributed-training ``hyperpod-eks-tf/modules/observability/eks_addon.tf``) send
    ``customMetrics`` in its place, no ``rayMetrics``, and ``logging`` at the top level. The second shape
    wins: it is the one both of AWS's maintained deployers send today. EKS checks the values against the
    add-on version's schema (``aws eks describe-addon-configuration``), so a wrong key fails ``CreateAddon``.
    """
    def level(value: str) -> dict[str, object]:
        return {"level": value, "scrapeInterval": SCRAPE_INTERVAL_SECONDS}

    return {
        "ampWorkspace": {"prometheusEndpoint": prometheus_endpoint, "arn": workspace_arn},
        "metricsProvider": {
            "trainingMetrics": level("BASIC"),
            "inferenceMetrics": level("BASIC"),
            "taskGovernanceMetrics": level("DISABLED"),
            "scalingMetrics": level("DISABLED"),
            "customMetrics": level("BASIC"),
            "nodeMetrics": level("BASIC"),
            "acceleratedComputeMetrics": level("BASIC"),
            "networkMetrics": level("ADVANCED" if efa_metrics else "DISABLED"),
        },
        "logging": {"enabled": True},
    }


def container_logs_configuration() -> dict[str, object]:
    """The ``amazon-cloudwatch-observability`` add-on's ``configurationValues``: container logs on, and off
    what the stack does not use, each with the key AWS documents for it (CloudWatch User Guide, "Install the
    CloudWatch agent with the Amazon CloudWatch Observability EKS add-on or the Helm chart"):

    * ``containerLogs.enabled`` ("Opt out of collecting container logs" shows the key): Fluent Bit is what
      the log alarms read.
    * ``manager.applicationSignals.autoMonitor.monitorAllServices: false`` ("Enabling APM through Application
      Signals for your Amazon EKS cluster", Auto monitor, from add-on 5.0.0, defaults to true; "Opt out of
      Application Signals" gives the same key): otherwise the add-on's manager injects Application Signals
      instrumentation into every workload behind a Service when its pods start, the model pods (Python)
      included, and each request is billed.
    * ``agent.config``: a custom agent configuration replaces the default ("Use a custom CloudWatch agent
      configuration" gives the default: ``application_signals`` under logs and traces, plus
      ``kubernetes.enhanced_container_insights``). This one keeps only Container Insights, as the page's
      "Considerations for large Kubernetes clusters" configures an agent that must not run Application
      Signals, and sets ``accelerated_compute_metrics: false`` ("Opt out of accelerated compute metrics
      collection"): the HyperPod observability add-on collects the GPU and EFA metrics already.

    Container Insights' own metrics stay on (and billed): no AWS page shows an agent configuration without
    them that the add-on accepts (docs/limits.md)."""
    return {
        "containerLogs": {"enabled": True},
        "manager": {"applicationSignals": {"autoMonitor": {"monitorAllServices": False}}},
        "agent": {"config": {"logs": {"metrics_collected": {"kubernetes": {
            "enhanced_container_insights": True, "accelerated_compute_metrics": False}}}}},
    }


def alertmanager_definition(topic_arn: str, region: str) -> str:
    """AMP's Alertmanager definition: every alert to the topic, grouped per endpoint and alert.

    Inhibitions keep an alert whose input is missing from paging as the failure it would misread.
    """
    inhibit = yaml.safe_dump({"inhibit_rules": inhibit_rules()}, sort_keys=False, width=10_000)
    return "\n".join([
        "alertmanager_config: |",
        "  route:",
        "    receiver: sns",
        "    group_by: [alertname, dpd_namespace, dpd_endpoint]",
        "    group_wait: 30s",
        "    group_interval: 5m",
        "    repeat_interval: 4h",
        "  receivers:",
        "    - name: sns",
        "      sns_configs:",
        f"        - topic_arn: {topic_arn}",
        "          sigv4:",
        f"            region: {region}",
        "          subject: 'DPD alert: {{ .CommonLabels.alertname }} on {{ .CommonLabels.dpd_namespace }}/"
        "{{ .CommonLabels.dpd_endpoint }}'",
        "          attributes:",
        "            severity: '{{ .CommonLabels.severity }}'",
        *(f"  {line}" for line in inhibit.splitlines()),
        "",
    ])


def _source(arn: str) -> dict[str, object]:
    """Confused-deputy guard: the service acts for this account and this source only."""
    return {"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}, "ArnLike": {"aws:SourceArn": arn}}


class DpdObservability(Construct):
    """Metrics, DPD alert rules, log alarms and one notification topic for the stack's endpoints.

    Call :meth:`after` with the HyperPod cluster (and the Pod Identity Agent add-on): the add-on needs
    nodes, and the metric filters need the cluster's log group.

    :param cluster_name: the EKS cluster. :param cluster_arn: its ARN (the pod identity trust is bound to it).
    :param hyperpod_cluster_name: :param hyperpod_cluster_arn: the HyperPod cluster, whose log group holds
        the inference pods' output.
    :param endpoints: the specs whose alert rules to install.
    :param options: :default: ``ObservabilityOptions()``
    :param ownership: what the stack may change on the cluster (``ClusterOwnership``). :default: - a cluster the
        stack created
    """

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, cluster_arn: str, hyperpod_cluster_name: str,
                 hyperpod_cluster_arn: str, endpoints: Sequence[DpdSpec],
                 options: ObservabilityOptions | None = None, ownership: ClusterOwnership | None = None) -> None:
        super().__init__(scope, id)
        options = options or ObservabilityOptions()
        self._ownership = ownership or ClusterOwnership.of_stack(self)
        raise_if_any(option_problems(options))
        stack = Stack.of(self)
        self.key = kms.Key(self, "TopicKey", enable_key_rotation=True, removal_policy=RemovalPolicy.DESTROY,
                           description="DPD alert topic: AMP Alertmanager and CloudWatch alarms encrypt with it")
        self.topic = sns.Topic(self, "AlertTopic", display_name="DPD alerts", master_key=self.key, enforce_ssl=True)

        self.workspace: aps.CfnWorkspace | None = None
        if options.amp_workspace_arn is None:
            self.workspace = aps.CfnWorkspace(
                self, "Workspace", alias=f"{stack.stack_name}-dpd",
                alert_manager_definition=alertmanager_definition(self.topic.topic_arn, stack.region))
            # AWS's template retains the workspace: metrics history outlives the stack.
            self.workspace.apply_removal_policy(RemovalPolicy.RETAIN)
            self.workspace_arn = self.workspace.attr_arn
            self.workspace_id = self.workspace.attr_workspace_id
        else:
            self.workspace_arn = options.amp_workspace_arn
            self.workspace_id = Arn.split(options.amp_workspace_arn, ArnFormat.SLASH_RESOURCE_NAME).resource_name or ""
        self.prometheus_endpoint = f"https://aps-workspaces.{stack.region}.{Aws.URL_SUFFIX}/workspaces/{self.workspace_id}"
        self._allow_publishers()

        self.addon_role = self._addon_role(cluster_arn, hyperpod_cluster_name)
        self.addon: eks_l1.CfnAddon | None = None
        if options.install_addon:
            self.addon = self._ownership.addon(
                self, "Addon", addon_name=OBSERVABILITY_ADDON, cluster_name=cluster_name,
                addon_version=options.addon_version,
                pod_identity_associations=[eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.addon_role.role_arn, service_account=COLLECTOR_SERVICE_ACCOUNT)],
                configuration_values=stack.to_json_string(addon_configuration(
                    prometheus_endpoint=self.prometheus_endpoint, workspace_arn=self.workspace_arn,
                    efa_metrics=options.efa_metrics)))
            # The role is referenced already; its inline policy must exist before the collector writes.
            self.addon.node.add_dependency(self.addon_role.node.find_child("DefaultPolicy"))

        # by "<namespace>/<name>": two endpoints of one name in two namespaces each keep theirs
        self.rule_groups: dict[str, aps.CfnRuleGroupsNamespace] = {}
        for spec in endpoints:
            self._rule_group(spec)

        self.container_logs: eks_l1.CfnAddon | None = None
        self.log_group: logs.LogGroup | None = None
        # The default HyperPod name references the cluster already; other names need the explicit order.
        self._filters_follow = options.log_group_name is not None
        if options.log_group_name is not None:
            self.log_group_name = options.log_group_name
        elif options.container_logs:
            self.container_logs = self._container_logs_addon(cluster_name, cluster_arn)
            # Fluent Bit creates the group on its first line; the filters need it at deploy time (their
            # reference to it orders them after it).
            self.log_group = logs.LogGroup(self, "ContainerLogs", log_group_name=container_log_group(cluster_name),
                                           retention=LOG_RETENTION, removal_policy=RemovalPolicy.DESTROY)
            # Created after the group and deleted before it: Fluent Bit's last flush on delete cannot recreate
            # the group (without retention) once CloudFormation has deleted it.
            self.container_logs.node.add_dependency(self.log_group)
            self.log_group_name = self.log_group.log_group_name
            self._filters_follow = True
        else:
            self.log_group_name = hyperpod_log_group_name(hyperpod_cluster_name, hyperpod_cluster_arn)
        # One namespace per HyperPod cluster, so two stacks in an account do not add up each other's lines.
        self.metric_namespace = f"{METRIC_NAMESPACE}/{hyperpod_cluster_name}"
        self.metric_filters: list[logs.CfnMetricFilter] = []
        self.log_alarms: list[cloudwatch.Alarm] = []
        self._follows: tuple[IConstruct, ...] = ()  # what after() ordered the filters behind
        # Container Insights' events are JSON with the pod in them: one alarm set per endpoint there. A group
        # of unknown format (yours, or HyperPod's fallback) gets one group-wide set on the lines alone.
        self._per_endpoint_logs = self.log_group is not None
        for spec in endpoints if self._per_endpoint_logs else ():
            self._log_alarms(spec)
        for pattern in () if self._per_endpoint_logs else LOG_PATTERNS:
            self._log_alarm(None, pattern)
        self._silence_alarm()

        self.grafana: GrafanaDashboards | None = None
        if options.grafana_workspace_id is not None:
            self.grafana = GrafanaDashboards(self, "Grafana", workspace_id=options.grafana_workspace_id,
                                             endpoints=[spec for spec in endpoints if spec.metrics.enabled])

        CfnOutput(self, "AlertTopicArn", value=self.topic.topic_arn,
                  description="DPD alerts (AMP Alertmanager and log alarms) publish here")
        CfnOutput(self, "SubscribeCommand", description="Subscribe to the DPD alerts, then confirm the e-mail",
                  value=f"aws sns subscribe --region {stack.region} --topic-arn {self.topic.topic_arn} "
                        "--protocol email --notification-endpoint YOU@EXAMPLE.COM")
        CfnOutput(self, "PrometheusWorkspaceArn", value=self.workspace_arn,
                  description="Query it from Grafana (the DPD dashboards are written beside the manifests)")
        self._acknowledge(hyperpod_cluster_name)

    def add_endpoint(self, spec: DpdSpec) -> None:
        """Install the alert rules (and the dashboard) of an endpoint added after construction."""
        self._rule_group(spec)
        if self._per_endpoint_logs:
            self._log_alarms(spec)
        if self.grafana is not None and spec.metrics.enabled:
            self.grafana.add_endpoint(spec)

    def _rule_group(self, spec: DpdSpec) -> None:
        if alert_rules(spec):
            self.rule_groups[f"{spec.namespace}/{spec.name}"] = aps.CfnRuleGroupsNamespace(
                self, f"Rules-{spec.namespace}-{spec.name}", name=rule_namespace_name(spec),
                workspace=self.workspace_arn, data=rules_yaml(spec))

    def after(self, *dependencies: IConstruct) -> None:
        """Create the add-on and the metric filters only after ``dependencies`` (the HyperPod cluster)."""
        for dependency in dependencies:
            if self.addon is not None:
                self.addon.node.add_dependency(dependency)
            if self.container_logs is not None:
                self.container_logs.node.add_dependency(dependency)
            for metric_filter in self.metric_filters if self._filters_follow else ():
                metric_filter.node.add_dependency(dependency)
        self._follows += dependencies

    def _allow_publishers(self) -> None:
        """Only this workspace's Alertmanager and this account's alarms may publish to the topic.

        The key lets both services encrypt for the topic, as the AMP and CloudWatch guides for encrypted
        topics write it (no source conditions: SNS calls KMS for them, and the topic policy is the gate).
        """
        stack = Stack.of(self)
        alarms = stack.format_arn(service="cloudwatch", resource="alarm", resource_name="*",
                                  arn_format=ArnFormat.COLON_RESOURCE_NAME)
        for service, source, actions in (
                ("aps.amazonaws.com", self.workspace_arn, ["sns:Publish", "sns:GetTopicAttributes"]),
                ("cloudwatch.amazonaws.com", alarms, ["sns:Publish"])):
            self.topic.add_to_resource_policy(iam.PolicyStatement(
                principals=[iam.ServicePrincipal(service)], actions=actions, resources=[self.topic.topic_arn],
                conditions=_source(source)))
            self.key.add_to_resource_policy(iam.PolicyStatement(
                principals=[iam.ServicePrincipal(service)], actions=["kms:GenerateDataKey*", "kms:Decrypt"],
                resources=["*"]))

    def _addon_role(self, cluster_arn: str, hyperpod_cluster_name: str) -> iam.Role:
        """Pod identity for the add-on's collector: remote write to the workspace, logs of this cluster only."""
        principal = iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags().with_conditions({
            "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
            "ArnEquals": {"aws:SourceArn": cluster_arn}})
        role = iam.Role(self, "AddonRole", assumed_by=principal,
                        description="HyperPod observability add-on: AMP remote write and the cluster's logs")
        role.add_to_policy(iam.PolicyStatement(actions=["aps:RemoteWrite"], resources=[self.workspace_arn]))
        stack = Stack.of(self)
        group = stack.format_arn(service="logs", resource="log-group",
                                 resource_name=f"{CLUSTER_LOG_PREFIX}{hyperpod_cluster_name}/*",
                                 arn_format=ArnFormat.COLON_RESOURCE_NAME)
        role.add_to_policy(iam.PolicyStatement(
            actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents",
                     "logs:GetLogEvents", "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery",
                     "logs:StopQuery", "logs:GetQueryResults"],
            resources=[group, f"{group}:log-stream:*"]))
        # DescribeLogGroups lists groups by prefix and has no resource-level scoping.
        role.add_to_policy(iam.PolicyStatement(actions=["logs:DescribeLogGroups"], resources=["*"]))
        return role

    def _container_logs_addon(self, cluster_name: str, cluster_arn: str) -> eks_l1.CfnAddon:
        """Container Insights with its agent's documented policy, through pod identity; container logs on."""
        principal = iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags().with_conditions({
            "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
            "ArnEquals": {"aws:SourceArn": cluster_arn}})
        role = iam.Role(self, "ContainerLogsRole", assumed_by=principal,
                        description="CloudWatch observability add-on: ships the pods' output to CloudWatch Logs",
                        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(CONTAINER_LOGS_POLICY)])
        acknowledge(role, "IAM4", "AWS's Container Insights setup for EKS attaches exactly this managed policy to "
                    "the agent's role; the add-on is AWS's and its needs follow its versions.",
                    [f"Policy::arn:<AWS::Partition>:iam::aws:policy/{CONTAINER_LOGS_POLICY}"])
        addon = self._ownership.addon(
            self, "ContainerLogsAddon", addon_name=CONTAINER_LOGS_ADDON, cluster_name=cluster_name,
            addon_version=CONTAINER_LOGS_ADDON_VERSION,
            pod_identity_associations=[eks_l1.CfnAddon.PodIdentityAssociationProperty(
                role_arn=role.role_arn, service_account=CONTAINER_LOGS_SERVICE_ACCOUNT)],
            configuration_values=Stack.of(self).to_json_string(container_logs_configuration()))
        return addon

    def _notify(self, alarm: cloudwatch.Alarm) -> None:
        """The topic hears both the alarm and its recovery, so a page is never left open after the fault clears."""
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)

    def _silence_alarm(self) -> None:
        """Breaches when the group receives no line at all: the log alarms would be blind."""
        metric_filter = logs.CfnMetricFilter(
            self, "Filter-LogLines", log_group_name=self.log_group_name, filter_name="dpd-LogLines",
            filter_pattern="", metric_transformations=[logs.CfnMetricFilter.MetricTransformationProperty(
                metric_namespace=self.metric_namespace, metric_name="LogLines", metric_value="1", unit="Count")])
        self.metric_filters.append(metric_filter)
        metric = cloudwatch.Metric(namespace=self.metric_namespace, metric_name="LogLines", statistic="Sum",
                                   period=SILENT_LOG_PERIOD)
        alarm = cloudwatch.Alarm(
            self, "Alarm-LogsNotArriving", metric=metric, threshold=1, evaluation_periods=SILENT_LOG_PERIODS,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            alarm_description=(f"[warning] no log line reached {self.log_group_name} for an hour: the DPD log "
                               "alarms cannot see their failures. Fix: check the log shipper (kubectl get pods -n "
                               "amazon-cloudwatch) or set observability.log_group_name to where the pods' output "
                               "lands."))
        self._notify(alarm)
        self.log_alarms.append(alarm)

    def _log_alarms(self, spec: DpdSpec) -> None:
        """One metric filter and alarm per log pattern for ``spec``'s own pods: a neighbour's lines count elsewhere."""
        for pattern in LOG_PATTERNS:
            self._log_alarm(spec, pattern)

    def _log_alarm(self, spec: DpdSpec | None, pattern: LogPattern) -> None:
        """``spec``'s alarm for ``pattern``, or with ``spec`` None the group-wide one on the line's terms alone."""
        where = pattern.name if spec is None else f"{spec.namespace}-{spec.name}-{pattern.name}"
        metric_name = pattern.metric_name if spec is None else pattern.endpoint_metric(spec)
        metric_filter = logs.CfnMetricFilter(
            self, f"Filter-{where}", log_group_name=self.log_group_name, filter_name=f"dpd-{where}",
            filter_pattern=pattern.filter_pattern if spec is None else pattern.endpoint_pattern(spec),
            metric_transformations=[logs.CfnMetricFilter.MetricTransformationProperty(
                metric_namespace=self.metric_namespace, metric_name=metric_name, metric_value="1",
                default_value=0, unit="Count")])
        if self._filters_follow and self._follows:
            metric_filter.node.add_dependency(*self._follows)
        self.metric_filters.append(metric_filter)
        metric = cloudwatch.Metric(namespace=self.metric_namespace, metric_name=metric_name, statistic="Sum",
                                   period=Duration.minutes(1))
        scope = "" if spec is None else f"{spec.namespace}/{spec.name} ({pattern.role} pods): "
        alarm = cloudwatch.Alarm(
            self, f"Alarm-{where}", metric=metric, threshold=pattern.threshold,
            evaluation_periods=pattern.periods, datapoints_to_alarm=pattern.datapoints,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            # No data means no line reached the group at all (LogsNotArriving says so), never "healthy".
            treat_missing_data=cloudwatch.TreatMissingData.MISSING,
            alarm_description=f"[{pattern.severity.value}] {scope}{pattern.failure}. Fix: {pattern.fix}")
        self._notify(alarm)
        self.log_alarms.append(alarm)

    def _acknowledge(self, hyperpod_cluster_name: str) -> None:
        stack = Stack.of(self)
        group = (f"Resource::arn:{pseudo(stack, 'partition')}:logs:{pseudo(stack, 'region')}:<AWS::AccountId>:"
                 f"log-group:{CLUSTER_LOG_PREFIX}{hyperpod_cluster_name}/*")
        acknowledge(self.addon_role, "IAM5",
                    "The add-on creates one log group per HyperPod cluster id and streams per node under this "
                    "cluster's prefix, and DescribeLogGroups has no resource-level permission.",
                    [group, f"{group}:log-stream:*", "Resource::*"])
