"""``verify``'s exposure rows: who can call the model once it is deployed.

- **load balancer** (Kubernetes): the operator's Ingress ``alb-<name>-<namespace>`` must be internal.
  FAIL on ``alb.ingress.kubernetes.io/scheme: internet-facing`` or a load balancer hostname without
  the ``internal-`` prefix ELB gives internal load balancers; the row prints the scheme, listeners,
  security groups and source ranges the Ingress asks for, and every ``alb.ingress.kubernetes.io/*``
  annotation (the operator's Ingress template is not public, so the first deploy records it).
- **alb** (AWS): ``DescribeLoadBalancers`` for that hostname: scheme, listeners, and the inbound rules
  of its security groups (``0.0.0.0/0`` on an internal ALB means any host routed into the VPC).
- **sagemaker** (AWS): the one authenticated front door (IAM SigV4), ``InService`` when
  ``endpoint_name`` is set.
- **network policy** (Kubernetes): which NetworkPolicies exist where the router and model pods run.

Sources: LBC v2.13.2 ``docs/guide/ingress/annotations.md`` (default scheme ``internal``, default inbound
CIDR ``0.0.0.0/0``); the ELBv2 ``CreateLoadBalancer`` reference (internal DNS names start ``internal-``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hyperpod_dpd.clients.aws import AWS_ERRORS, AwsClients, describe_error, error_code
from hyperpod_dpd.clients.checks import Check, errored, failed, passed, skipped
from hyperpod_dpd.clients.kube import JsonDict, KubeApi, KubeError
from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, load_balancer_ingress
from hyperpod_dpd.spec import DpdSpec

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_sagemaker import SageMakerClient

INGRESS = "load balancer"
ALB = "alb"
SAGEMAKER_ENDPOINT = "sagemaker"
NETWORK_POLICY = "network policy"

ANNOTATION_PREFIX = "alb.ingress.kubernetes.io/"
SCHEME = ANNOTATION_PREFIX + "scheme"
INTERNAL = "internal"
INTERNET_FACING = "internet-facing"
INTERNAL_DNS_PREFIX = "internal-"
ANYWHERE = frozenset({"0.0.0.0/0", "::/0"})
OPEN_TO_INTERNET = ("the model is reachable from the internet without authentication: find what set the scheme "
                    "(the operator asks for internal), keep the stack's deny on internet-facing load balancers "
                    "(leave allow_internet_facing_load_balancers unset) and give callers the SageMaker endpoint")


@dataclass(frozen=True)
class IngressFinding:
    """The Ingress row and the load balancer hostname it found (for the AWS row)."""

    check: Check
    hostname: str | None = None


def _annotations(ingress: JsonDict) -> dict[str, str]:
    found = (ingress.get("metadata") or {}).get("annotations") or {}
    return {str(k): str(v) for k, v in found.items() if str(k).startswith(ANNOTATION_PREFIX)}


def _hostnames(ingress: JsonDict) -> list[str]:
    entries = ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    return [str(entry["hostname"]) for entry in entries if entry.get("hostname")]


def _listeners(annotations: dict[str, str]) -> str:
    raw = annotations.get(ANNOTATION_PREFIX + "listen-ports")
    if raw is None:
        return "not annotated (the controller's default: HTTPS:443 with a certificate, else HTTP:80)"
    try:
        ports = json.loads(raw)
        return ", ".join(f"{protocol}:{port}" for entry in ports for protocol, port in entry.items())
    except (ValueError, AttributeError, TypeError):
        return raw


def check_ingress(kube: KubeApi, spec: DpdSpec) -> IngressFinding:
    """The operator's Ingress asks for an internal load balancer and got one (``internal-`` hostname)."""
    name = load_balancer_ingress(spec)
    try:
        ingress = kube.ingress(OPERATOR_NAMESPACE, name)
    except KubeError as err:
        return IngressFinding(errored(INGRESS, str(err)))
    if ingress is None:
        return IngressFinding(failed(INGRESS, f"Ingress {OPERATOR_NAMESPACE}/{name} not found: the operator creates "
                                              "it with the endpoint; nothing fronts the router yet", settled=False))
    annotations = _annotations(ingress)
    scheme = annotations.get(SCHEME)
    hostnames = _hostnames(ingress)
    public = [h for h in hostnames if not h.lower().startswith(INTERNAL_DNS_PREFIX)]
    reach = ("the internet" if scheme == INTERNET_FACING or public else "any host routed into the VPC")
    lines = [
        f"scheme {scheme or INTERNAL + ' (not annotated: the controller default)'}",
        f"listeners {_listeners(annotations)}",
        "security groups " + annotations.get(ANNOTATION_PREFIX + "security-groups",
                                             "created by the controller (no annotation)"),
        "source ranges " + annotations.get(ANNOTATION_PREFIX + "inbound-cidrs",
                                           f"0.0.0.0/0 (the controller default): {reach}, no client "
                                           "authentication"),
        *(f"  {key}: {value}" for key, value in sorted(annotations.items())),
    ]
    head = f"Ingress {OPERATOR_NAMESPACE}/{name}"
    if scheme == INTERNET_FACING or public:
        why = f"scheme {scheme}" if scheme == INTERNET_FACING else f"hostname {public[0]} is not internal-"
        return IngressFinding(failed(INGRESS, "\n".join([f"{head}: INTERNET-FACING ({why}): {OPEN_TO_INTERNET}",
                                                         *lines])), public[0] if public else None)
    if scheme not in (None, INTERNAL):
        return IngressFinding(failed(INGRESS, "\n".join([f"{head}: unknown scheme {scheme!r}", *lines])))
    if not hostnames:
        return IngressFinding(failed(INGRESS, "\n".join([f"{head}: no load balancer yet (status.loadBalancer is "
                                                         "empty; the controller's logs say why)", *lines]),
                                     settled=False))
    return IngressFinding(passed(INGRESS, "\n".join([f"{head}: internal, {hostnames[0]}", *lines])), hostnames[0])


# --- AWS: the ALB and its security groups ------------------------------------------------------------


def _find_load_balancer(elbv2: ElasticLoadBalancingv2Client, hostname: str) -> Any:
    for page in elbv2.get_paginator("describe_load_balancers").paginate():
        for balancer in page["LoadBalancers"]:
            if str(balancer.get("DNSName", "")).lower() == hostname.lower():
                return balancer
    return None


def _sources(permission: Any) -> list[str]:
    sources = [r["CidrIp"] for r in permission.get("IpRanges", [])]
    sources += [r["CidrIpv6"] for r in permission.get("Ipv6Ranges", [])]
    sources += [r["PrefixListId"] for r in permission.get("PrefixListIds", [])]
    sources += [r["GroupId"] for r in permission.get("UserIdGroupPairs", [])]
    return sources


def _rule_lines(groups: Iterable[Any], *, internal: bool) -> list[str]:
    lines = []
    for group in groups:
        for permission in group.get("IpPermissions", []):
            protocol = permission.get("IpProtocol", "?")
            ports = ("all" if protocol == "-1" else
                     f"{permission.get('FromPort')}" if permission.get("FromPort") == permission.get("ToPort")
                     else f"{permission.get('FromPort')}-{permission.get('ToPort')}")
            for source in _sources(permission):
                note = ""
                if source in ANYWHERE:
                    note = (" (VPC-wide: any host routed into the VPC, no client authentication)" if internal
                            else " (THE INTERNET)")
                lines.append(f"  {group['GroupId']} {protocol}/{ports} from {source}{note}")
    return lines


def check_load_balancer(elbv2: ElasticLoadBalancingv2Client, ec2: EC2Client, hostname: str | None) -> Check:
    """The ALB behind the Ingress is internal; its listeners and security-group sources are listed."""
    if hostname is None:
        return skipped(ALB, "no load balancer hostname on the Ingress to look up")
    try:
        balancer = _find_load_balancer(elbv2, hostname)
        if balancer is None:
            return failed(ALB, f"no load balancer with DNS name {hostname} in this account and region: check "
                               "--region", settled=False)
        listeners = elbv2.describe_listeners(LoadBalancerArn=balancer["LoadBalancerArn"])["Listeners"]
        group_ids = list(balancer.get("SecurityGroups", []))
        groups = ec2.describe_security_groups(GroupIds=group_ids)["SecurityGroups"] if group_ids else []
    except AWS_ERRORS as err:
        return errored(ALB, describe_error(err, permission="elasticloadbalancing:DescribeLoadBalancers, "
                                                           "DescribeListeners and ec2:DescribeSecurityGroups"))
    scheme = balancer.get("Scheme", "?")
    internal = scheme == INTERNAL
    lines = [f"{balancer.get('LoadBalancerName', '?')}: scheme {scheme}, {balancer.get('Type', '?')}",
             "listeners " + (", ".join(f"{item.get('Protocol')}:{item.get('Port')}" for item in listeners) or "none"),
             "security groups " + (", ".join(group_ids) or "none"),
             *_rule_lines(groups, internal=internal)]
    if not internal:
        return failed(ALB, "\n".join([f"{lines[0]}: {OPEN_TO_INTERNET}", *lines[1:]]))
    return passed(ALB, "\n".join(lines))


# --- AWS: the SageMaker endpoint -----------------------------------------------------------------------

_SETTLING = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})


def check_sagemaker_endpoint(sagemaker: SageMakerClient, spec: DpdSpec) -> Check:
    """The IAM-authenticated front door: ``InService`` when the spec sets ``endpoint_name``."""
    name = spec.endpoint_name
    if not name:
        return skipped(SAGEMAKER_ENDPOINT, "no endpoint_name: no IAM-authenticated front door; only the VPC-internal "
                                           "ALB and the in-cluster router (neither authenticates) reach the model")
    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except AWS_ERRORS as err:
        if error_code(err) == "ValidationException" and "could not find" in str(err).lower():
            return failed(SAGEMAKER_ENDPOINT, f"no SageMaker endpoint {name!r}: the operator registers it once the "
                                              "endpoint is deployed; see its logs", settled=False)
        return errored(SAGEMAKER_ENDPOINT, describe_error(err, permission="sagemaker:DescribeEndpoint"))
    status = endpoint.get("EndpointStatus", "?")
    detail = (f"{name}: {status}; callers authenticate with IAM SigV4 "
              f"(sagemaker:InvokeEndpoint on {endpoint['EndpointArn']})")
    if status == "InService":
        return passed(SAGEMAKER_ENDPOINT, detail)
    reason = endpoint.get("FailureReason")
    return failed(SAGEMAKER_ENDPOINT, f"{detail}{': ' + reason if reason else ''}", settled=status not in _SETTLING)


# --- Kubernetes: NetworkPolicies -----------------------------------------------------------------------


def check_network_policies(kube: KubeApi, spec: DpdSpec) -> Check:
    """Informational: the NetworkPolicies where the model pods and the router run (none is the default)."""
    try:
        found = {namespace: [(p.get("metadata") or {}).get("name", "?") for p in kube.network_policies(namespace)]
                 for namespace in dict.fromkeys((spec.namespace, OPERATOR_NAMESPACE))}
    except KubeError as err:
        return errored(NETWORK_POLICY, str(err))
    if not any(found.values()):
        return passed(NETWORK_POLICY, "none: any pod in any namespace can call the router and the model pods "
                                      "(enforced only with the VPC CNI's network policy turned on)")
    return passed(NETWORK_POLICY, "; ".join(f"{namespace}: {', '.join(names) or 'none'}"
                                           for namespace, names in found.items()))


def exposure_checks(spec: DpdSpec, *, kube: KubeApi | None, aws: AwsClients | None) -> list[Check]:
    """The exposure rows: the Ingress and NetworkPolicies with Kubernetes access, the ALB and the
    SageMaker endpoint with AWS credentials as well."""
    rows: list[Check] = []
    hostname = None
    if kube is not None:
        ingress = check_ingress(kube, spec)
        rows.append(ingress.check)
        hostname = ingress.hostname
    if aws is not None and kube is None:  # the Ingress names the load balancer: without the cluster, none to look up
        rows.append(skipped(ALB, "not checked: no connection to the cluster, whose Ingress names the load balancer "
                                 "(see the kubernetes row)"))
    elif aws is not None:
        rows.append(check_load_balancer(aws.elbv2(), aws.ec2(), hostname))
        rows.append(check_sagemaker_endpoint(aws.sagemaker(), spec))
    if kube is not None:
        rows.append(check_network_policies(kube, spec))
    return rows
