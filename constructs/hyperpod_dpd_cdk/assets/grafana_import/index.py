"""CloudFormation custom resource: put the DPD dashboards into an Amazon Managed Grafana workspace.

AMG dashboards are no CloudFormation resource, so this handler does what AWS's own observability
template does: a short-lived service account token, then Grafana's HTTP API. Create and Update put
every dashboard (overwriting by uid) and remove the ones an update dropped; Delete removes them.
The response goes to CloudFormation's pre-signed URL; any failure is reported, never left hanging.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import boto3

TOKEN_SECONDS = 600
TIMEOUT_SECONDS = 30


def _grafana_call(opener: Any, method: str, url: str, token: str, body: Any = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with opener(request, timeout=TIMEOUT_SECONDS) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        if method == "DELETE" and error.code == 404:  # already gone
            return 404
        raise RuntimeError(f"Grafana {method} {url} failed: HTTP {error.code} {error.read()[:300]!r}") from error


def apply(event: dict[str, Any], client: Any, opener: Any = urllib.request.urlopen) -> str:
    """Do the request's work; returns the physical resource id."""
    props = event["ResourceProperties"]
    workspace = props["WorkspaceId"]
    dashboards = json.loads(props["Dashboards"])
    uids = {d["uid"] for d in dashboards}
    old_uids = set()
    if event["RequestType"] == "Update":
        old_uids = {d["uid"] for d in json.loads(event.get("OldResourceProperties", {}).get("Dashboards", "[]"))}
    endpoint = client.describe_workspace(workspaceId=workspace)["workspace"]["endpoint"]
    account = client.create_workspace_service_account(
        workspaceId=workspace, grafanaRole="EDITOR", name=f"hyperpod-dpd-{event['RequestId'][:8]}")
    try:
        token = client.create_workspace_service_account_token(
            workspaceId=workspace, serviceAccountId=account["id"], name="dashboard-import",
            secondsToLive=TOKEN_SECONDS)["serviceAccountToken"]["key"]
        base = f"https://{endpoint}/api/dashboards"
        if event["RequestType"] == "Delete":
            for uid in sorted(uids):
                _grafana_call(opener, "DELETE", f"{base}/uid/{uid}", token)
        else:
            for dashboard in dashboards:
                _grafana_call(opener, "POST", f"{base}/db", token,
                              {"dashboard": dashboard, "overwrite": True, "message": "hyperpod-dpd"})
            for uid in sorted(old_uids - uids):
                _grafana_call(opener, "DELETE", f"{base}/uid/{uid}", token)
    finally:
        client.delete_workspace_service_account(workspaceId=workspace, serviceAccountId=account["id"])
    return f"{workspace}/hyperpod-dpd-dashboards"


def respond(event: dict[str, Any], status: str, physical_id: str, reason: str, opener: Any) -> None:
    body = json.dumps({"Status": status, "Reason": reason[:500], "PhysicalResourceId": physical_id,
                       "StackId": event["StackId"], "RequestId": event["RequestId"],
                       "LogicalResourceId": event["LogicalResourceId"], "Data": {}}).encode()
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT",
                                     headers={"Content-Type": "", "Content-Length": str(len(body))})
    with opener(request, timeout=TIMEOUT_SECONDS):
        pass


def on_event(event: dict[str, Any], context: Any, *, client: Any = None,
             opener: Any = urllib.request.urlopen) -> None:
    physical_id = event.get("PhysicalResourceId") or f"{event['ResourceProperties']['WorkspaceId']}/failed"
    if event["RequestType"] == "Delete" and physical_id.endswith("/failed"):
        respond(event, "SUCCESS", physical_id, "nothing was created", opener)  # the create failed
        return
    try:
        physical_id = apply(event, client or boto3.client("grafana"), opener)
    except Exception as error:  # every failure must reach CloudFormation
        respond(event, "FAILED", physical_id, f"{type(error).__name__}: {error}", opener)
        return
    respond(event, "SUCCESS", physical_id, "dashboards applied", opener)
