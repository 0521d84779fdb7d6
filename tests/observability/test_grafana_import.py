"""The Amazon Managed Grafana import handler, against botocore's Stubber and a recorded Grafana HTTP API.

No AWS credentials and no network: every AWS call is stubbed, every HTTP request is captured.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from support import load_module

HANDLER = Path(__file__).resolve().parents[2] / "constructs" / "hyperpod_dpd_cdk" / "assets" / "grafana_import"
WORKSPACE = "g-0123456789"
ENDPOINT = f"{WORKSPACE}.grafana-workspace.us-west-2.amazonaws.com"


@pytest.fixture(scope="module")
def handler() -> ModuleType:
    return load_module("grafana_import_handler", HANDLER / "index.py")


class _Response(io.BytesIO):
    status = 200

    def __enter__(self) -> _Response:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


class Recorder:
    """Stands in for ``urllib.request.urlopen``: records requests, answers 200 or the given HTTP errors."""

    def __init__(self, errors: dict[str, int] | None = None) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.errors = errors or {}

    def __call__(self, request: urllib.request.Request, timeout: float) -> _Response:
        body = json.loads(request.data) if request.data else None
        self.requests.append((request.get_method(), request.full_url, body))
        for fragment, code in self.errors.items():
            if fragment in request.full_url:
                raise urllib.error.HTTPError(request.full_url, code, "error", {}, io.BytesIO(b"nope"))  # type: ignore[arg-type]
        return _Response(b"{}")

    def grafana(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if ENDPOINT in r[1]]

    def response(self) -> dict[str, Any]:
        (put,) = [r for r in self.requests if r[1].startswith("https://cloudformation-response")]
        assert put[0] == "PUT"
        body: dict[str, Any] = put[2]
        return body


def _event(kind: str, uids: list[str], old: list[str] | None = None, physical: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": kind, "RequestId": "0123456789abcdef", "StackId": "stack", "LogicalResourceId": "Dashboards",
        "ResponseURL": "https://cloudformation-response.example/presigned",
        "ResourceProperties": {"WorkspaceId": WORKSPACE, "Dashboards": json.dumps([{"uid": u} for u in uids])}}
    if old is not None:
        event["OldResourceProperties"] = {"WorkspaceId": WORKSPACE, "Dashboards": json.dumps([{"uid": u} for u in old])}
    if physical is not None:
        event["PhysicalResourceId"] = physical
    return event


@pytest.fixture
def grafana() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("grafana", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber


def _expect_session(stubber: Stubber) -> None:
    stubber.add_response("describe_workspace", {"workspace": {
        "id": WORKSPACE, "endpoint": ENDPOINT, "status": "ACTIVE", "authentication": {"providers": ["AWS_SSO"]},
        "created": "2026-01-01T00:00:00Z", "modified": "2026-01-01T00:00:00Z", "dataSources": [],
        "grafanaVersion": "10.4"}}, {"workspaceId": WORKSPACE})
    stubber.add_response("create_workspace_service_account",
                         {"id": "42", "name": "hyperpod-dpd-01234567", "grafanaRole": "EDITOR",
                          "workspaceId": WORKSPACE},
                         {"workspaceId": WORKSPACE, "grafanaRole": "EDITOR", "name": "hyperpod-dpd-01234567"})
    stubber.add_response("create_workspace_service_account_token",
                         {"serviceAccountToken": {"id": "7", "name": "dashboard-import", "key": "glsa_secret"},
                          "serviceAccountId": "42", "workspaceId": WORKSPACE},
                         {"workspaceId": WORKSPACE, "serviceAccountId": "42", "name": "dashboard-import",
                          "secondsToLive": 600})
    stubber.add_response("delete_workspace_service_account", {"serviceAccountId": "42", "workspaceId": WORKSPACE},
                         {"workspaceId": WORKSPACE, "serviceAccountId": "42"})


def test_create_posts_each_dashboard_and_removes_the_token(handler: ModuleType, grafana: tuple[Any, Stubber]) -> None:
    client, stubber = grafana
    _expect_session(stubber)
    http = Recorder()
    handler.on_event(_event("Create", ["a", "b"]), None, client=client, opener=http)
    stubber.assert_no_pending_responses()  # the service account (and its token) was deleted
    posts = http.grafana()
    assert [(m, u.rsplit("/api/", 1)[1]) for m, u, _ in posts] == [("POST", "dashboards/db")] * 2
    assert [body["dashboard"]["uid"] for _, _, body in posts] == ["a", "b"]
    assert all(body["overwrite"] is True for _, _, body in posts)
    assert http.response()["Status"] == "SUCCESS"
    assert http.response()["PhysicalResourceId"] == f"{WORKSPACE}/hyperpod-dpd-dashboards"


def test_update_removes_dashboards_the_specs_dropped(handler: ModuleType, grafana: tuple[Any, Stubber]) -> None:
    client, stubber = grafana
    _expect_session(stubber)
    http = Recorder()
    handler.on_event(_event("Update", ["a"], old=["a", "gone"], physical=f"{WORKSPACE}/hyperpod-dpd-dashboards"),
                     None, client=client, opener=http)
    assert [(m, u.rsplit("/api/", 1)[1]) for m, u, _ in http.grafana()] == [
        ("POST", "dashboards/db"), ("DELETE", "dashboards/uid/gone")]
    assert http.response()["Status"] == "SUCCESS"


def test_delete_tolerates_dashboards_already_gone(handler: ModuleType, grafana: tuple[Any, Stubber]) -> None:
    client, stubber = grafana
    _expect_session(stubber)
    http = Recorder(errors={"/uid/a": 404})
    handler.on_event(_event("Delete", ["a"], physical=f"{WORKSPACE}/hyperpod-dpd-dashboards"), None,
                     client=client, opener=http)
    assert http.response()["Status"] == "SUCCESS"


def test_a_grafana_error_fails_the_resource_and_still_removes_the_account(
        handler: ModuleType, grafana: tuple[Any, Stubber]) -> None:
    client, stubber = grafana
    _expect_session(stubber)
    http = Recorder(errors={"/dashboards/db": 403})
    handler.on_event(_event("Create", ["a"]), None, client=client, opener=http)
    stubber.assert_no_pending_responses()
    response = http.response()
    assert response["Status"] == "FAILED"
    assert "HTTP 403" in response["Reason"]


def test_deleting_a_failed_create_touches_nothing(handler: ModuleType, grafana: tuple[Any, Stubber]) -> None:
    client, _ = grafana
    http = Recorder()
    handler.on_event(_event("Delete", ["a"], physical=f"{WORKSPACE}/failed"), None, client=client, opener=http)
    assert http.grafana() == []
    assert http.response()["Status"] == "SUCCESS"
