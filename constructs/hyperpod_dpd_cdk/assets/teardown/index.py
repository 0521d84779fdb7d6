"""Delete-time barrier: what the inference operator and AWS create outside CloudFormation must be gone
before CloudFormation removes what they depend on.

Two kinds of barrier share this handler (property ``Kind``):

``operator``
    Sits between each endpoint manifest and the operator add-on. On delete it waits until the load
    balancers, target groups and security groups the AWS Load Balancer Controller tagged
    ``elbv2.k8s.aws/cluster=<cluster>`` and the SageMaker endpoint, endpoint config and model the operator
    registered (tag ``CreatedBy=HyperPodInference``) are gone. After a grace period (or at once when the EKS
    cluster no longer exists, so nothing else will clean up) it deletes them itself. When they still
    exist at the deadline it fails with their ids and the commands that remove them.

``guardduty``
    Sits between the EKS cluster and the VPC. On delete it removes the ``guardduty-data`` interface
    endpoints GuardDuty Runtime Monitoring created in the VPC and, once their network interfaces are
    gone, the ``GuardDutyManagedSecurityGroup-*`` groups, as AWS's HyperPod Terraform does
    (awsome-distributed-ai ``hyperpod-eks-tf/scripts/guardduty-cleanup.sh``).

``logs``
    Sits before the HyperPod cluster: once the cluster is deleted, deletes the log groups under the
    given prefixes (``/aws/sagemaker/Clusters/<name>/``), which nodes write to until their last moment.

It runs under the CDK provider framework: ``on_event`` once, then ``is_complete`` every poll until it
returns ``IsComplete`` or raises. Create and Update do nothing. Only boto3 is needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import ClientError

ALB_CLUSTER_TAG = "elbv2.k8s.aws/cluster"  # aws-load-balancer-controller docs/deploy/security_groups.md
OPERATOR_TAG = ("CreatedBy", "HyperPodInference")  # AmazonSageMakerHyperPodInferenceAccess Create*/Delete* condition
GUARDDUTY_SERVICE_SUFFIXES = (".guardduty-data", ".guardduty-data-fips")
GUARDDUTY_GROUP_PREFIX = "GuardDutyManagedSecurityGroup-"
STARTED = "DeleteStartedAt"


def log(message: str) -> None:
    """Progress in the function's log group (the custom resource's log)."""
    print(message, flush=True)


@dataclass
class Leftovers:
    """What still exists, each with the command that removes it by hand."""

    load_balancers: list[str] = field(default_factory=list)
    target_groups: list[str] = field(default_factory=list)
    security_groups: list[str] = field(default_factory=list)
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
            *(f"aws ec2 delete-security-group --group-id {i}" for i in self.security_groups),
            *(f"aws sagemaker delete-endpoint --endpoint-name {n}" for n in self.endpoints),
            *(f"aws sagemaker delete-endpoint-config --endpoint-config-name {n}" for n in self.endpoint_configs),
            *(f"aws sagemaker delete-model --model-name {n}" for n in self.models),
            *(f"aws logs delete-log-group --log-group-name {n}" for n in self.log_groups),
        ]

    def __bool__(self) -> bool:
        return bool(self.commands())

    def summary(self) -> str:
        parts = [f"{name.replace('_', ' ')}: {', '.join(ids)}" for name, ids in vars(self).items() if ids]
        return "; ".join(parts) or "nothing"


Clients = Callable[[str], Any]


def _clients(service: str) -> Any:
    client: Any = getattr(boto3, "client")  # noqa: B009 - one untyped entry for every service name
    return client(service)


def on_event(event: dict[str, Any], context: object = None, *, clock: Callable[[], float] = time.time,
             clients: Clients = _clients) -> dict[str, Any]:
    """Create/Update: nothing to do. Delete: remember when the wait started, and (operator kind) which
    endpoint config and models each named endpoint uses, since they cannot be found once it is gone."""
    props = event["ResourceProperties"]
    physical_id = event.get("PhysicalResourceId") or f"teardown-{props['Kind']}-{props.get('ClusterName', '')}"
    if event["RequestType"] != "Delete":
        return {"PhysicalResourceId": physical_id}
    data: dict[str, Any] = {STARTED: str(clock())}
    if props["Kind"] == "operator":
        configs, models = _registered(clients("sagemaker"), props.get("EndpointNames", []))
        data.update(EndpointConfigs=configs, Models=models)
    log(f"delete of {physical_id} started: {props}")
    return {"PhysicalResourceId": physical_id, "Data": data}


def is_complete(event: dict[str, Any], context: object = None, *, clock: Callable[[], float] = time.time,
                clients: Clients = _clients) -> dict[str, Any]:
    """True when nothing is left; deletes leftovers after the grace period; raises at the deadline."""
    if event["RequestType"] != "Delete":
        return {"IsComplete": True}
    props = event["ResourceProperties"]
    data = event.get("Data", {})
    elapsed = clock() - float(data.get(STARTED, clock()))
    grace, deadline = float(props.get("GraceSeconds", 600)), float(props.get("DeadlineSeconds", 3000))
    if props["Kind"] == "operator":
        cluster = props["ClusterName"]
        leftovers = operator_leftovers(clients, cluster, props.get("EndpointNames", []),
                                       data.get("EndpointConfigs", []), data.get("Models", []))
        if not leftovers:
            log(f"nothing the operator created for {cluster} is left after {elapsed:.0f}s")
            return {"IsComplete": True}
        if elapsed >= grace or not cluster_exists(clients("eks"), cluster):
            log(f"{elapsed:.0f}s: deleting what the operator left: {leftovers.summary()}")
            delete_operator_leftovers(clients, leftovers)
    elif props["Kind"] == "logs":
        logs = clients("logs")
        leftovers = Leftovers(log_groups=sorted(
            g["logGroupName"] for prefix in props["LogGroupPrefixes"]
            for g in _pages(logs, "describe_log_groups", "logGroups", logGroupNamePrefix=prefix)))
        if not leftovers:
            return {"IsComplete": True}
        log(f"deleting log groups: {leftovers.summary()}")
        for name in leftovers.log_groups:
            _try_delete(name, logs.delete_log_group, logGroupName=name)
    else:
        leftovers = guardduty_leftovers(clients("ec2"), props["VpcId"])
        if not leftovers:
            log(f"no GuardDuty endpoint or security group left in {props['VpcId']}")
            return {"IsComplete": True}
        log(f"{elapsed:.0f}s: deleting GuardDuty leftovers: {leftovers.summary()}")
        delete_guardduty_leftovers(clients("ec2"), leftovers)
    if elapsed >= deadline:
        raise RuntimeError(f"still present after {elapsed:.0f}s: {leftovers.summary()}. Remove them, then run "
                           f"cdk destroy again: {' && '.join(leftovers.commands())}")
    log(f"{elapsed:.0f}s: waiting for {leftovers.summary()}")
    return {"IsComplete": False}


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


def _tagged(elbv2: Any, arns: list[str], cluster: str) -> Iterator[str]:
    for start in range(0, len(arns), 20):  # DescribeTags takes at most 20 ARNs
        for description in elbv2.describe_tags(ResourceArns=arns[start:start + 20])["TagDescriptions"]:
            if {"Key": ALB_CLUSTER_TAG, "Value": cluster} in description.get("Tags", []):
                yield description["ResourceArn"]


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


def operator_leftovers(clients: Clients, cluster: str, endpoint_names: list[str], configs: list[str],
                       models: list[str]) -> Leftovers:
    elbv2, ec2, sagemaker = clients("elbv2"), clients("ec2"), clients("sagemaker")
    balancers = [b["LoadBalancerArn"] for b in _pages(elbv2, "describe_load_balancers", "LoadBalancers")]
    groups = [g["TargetGroupArn"] for g in _pages(elbv2, "describe_target_groups", "TargetGroups")]
    security = _pages(ec2, "describe_security_groups", "SecurityGroups",
                      Filters=[{"Name": f"tag:{ALB_CLUSTER_TAG}", "Values": [cluster]}])
    return Leftovers(
        load_balancers=sorted(_tagged(elbv2, balancers, cluster)),
        target_groups=sorted(_tagged(elbv2, groups, cluster)),
        security_groups=sorted(g["GroupId"] for g in security),
        endpoints=[n for n in endpoint_names if _sagemaker_exists(sagemaker.describe_endpoint, EndpointName=n)],
        endpoint_configs=[n for n in configs if _sagemaker_exists(sagemaker.describe_endpoint_config,
                                                                  EndpointConfigName=n)],
        models=[n for n in models if _sagemaker_exists(sagemaker.describe_model, ModelName=n)])


def _try_delete(what: str, action: Callable[..., object], **kwargs: object) -> None:
    """A delete that fails because the resource is gone or still in use is retried on the next poll."""
    try:
        action(**kwargs)
    except ClientError as error:
        log(f"could not delete {what} yet: {error.response['Error']['Code']}: {error.response['Error']['Message']}")


def _operator_created(sagemaker: Any, arn: str) -> bool:
    tags = sagemaker.list_tags(ResourceArn=arn).get("Tags", [])
    return {"Key": OPERATOR_TAG[0], "Value": OPERATOR_TAG[1]} in tags


def delete_operator_leftovers(clients: Clients, leftovers: Leftovers) -> None:
    """Load balancers first (their ENIs hold the security groups), then target groups and groups, then
    the SageMaker endpoint, its config and model, each only when the operator's tag says it made them."""
    elbv2, ec2, sagemaker = clients("elbv2"), clients("ec2"), clients("sagemaker")
    for arn in leftovers.load_balancers:
        _try_delete(arn, elbv2.delete_load_balancer, LoadBalancerArn=arn)
    for arn in leftovers.target_groups:
        _try_delete(arn, elbv2.delete_target_group, TargetGroupArn=arn)
    for group in leftovers.security_groups:
        _try_delete(group, ec2.delete_security_group, GroupId=group)
    for name in leftovers.endpoints:
        arn = sagemaker.describe_endpoint(EndpointName=name)["EndpointArn"]
        if _operator_created(sagemaker, arn):
            _try_delete(name, sagemaker.delete_endpoint, EndpointName=name)
    for name in leftovers.endpoint_configs:
        arn = sagemaker.describe_endpoint_config(EndpointConfigName=name)["EndpointConfigArn"]
        if _operator_created(sagemaker, arn):
            _try_delete(name, sagemaker.delete_endpoint_config, EndpointConfigName=name)
    for name in leftovers.models:
        arn = sagemaker.describe_model(ModelName=name)["ModelArn"]
        if _operator_created(sagemaker, arn):
            _try_delete(name, sagemaker.delete_model, ModelName=name)


def guardduty_leftovers(ec2: Any, vpc_id: str) -> Leftovers:
    vpc = [{"Name": "vpc-id", "Values": [vpc_id]}]
    endpoints = [e for e in _pages(ec2, "describe_vpc_endpoints", "VpcEndpoints", Filters=vpc)
                 if e["ServiceName"].endswith(GUARDDUTY_SERVICE_SUFFIXES) and e.get("State", "").lower() != "deleted"]
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
        interfaces = ec2.describe_network_interfaces(
            Filters=[{"Name": "group-id", "Values": [group]}])["NetworkInterfaces"]
        if interfaces:
            log(f"{group} is still used by {', '.join(i['NetworkInterfaceId'] for i in interfaces)}")
            continue
        _try_delete(group, ec2.delete_security_group, GroupId=group)
