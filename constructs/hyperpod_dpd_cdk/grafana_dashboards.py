"""Import the per-endpoint DPD dashboards into an Amazon Managed Grafana workspace you name.

AMG dashboards are no CloudFormation resource, and an AMG workspace needs IAM Identity Center (or
SAML) with at least one user, which a stack cannot create; so the stack takes an existing workspace
and a Lambda-backed custom resource puts the dashboards through Grafana's HTTP API with a
service-account token that lives ten minutes. The dashboards ask for the Prometheus data source as a
variable: pick the workspace's AMP data source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Aws, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_dpd import DpdSpec, Problem
from hyperpod_dpd.errors import raise_if_any
from hyperpod_dpd_cdk._late import late_string
from hyperpod_dpd_cdk._private.nag import acknowledge, managed_policy

GRAFANA_WORKSPACE_ID = re.compile(r"^g-[0-9a-f]{10}$")
HANDLER_DIR = Path(__file__).resolve().parent / "assets" / "grafana_import"


def workspace_problems(workspace_id: str) -> list[Problem]:
    if GRAFANA_WORKSPACE_ID.match(workspace_id):
        return []
    return [Problem(field="observability.grafana_workspace_id", value=workspace_id,
                    message="is not an Amazon Managed Grafana workspace id",
                    fix="use the id from 'aws grafana list-workspaces' (g- and 10 hex digits)")]


def dashboards_property(specs: Sequence[DpdSpec]) -> str:
    """Every endpoint's dashboard as one JSON list (needs the ``observability`` extra)."""
    from hyperpod_dpd.observability.dashboard import MissingExtra, dashboard_json  # noqa: PLC0415

    try:
        return json.dumps([json.loads(dashboard_json(spec)) for spec in specs], sort_keys=True,
                          separators=(",", ":"))
    except MissingExtra as error:
        raise_if_any([Problem(field="observability.grafana_workspace_id", value=None, message=str(error),
                              fix="install the extra, or leave grafana_workspace_id unset")])
        raise  # pragma: no cover - raise_if_any raised


class GrafanaDashboards(Construct):
    """The DPD dashboards of ``endpoints`` in the AMG workspace ``workspace_id``, kept in step with the specs.

    :param workspace_id: an existing AMG workspace (``g-...``).
    :param endpoints: the specs whose dashboards to import.
    """

    def __init__(self, scope: Construct, id: str, *, workspace_id: str, endpoints: Sequence[DpdSpec]) -> None:
        super().__init__(scope, id)
        raise_if_any(workspace_problems(workspace_id))
        self.endpoints = list(endpoints)
        self._dashboards = dashboards_property(self.endpoints)
        stack = Stack.of(self)
        workspace_arn = f"arn:{Aws.PARTITION}:grafana:{stack.region}:{Aws.ACCOUNT_ID}:/workspaces/{workspace_id}"
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=RemovalPolicy.DESTROY)
        self.function = lambda_.Function(
            self, "Handler", runtime=lambda_.Runtime.PYTHON_3_14, handler="index.on_event",
            code=lambda_.Code.from_asset(str(HANDLER_DIR)), timeout=Duration.minutes(2), log_group=log_group,
            description="hyperpod-dpd: put the DPD dashboards into Amazon Managed Grafana")
        self.function.add_to_role_policy(iam.PolicyStatement(
            actions=["grafana:DescribeWorkspace", "grafana:CreateWorkspaceServiceAccount",
                     "grafana:CreateWorkspaceServiceAccountToken", "grafana:DeleteWorkspaceServiceAccount"],
            resources=[workspace_arn]))
        self.resource = CustomResource(self, "Dashboards", service_token=self.function.function_arn,
                                       resource_type="Custom::GrafanaDashboards",
                                       properties={"WorkspaceId": workspace_id,
                                                   "Dashboards": late_string(lambda: self._dashboards)})
        role = self.function.role
        assert role is not None
        acknowledge(role, "IAM4", "AWSLambdaBasicExecutionRole only lets the handler write its own logs.",
                    [managed_policy("service-role/AWSLambdaBasicExecutionRole")])

    def add_endpoint(self, spec: DpdSpec) -> None:
        """Import the dashboard of an endpoint added after construction too."""
        dashboards = dashboards_property([*self.endpoints, spec])  # MissingExtra is refused here, not at synth
        self.endpoints.append(spec)
        self._dashboards = dashboards
