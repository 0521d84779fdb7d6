"""Delete-time barrier: what the inference operator and AWS create outside CloudFormation must be gone
before CloudFormation removes what they depend on.

Two kinds of barrier share this handler (property ``Kind``):

``operator``
    Sits between each endpoint manifest and the operator add-on. On delete it waits until the load
    balancers, target groups and security groups the AWS Load Balancer Controller made for this stack's
    Ingresses are gone: those tagged ``elbv2.k8s.aws/cluster=<cluster>`` *and* ``ingress.k8s.aws/stack``
    equal to one of ``IngressStacks`` (``<namespace>/<ingress>``; the controller's tracking tags,
    aws-load-balancer-controller ``pkg/deploy/tracking/provider.go``). Other workloads' load balancers on
    the same cluster carry other stack tags and are never touched. The controller's shared backend group
    (``elbv2.k8s.aws/resource=backend-sg``, ``docs/deploy/security_groups.md``) is waited for and deleted
    only when ``DeleteBackendSecurityGroup`` is true (a cluster the stack created). It also waits for the
    SageMaker endpoint, endpoint config and model the operator registered (tag
    ``CreatedBy=HyperPodInference``). After a grace period (or at once when the EKS cluster no longer
    exists, so nothing else will clean up) it deletes them itself, first revoking the ingress rules of
    other groups that name a group it deletes (EC2 refuses to delete a referenced group). When they
    still exist at the deadline it fails with their ids, the network interfaces still using a group
    (naming an ALB the barrier did not look for) and the commands that remove them.

``guardduty``
    Sits between the EKS cluster and the VPC. On delete it removes the ``guardduty-data`` interface
    endpoints GuardDuty Runtime Monitoring created in the VPC (tag key ``GuardDutyManaged``, which
    GuardDuty's service-linked role puts on every endpoint it creates) and, once their network interfaces are
    gone, the ``GuardDutyManagedSecurityGroup-*`` groups, as AWS's HyperPod Terraform does
    (awsome-distributed-ai ``hyperpod-eks-tf/scripts/guardduty-cleanup.sh``).

``logs``
    Sits before the HyperPod cluster: once the cluster is deleted, deletes the log groups under the
    given prefixes (``/aws/sagemaker/Clusters/<name>/``), which nodes write to until their last moment,
    and the groups named exactly in ``LogGroupNames`` (on a cluster the stack created, the Container
    Insights groups its add-on's agents made, ``/aws/containerinsights/<cluster>/{application,dataplane,
    host,performance}``; the add-on is gone by then). A group that does not exist, or vanishes before its
    delete, is simply not there on the next look.

It runs under the CDK provider framework: ``on_event`` once, then ``is_complete`` every poll until it
returns ``IsComplete`` or raises. An exception there fails the resource at once (the framework does not
retry it), so a transient error (throttling, a resource the controller deleted between two calls, a group
still held by draining interfaces, a 5xx, a dropped connection) ends the poll with ``IsComplete: false`` and
is tried again on the next one, 30 s later, until the deadline; every client also retries with back-off
itself (botocore's ``standard`` mode). Any other error, from a describe or a delete, fails at once: waiting
would not change it. ``on_event`` runs once, so it retries transient errors itself, with back-off. Create
and Update do nothing. Only boto3 is needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

# aws-load-balancer-controller pkg/deploy/tracking/provider.go: the cluster tag on everything it creates, the
# stack tag (``<namespace>/<ingress>``, or the group name of an explicit IngressGroup) on everything it creates
# for an Ingress; docs/deploy/security_groups.md: the shared backend group's resource tag.
ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"
INGRESS_STACK_TAG = "ingress.k8s.aws/stack"
ALB_RESOURCE_TAG = "elbv2.k8s.aws/resource"
BACKEND_SG = "backend-sg"
OPERATOR_TAG = ("CreatedBy", "HyperPodInference")  # AmazonSageMakerHyperPodInferenceAccess Create*/Delete* condition
GUARDDUTY_SERVICE_SUFFIXES = (".guardduty-data", ".guardduty-data-fips")
GUARDDUTY_GROUP_PREFIX = "GuardDutyManagedSecurityGroup-"
GUARDDUTY_TAG = "GuardDutyManaged"  # AmazonGuardDutyServiceRolePolicy: CreateVpcEndpoint requires it, Delete keys on it
STARTED = "DeleteStartedAt"
# Errors that pass: throttling (ELB ``Throttling``, EC2 ``RequestLimitExceeded``, SageMaker
# ``ThrottlingException``), a resource deleted by its owner between a list and a describe or delete, a group
# still held by interfaces or rules, a service fault. Anything else (``AccessDenied``,
# ``UnauthorizedOperation``, a bad parameter) fails at once: waiting would not change it.
TRANSIENT = frozenset({
    "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
    "RequestThrottled", "RequestThrottledException", "SlowDown", "PriorRequestNotComplete",
    "LoadBalancerNotFound", "TargetGroupNotFound", "InvalidGroup.NotFound", "InvalidGroupId.NotFound",
    "InvalidVpcEndpointId.NotFound", "InvalidSecurityGroupRuleId.NotFound", "ResourceNotFoundException",
    "DependencyViolation", "ResourceInUse",
    "InternalError", "InternalFailure", "InternalServerError", "ServiceUnavailable", "Unavailable",
})
# Not-found answers of describe calls: the resource is gone, which is what the barrier waits for.
GONE = frozenset({"LoadBalancerNotFound", "TargetGroupNotFound", "InvalidGroup.NotFound",
                  "InvalidGroupId.NotFound", "InvalidVpcEndpointId.NotFound", "ValidationException"})
# A revoke the role is not granted: it is granted only on the node groups it was given, so a rule in any other
# group (someone else's) is left to its owner; it stays in the printed commands.
DENIED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
# botocore.exceptions: the network failures a later try may not meet. Other BotoCoreErrors
# (ParamValidationError, NoRegionError, NoCredentialsError) are the handler's or its setup's fault.
NETWORK = (EndpointConnectionError, ConnectionClosedError, ReadTimeoutError, ConnectTimeoutError)
RETRIES = Config(retries={"mode": "standard", "max_attempts": 8})
# on_event's own tries (its function has 2 minutes): waits of 2, 4, 8 and 16 s between five tries.
START_TRIES = 5


def log(message: str) -> None:
    """Progress in the function's log group (the custom resource's log)."""
    print(message, flush=True)


@dataclass
class Leftovers:
    """What still exists, each with the command that removes it by hand."""

    load_balancers: list[str] = field(default_factory=list)
    target_groups: list[str] = field(default_factory=list)
    security_groups: list[str] = field(default_factory=list)
    # group -> ids of its ingress rules that name one of ``security_groups``; revoked before those go
    referencing_rules: dict[str, list[str]] = field(default_factory=dict)
    endpoints: list[str] = field(default_factory=list)
    endpoint_configs: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    vpc_endpoints: list[str] = field(default_factory=list)
    log_groups: list[str] = field(default_factory=list)

    def commands(self) -> list[str]:
        return [
            *(f"aws elbv2 delete-load-balancer --load-balancer-arn {a}" for a in self.load_balancers),
            *(f"aws elbv2 delete-target-group --target-group-arn {a}" for a in self.target_groups),
            *(f"aws ec2 delete-vpc-endpoints --vpc-endpoint-ids {i}" for i in self.vpc_endpoints),
            *(f"aws ec2 revoke-security-group-ingress --group-id {g} --security-group-rule-ids {' '.join(rules)}"
              for g, rules in sorted(self.referencing_rules.items())),
            *(f"aws ec2 delete-security-group --group-id {i}" for i in self.security_groups),
            *(f"aws sagemaker delete-endpoint --endpoint-name {n}" for n in self.endpoints),
            *(f"aws sagemaker delete-endpoint-config --endpoint-config-name {n}" for n in self.endpoint_configs),
            *(f"aws sagemaker delete-model --model-name {n}" for n in self.models),
            *(f"aws logs delete-log-group --log-group-name {n}" for n in self.log_groups),
        ]

    def __bool__(self) -> bool:
        return bool(self.commands())

    def summary(self) -> str:
        parts = [f"{name.replace('_', ' ')}: {', '.join(ids)}" for name, ids in vars(self).items()
                 if ids and name != "referencing_rules"]
        parts += [f"ingress rules of {g} naming them: {', '.join(r)}"
                  for g, r in sorted(self.referencing_rules.items())]
        return "; ".join(parts) or "nothing"


Clients = Callable[[str], Any]


def _clients(service: str) -> Any:
    client: Any = getattr(boto3, "client")  # noqa: B009 - one untyped entry for every service name
    return client(service, config=RETRIES)


def _code(error: Exception) -> str:
    return str(error.response.get("Error", {}).get("Code", "")) if isinstance(error, ClientError) else ""


def transient(error: Exception) -> bool:
    """An error the next poll may not meet (see ``TRANSIENT``); connection and timeout errors too (``NETWORK``)."""
    if isinstance(error, NETWORK):
        return True
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) if isinstance(
        error, ClientError) else 0
    return _code(error) in TRANSIENT or int(status) >= 500


def on_event(event: dict[str, Any], context: object = None, *, clock: Callable[[], float] = time.time,
             clients: Clients = _clients, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Create/Update: nothing to do. Delete: remember when the wait started, and (operator kind) which
    endpoint config and models each named endpoint uses, since they cannot be found once it is gone.
    The framework calls this once, so transient errors are tried again here (``START_TRIES``)."""
    props = event["ResourceProperties"]
    physical_id = event.get("PhysicalResourceId") or f"teardown-{props['Kind']}-{props.get('ClusterName', '')}"
    if event["RequestType"] != "Delete":
        return {"PhysicalResourceId": physical_id}
    data: dict[str, Any] = {STARTED: str(clock())}
    if props["Kind"] == "operator":
        configs, models = _with_retries(lambda: _registered(clients("sagemaker"), props.get("EndpointNames", [])),
                                        sleep)
        data.update(EndpointConfigs=configs, Models=models)
    log(f"delete of {physical_id} started: {props}")
    return {"PhysicalResourceId": physical_id, "Data": data}


def _with_retries(call: Callable[[], Any], sleep: Callable[[float], None]) -> Any:
    """``call()``, tried again after a transient error with doubling waits; any other error, or the last
    try's, is raised."""
    for attempt in range(START_TRIES):
        try:
            return call()
        except (ClientError, BotoCoreError) as error:
            if not transient(error) or attempt == START_TRIES - 1:
                raise
            wait = 2.0 ** (attempt + 1)
            log(f"passing error, trying again in {wait:.0f}s: {error}")
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def is_complete(event: dict[str, Any], context: object = None, *, clock: Callable[[], float] = time.time,
                clients: Clients = _clients) -> dict[str, Any]:
    """True when nothing is left; deletes leftovers after the grace period; raises at the deadline, or at
    once on an error waiting will not change."""
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    data = event.get("Data", {})
    elapsed = clock() - float(data.get(STARTED, clock()))
    deadline = float(props.get("DeadlineSeconds", 3000))
    try:
        leftovers = _poll(props, data, elapsed, clients)
    except (ClientError, BotoCoreError) as error:
        what = f"{_code(error)}: {error}" if isinstance(error, ClientError) else str(error)
        if not transient(error):
            raise RuntimeError(f"the {props['Kind']} barrier cannot go on ({what}). Grant what is missing or "
                               "remove the leftovers by hand, then run cdk destroy again") from None
        if elapsed >= deadline:
            raise RuntimeError(f"still failing after {elapsed:.0f}s ({what}); run cdk destroy again once it "
                               "passes") from None
        log(f"{elapsed:.0f}s: passing error, trying again on the next poll: {what}")
        return {"IsComplete": False}
    if leftovers is None:
        return {"IsComplete": True}
    if elapsed >= deadline:
        held = _held(props, clients, leftovers)
        raise RuntimeError(f"still present after {elapsed:.0f}s: {leftovers.summary()}{held}. Remove them, then "
                           f"run cdk destroy again: {' && '.join(leftovers.commands())}")
    log(f"{elapsed:.0f}s: waiting for {leftovers.summary()}")
    return {"IsComplete": False}


def group_users(ec2: Any, group: str) -> list[str]:
    """The network interfaces that still use ``group``, each with what made it (an ALB's reads
    ``ELB app/<name>/<id>``)."""
    interfaces = ec2.describe_network_interfaces(Filters=[{"Name": "group-id", "Values": [group]}])["NetworkInterfaces"]
    return [f"{i['NetworkInterfaceId']} ({i.get('Description') or i.get('InterfaceType', 'interface')})"
            for i in interfaces]


def _held(props: dict[str, Any], clients: Clients, leftovers: Leftovers) -> str:
    """For the failure message: what still holds each group left, so a load balancer the barrier never
    looked for (another stack tag than ``IngressStacks``) is named. Empty when that cannot be read."""
    try:
        ec2 = clients("ec2")
        held = {g: users for g in leftovers.security_groups if (users := group_users(ec2, g))}
    except (ClientError, BotoCoreError):
        return ""
    if not held:
        return ""
    looked_for = f" (it looks for the ingress.k8s.aws/stack tags {', '.join(props.get('IngressStacks', []))})" \
        if props["Kind"] == "operator" else ""
    return "".join(f"; {g} is still used by {', '.join(users)}" for g, users in sorted(held.items())) + looked_for


def _flag(value: object) -> bool:
    """A boolean property: CloudFormation passes custom resource properties as strings."""
    return str(value).lower() == "true"


def _poll(props: dict[str, Any], data: dict[str, Any], elapsed: float, clients: Clients) -> Leftovers | None:
    """One look (and, when due, one round of deletes); ``None`` when nothing is left."""
    grace = float(props.get("GraceSeconds", 600))
    if props["Kind"] == "operator":
        cluster = props["ClusterName"]
        leftovers = operator_leftovers(clients, cluster, props.get("EndpointNames", []),
                                       data.get("EndpointConfigs", []), data.get("Models", []),
                                       ingress_stacks=props.get("IngressStacks", []),
                                       backend_group=_flag(props.get("DeleteBackendSecurityGroup", False)))
        if not leftovers:
            log(f"nothing the operator created for {cluster} is left after {elapsed:.0f}s")
            return None
        if elapsed >= grace or not cluster_exists(clients("eks"), cluster):
            log(f"{elapsed:.0f}s: deleting what the operator left: {leftovers.summary()}")
            delete_operator_leftovers(clients, leftovers)
    elif props["Kind"] == "logs":
        logs = clients("logs")
        leftovers = Leftovers(log_groups=sorted({
            *(g["logGroupName"] for prefix in props.get("LogGroupPrefixes", [])
              for g in _pages(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=prefix)),
            *exact_log_groups(logs, props.get("LogGroupNames", []))}))
        if not leftovers:
            return None
        log(f"deleting log groups: {leftovers.summary()}")
        for name in leftovers.log_groups:
            _try_delete(name, logs.delete_log_group, logGroupName=name)
    else:
        leftovers = guardduty_leftovers(clients("ec2"), props["VpcId"])
        if not leftovers:
            log(f"no GuardDuty endpoint or security group left in {props['VpcId']}")
            return None
        log(f"{elapsed:.0f}s: deleting GuardDuty leftovers: {leftovers.summary()}")
        delete_guardduty_leftovers(clients("ec2"), leftovers)
    return leftovers


def exact_log_groups(logs: Any, names: list[str]) -> list[str]:
    """Those of ``names`` that exist. DescribeLogGroups lists by prefix, so a group whose name merely starts
    with one of them (``.../application-archive``) is someone else's and is left alone."""
    return [g["logGroupName"] for name in names
            for g in _pages(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=name)
            if g["logGroupName"] == name]


def cluster_exists(eks: Any, name: str) -> bool:
    try:
        eks.describe_cluster(name=name)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ResourceNotFoundException":
            return False
        raise
    return True


def _registered(sagemaker: Any, endpoint_names: list[str]) -> tuple[list[str], list[str]]:
    configs: list[str] = []
    models: list[str] = []
    for name in endpoint_names:
        try:
            config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
            variants = sagemaker.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
        except ClientError as error:
            if error.response["Error"]["Code"] != "ValidationException":  # SageMaker's "could not find"
                raise
            continue
        configs.append(config)
        models.extend(v["ModelName"] for v in variants if "ModelName" in v)
    return configs, models


def _tags(elbv2: Any, arns: list[str]) -> dict[str, dict[str, str]]:
    """Each ARN's tags. DescribeTags takes at most 20 ARNs and fails the whole batch with
    ``LoadBalancerNotFound``/``TargetGroupNotFound`` when one of them was deleted since it was listed (ELB API
    reference, DescribeTags, Errors): then the batch is asked one ARN at a time, and the gone ones dropped."""
    found: dict[str, dict[str, str]] = {}
    for start in range(0, len(arns), 20):
        batch = arns[start:start + 20]
        try:
            descriptions = elbv2.describe_tags(ResourceArns=batch)["TagDescriptions"]
        except ClientError as error:
            if _code(error) not in GONE:
                raise
            descriptions = []
            for arn in batch:
                try:
                    descriptions += elbv2.describe_tags(ResourceArns=[arn])["TagDescriptions"]
                except ClientError as single:
                    if _code(single) not in GONE:
                        raise
        for description in descriptions:
            found[description["ResourceArn"]] = {t["Key"]: t["Value"] for t in description.get("Tags", [])}
    return found


def _ours(tags: dict[str, dict[str, str]], cluster: str, stacks: list[str]) -> list[str]:
    return sorted(arn for arn, t in tags.items() if t.get(ALB_CLUSTER_TAG) == cluster
                  and t.get(INGRESS_STACK_TAG) in stacks)


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
    items: list[Any] = []
    for page in client.get_paginator(operation).paginate(**kwargs):
        items.extend(page[key])
    return items


def _sagemaker_exists(call: Callable[..., Any], **kwargs: str) -> bool:
    try:
        call(**kwargs)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ValidationException":
            return False
        raise
    return True


def referencing_rules(ec2: Any, group_ids: list[str]) -> dict[str, list[str]]:
    """The ingress rules of *other* groups that name one of ``group_ids`` (the controller adds such rules to
    the targets' groups, ``docs/deploy/security_groups.md``); EC2 refuses to delete a group while they exist."""
    if not group_ids:
        return {}
    found: dict[str, list[str]] = {}
    holders = _pages(ec2, "describe_security_groups", "SecurityGroups",
                     Filters=[{"Name": "ip-permission.group-id", "Values": group_ids}])
    for holder in holders:
        rules = _pages(ec2, "describe_security_group_rules", "SecurityGroupRules",
                       Filters=[{"Name": "group-id", "Values": [holder["GroupId"]]}])
        ids = sorted(r["SecurityGroupRuleId"] for r in rules if not r.get("IsEgress")
                     and r.get("ReferencedGroupInfo", {}).get("GroupId") in group_ids
                     and r["ReferencedGroupInfo"]["GroupId"] != holder["GroupId"])
        if ids:
            found[holder["GroupId"]] = ids
    return found


def operator_leftovers(clients: Clients, cluster: str, endpoint_names: list[str], configs: list[str],
                       models: list[str], *, ingress_stacks: Sequence[str] = (), backend_group: bool = False
                       ) -> Leftovers:
    """What the controller made for ``ingress_stacks`` of ``cluster`` (plus its shared backend group when
    ``backend_group``) and the operator's SageMaker resources, as far as they still exist."""
    elbv2, ec2, sagemaker = clients("elbv2"), clients("ec2"), clients("sagemaker")
    stacks = sorted(ingress_stacks)
    balancers: list[str] = []
    target_groups: list[str] = []
    groups: list[str] = []
    if stacks:
        balancers = _ours(_tags(elbv2, [b["LoadBalancerArn"] for b in _pages(
            elbv2, "describe_load_balancers", "LoadBalancers")]), cluster, stacks)
        target_groups = _ours(_tags(elbv2, [g["TargetGroupArn"] for g in _pages(
            elbv2, "describe_target_groups", "TargetGroups")]), cluster, stacks)
        groups = [g["GroupId"] for g in _pages(ec2, "describe_security_groups", "SecurityGroups", Filters=[
            {"Name": f"tag:{ALB_CLUSTER_TAG}", "Values": [cluster]},
            {"Name": f"tag:{INGRESS_STACK_TAG}", "Values": stacks}])]
    if backend_group:
        groups += [g["GroupId"] for g in _pages(ec2, "describe_security_groups", "SecurityGroups", Filters=[
            {"Name": f"tag:{ALB_CLUSTER_TAG}", "Values": [cluster]},
            {"Name": f"tag:{ALB_RESOURCE_TAG}", "Values": [BACKEND_SG]}])]
    groups = sorted(set(groups))
    return Leftovers(
        load_balancers=balancers, target_groups=target_groups, security_groups=groups,
        referencing_rules=referencing_rules(ec2, groups),
        endpoints=[n for n in endpoint_names if _sagemaker_exists(sagemaker.describe_endpoint, EndpointName=n)],
        endpoint_configs=[n for n in configs if _sagemaker_exists(sagemaker.describe_endpoint_config,
                                                                  EndpointConfigName=n)],
        models=[n for n in models if _sagemaker_exists(sagemaker.describe_model, ModelName=n)])


def _try_delete(what: str, action: Callable[..., object], *, may_be_denied: bool = False, **kwargs: object) -> None:
    """A delete that fails because the resource is gone (``GONE``, SageMaker's ``ValidationException``
    included), still in use or throttled is tried again on the next poll. Any other error is raised, so the
    barrier fails at once, as after a describe; with ``may_be_denied`` a denial (``DENIED``) is only logged:
    the call stays in the printed commands."""
    try:
        action(**kwargs)
    except ClientError as error:
        code = _code(error)
        if not (transient(error) or code in GONE or (may_be_denied and code in DENIED)):
            raise
        log(f"could not delete {what} yet: {code}: {error.response['Error']['Message']}")


def _operator_created(sagemaker: Any, describe: Callable[..., Any], arn_key: str, **kwargs: str) -> bool:
    """Whether the resource still exists and carries the operator's tag (it may be gone since it was listed)."""
    try:
        arn = describe(**kwargs)[arn_key]
        tags = sagemaker.list_tags(ResourceArn=arn).get("Tags", [])
    except ClientError as error:
        if _code(error) in GONE:
            return False
        raise
    return {"Key": OPERATOR_TAG[0], "Value": OPERATOR_TAG[1]} in tags


def delete_operator_leftovers(clients: Clients, leftovers: Leftovers) -> None:
    """Load balancers first (their ENIs hold the security groups), then target groups, the ingress rules
    that name the groups, the groups, then the SageMaker endpoint, its config and model, each only when the
    operator's tag says it made them."""
    elbv2, ec2, sagemaker = clients("elbv2"), clients("ec2"), clients("sagemaker")
    for arn in leftovers.load_balancers:
        _try_delete(arn, elbv2.delete_load_balancer, LoadBalancerArn=arn)
    for arn in leftovers.target_groups:
        _try_delete(arn, elbv2.delete_target_group, TargetGroupArn=arn)
    for holder, rules in sorted(leftovers.referencing_rules.items()):
        _try_delete(f"the rules {', '.join(rules)} of {holder}", ec2.revoke_security_group_ingress,
                    may_be_denied=True, GroupId=holder, SecurityGroupRuleIds=rules)
    for group in leftovers.security_groups:
        _try_delete(group, ec2.delete_security_group, GroupId=group)
    for name in leftovers.endpoints:
        if _operator_created(sagemaker, sagemaker.describe_endpoint, "EndpointArn", EndpointName=name):
            _try_delete(name, sagemaker.delete_endpoint, EndpointName=name)
    for name in leftovers.endpoint_configs:
        if _operator_created(sagemaker, sagemaker.describe_endpoint_config, "EndpointConfigArn",
                             EndpointConfigName=name):
            _try_delete(name, sagemaker.delete_endpoint_config, EndpointConfigName=name)
    for name in leftovers.models:
        if _operator_created(sagemaker, sagemaker.describe_model, "ModelArn", ModelName=name):
            _try_delete(name, sagemaker.delete_model, ModelName=name)


def _guardduty_managed(endpoint: dict[str, Any]) -> bool:
    return (endpoint["ServiceName"].endswith(GUARDDUTY_SERVICE_SUFFIXES)
            and any(t["Key"] == GUARDDUTY_TAG for t in endpoint.get("Tags", [])))


def guardduty_leftovers(ec2: Any, vpc_id: str) -> Leftovers:
    """GuardDuty's own endpoints (service ``guardduty-data``, tag key ``GuardDutyManaged``) and groups in
    ``vpc_id``; an endpoint someone made by hand for a manually installed agent is not GuardDuty's."""
    vpc = [{"Name": "vpc-id", "Values": [vpc_id]}]
    endpoints = [e for e in _pages(ec2, "describe_vpc_endpoints", "VpcEndpoints", Filters=vpc)
                 if _guardduty_managed(e) and e.get("State", "").lower() != "deleted"]
    groups = [g for g in _pages(ec2, "describe_security_groups", "SecurityGroups", Filters=vpc)
              if g["GroupName"].startswith(GUARDDUTY_GROUP_PREFIX)]
    return Leftovers(vpc_endpoints=sorted(e["VpcEndpointId"] for e in endpoints),
                     security_groups=sorted(g["GroupId"] for g in groups))


def delete_guardduty_leftovers(ec2: Any, leftovers: Leftovers) -> None:
    """Endpoints first; a group only once no network interface uses it any more."""
    if leftovers.vpc_endpoints:
        _try_delete(", ".join(leftovers.vpc_endpoints), ec2.delete_vpc_endpoints,
                    VpcEndpointIds=leftovers.vpc_endpoints)
    for group in leftovers.security_groups:
        if users := group_users(ec2, group):
            log(f"{group} is still used by {', '.join(users)}")
            continue
        _try_delete(group, ec2.delete_security_group, GroupId=group)
