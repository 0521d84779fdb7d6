"""Amazon Managed Service for Prometheus: the workspace's description and its Prometheus query API.

AMP serves Prometheus' HTTP API (``GET <prometheusEndpoint>api/v1/query``) behind SigV4 signing with
the service name ``aps`` (AWS docs, "Query using Prometheus-compatible APIs"; botocore's ``amp``
service model signs as ``aps``). The request goes through ``send``, so tests answer it offline
with recorded responses.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hyperpod_dpd.clients.aws import AWS_ERRORS, AwsClients, describe_error, error_code
from hyperpod_dpd.errors import DpdError

SIGNING_NAME = "aps"
QUERY_PATH = "api/v1/query"
QUERY_PERMISSION = "aps:QueryMetrics"
# A 403 whose body names one of these is a signing fault, not a missing permission (AWS docs, "Troubleshoot
# signed AWS API requests": SignatureDoesNotMatch; AMP's JSON errors say InvalidSignatureException).
SIGNATURE_ERRORS = ("SignatureDoesNotMatch", "InvalidSignatureException")
TIMEOUT_SECONDS = 30
# arn:aws:aps:<region>:<account>:workspace/<id> (the stack's AmpWorkspaceArn output), or the id itself.
WORKSPACE_ARN = re.compile(r"^arn:aws[a-z-]*:aps:[a-z0-9-]+:\d{12}:workspace/(?P<id>ws-[A-Za-z0-9-]+)$")

# (method, url, headers) -> (HTTP status, body)
Send = Callable[[str, str, dict[str, str]], tuple[int, bytes]]


class AmpError(DpdError):
    """The workspace could not be read or queried; the message says why and what to do."""


def urllib_send(method: str, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """One HTTPS request with the standard library; an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as err:
        return int(err.code), bytes(err.read())
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise AmpError(f"cannot reach the workspace's query endpoint: {err}") from None


def workspace_id(text: str) -> str:
    """The workspace id of an ARN or an id; ``ValueError`` for anything else."""
    found = WORKSPACE_ARN.match(text)
    if found is not None:
        return found["id"]
    if re.fullmatch(r"ws-[A-Za-z0-9-]+", text):
        return text
    raise ValueError(f"{text!r} is neither an AMP workspace ARN nor a workspace id (ws-...)")


@dataclass(frozen=True, kw_only=True)
class Workspace:
    workspace_id: str
    status: str
    query_endpoint: str
    created_at: datetime | None


def describe_workspace(clients: AwsClients, workspace: str) -> Workspace:
    """DescribeWorkspace; :class:`AmpError` with a one-line reason when it fails."""
    ident = workspace_id(workspace)
    try:
        found = clients.amp().describe_workspace(workspaceId=ident)["workspace"]
    except AWS_ERRORS as err:
        if error_code(err) == "ResourceNotFoundException":
            raise AmpError(
                f"no AMP workspace {ident} in {clients.region}: check --amp-workspace and --region"
            ) from None
        raise AmpError(describe_error(err, permission="aps:DescribeWorkspace")) from None
    return Workspace(
        workspace_id=ident,
        status=str((found.get("status") or {}).get("statusCode", "?")),
        query_endpoint=str(found.get("prometheusEndpoint", "")),
        created_at=found.get("createdAt"),
    )


@dataclass
class PrometheusApi:
    """Instant queries against one workspace, SigV4-signed with ``credentials`` (botocore ``Credentials``)."""

    endpoint: str
    region: str
    credentials: Any
    send: Send = urllib_send

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector ``promql`` returns now, as Prometheus' ``data.result``."""
        from botocore.auth import SigV4Auth  # noqa: PLC0415 - keeps `hyperpod-dpd --help` fast
        from botocore.awsrequest import AWSRequest  # noqa: PLC0415

        base = self.endpoint if self.endpoint.endswith("/") else self.endpoint + "/"
        # SigV4's canonical query string encodes a space as %20, never '+' (AWS docs, "Create a canonical
        # request"): urlencode's default quote_plus would make AMP refuse the signature.
        query = urllib.parse.urlencode({"query": promql}, quote_via=urllib.parse.quote, safe="")
        url = f"{base}{QUERY_PATH}?{query}"
        request = AWSRequest(method="GET", url=url)
        SigV4Auth(self.credentials, SIGNING_NAME, self.region).add_auth(request)
        status, body = self.send("GET", url, dict(request.headers.items()))
        if status == 403 and any(code.encode() in body for code in SIGNATURE_ERRORS):
            raise AmpError(
                f"the query API refused the request's SigV4 signature (HTTP 403): {body[:200]!r}; check the "
                "credentials' clock and session token, not the caller's permissions"
            )
        if status == 403:
            raise AmpError(f"access denied on the workspace's query API; the caller needs {QUERY_PERMISSION}")
        try:
            answer = json.loads(body)
        except ValueError:
            raise AmpError(f"the query API answered HTTP {status} with no JSON: {body[:200]!r}") from None
        if status != 200 or answer.get("status") != "success":
            raise AmpError(
                f"the query API answered HTTP {status}: {answer.get('errorType', '')} "
                f"{answer.get('error', '')}".rstrip()
            )
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result
