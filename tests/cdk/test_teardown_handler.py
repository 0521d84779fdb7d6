"""The delete-time barrier's handler (assets/teardown/index.py) against moto: leftovers that go away,
leftovers that never do (a clear failure with ids and commands), and a cluster that is already gone.

The destroy paths that go wrong follow: a cluster shared with another team's load balancers, the controller
deleting its own resources while the barrier looks, throttling, groups that other groups' rules still name,
and an error that waiting will not fix. Where AWS answers differently from moto (a throttled call, a
referenced group, a batch that names a deleted ARN) the recorded AWS error is returned through botocore's
``before-call`` hook, the hook ``botocore.stub.Stubber`` uses. Codes, messages and statuses are AWS's: ELB API
reference, Common Errors (``Throttling``, 400) and DescribeTags (``LoadBalancerNotFound``, 400); EC2 API
reference, Error codes (``RequestLimitExceeded``, 503; ``DependencyViolation``, 400; ``InvalidGroup.NotFound``,
400; ``UnauthorizedOperation``, 403)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    ReadTimeoutError,
)
from moto import mock_aws
from support import FakeClock, load_module

from hyperpod_dpd_cdk.teardown import HANDLER_DIR

handler = load_module("teardown_handler", HANDLER_DIR / "index.py")
REGION = "us-west-2"
CLUSTER = "dpd-eks"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    with mock_aws():
        yield lambda service: boto3.client(service, region_name=REGION)


# The operator's Ingress for the default endpoint (contracts.operator.load_balancer_ingress), as the controller
# writes it into ingress.k8s.aws/stack: <namespace>/<ingress> (pkg/deploy/tracking/provider.go).
STACK = "hyperpod-inference-system/alb-dpd-test-default"


def operator_resources(clients: Any, *, tag_value: str = CLUSTER, stack: str = STACK, name: str = "dpd",
                       vpc: str | None = None) -> dict[str, str]:
    """What the ALB controller makes for one Ingress (its tracking tags), in a fresh VPC unless ``vpc``: the load
    balancer, its target group and its managed frontend security group."""
    ec2, elbv2 = clients("ec2"), clients("elbv2")
    if vpc is None:
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        for i, z in enumerate("ab"):
            ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{z}")
    subnets = [s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]]
    tags = [{"Key": handler.ALB_CLUSTER_TAG, "Value": tag_value}, {"Key": handler.INGRESS_STACK_TAG, "Value": stack}]
    group = ec2.create_security_group(GroupName=f"k8s-{name}-frontend", Description="frontend", VpcId=vpc,
                                      TagSpecifications=[{"ResourceType": "security-group", "Tags": [
                                          *tags, {"Key": "ingress.k8s.aws/resource",
                                                  "Value": "ManagedLBSecurityGroup"}]}])["GroupId"]
    balancer = elbv2.create_load_balancer(Name=f"k8s-{name}", Subnets=subnets, Tags=tags)["LoadBalancers"][0]
    target = elbv2.create_target_group(Name=f"k8s-{name}-tg", Protocol="HTTP", Port=8080, VpcId=vpc, Tags=tags,
                                       TargetType="ip")["TargetGroups"][0]
    return {"vpc": vpc, "group": group, "balancer": balancer["LoadBalancerArn"], "target": target["TargetGroupArn"]}


def backend_group(clients: Any, vpc: str, *, cluster: str = CLUSTER) -> str:
    """The controller's shared backend group (docs/deploy/security_groups.md): no stack tag."""
    return clients("ec2").create_security_group(
        GroupName=f"k8s-traffic-{cluster}-0123456789", Description="backend", VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": [
            {"Key": handler.ALB_CLUSTER_TAG, "Value": cluster},
            {"Key": handler.ALB_RESOURCE_TAG, "Value": handler.BACKEND_SG}]}])["GroupId"]


def delete_event(**props: Any) -> dict[str, Any]:
    return {"RequestType": "Delete", "PhysicalResourceId": "teardown-operator",
            "ResourceProperties": {"Kind": "operator", "ClusterName": CLUSTER, "EndpointNames": [],
                                   "IngressStacks": [STACK], "DeleteBackendSecurityGroup": "true",
                                   "GraceSeconds": 600, "DeadlineSeconds": 3000, **props}}


def start(clients: Any, clock: FakeClock, event: dict[str, Any]) -> dict[str, Any]:
    started = handler.on_event(event, clock=clock, clients=clients)
    return {**event, **started}


def test_create_and_update_do_nothing(aws: Any) -> None:
    for request in ("Create", "Update"):
        event = {**delete_event(), "RequestType": request}
        assert "Data" not in handler.on_event(event, clients=aws)
        assert handler.is_complete(event, clients=aws) == {"IsComplete": True}


def test_nothing_left_completes_at_once(aws: Any) -> None:
    operator_resources(aws, tag_value="another-cluster")  # another cluster's are not ours
    clock = FakeClock()
    assert handler.is_complete(start(aws, clock, delete_event()), clock=clock, clients=aws) == {"IsComplete": True}


def with_live_cluster(clients: Any) -> tuple[dict[str, str], FakeClock, dict[str, Any]]:
    """The operator's leftovers while its cluster (and so its controller) still exists, delete started."""
    made = operator_resources(clients)
    clients("eks").create_cluster(name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks",
                                  resourcesVpcConfig={"subnetIds": []})
    clock = FakeClock()
    return made, clock, start(clients, clock, delete_event())


def test_leftovers_the_controller_removes_in_time_are_waited_for_not_deleted(aws: Any) -> None:
    made, clock, event = with_live_cluster(aws)
    clock.sleep(30)
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": False}
    assert aws("elbv2").describe_load_balancers()["LoadBalancers"], "deleted before the grace period"
    # the controller does its job
    aws("elbv2").delete_load_balancer(LoadBalancerArn=made["balancer"])
    aws("elbv2").delete_target_group(TargetGroupArn=made["target"])
    aws("ec2").delete_security_group(GroupId=made["group"])
    clock.sleep(30)
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": True}


def test_after_the_grace_period_the_barrier_deletes_them(aws: Any) -> None:
    made, clock, event = with_live_cluster(aws)
    clock.sleep(601)
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": False}
    assert not aws("elbv2").describe_load_balancers()["LoadBalancers"]
    assert not aws("elbv2").describe_target_groups()["TargetGroups"]
    groups = aws("ec2").describe_security_groups(Filters=[{"Name": "group-id", "Values": [made["group"]]}])
    assert not groups["SecurityGroups"]
    clock.sleep(30)
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": True}


def test_a_missing_cluster_means_no_grace_period(aws: Any) -> None:
    operator_resources(aws)  # no EKS cluster: nothing else will clean up, so do not wait ten minutes
    clock = FakeClock()
    event = start(aws, clock, delete_event())
    handler.is_complete(event, clock=clock, clients=aws)
    assert not aws("elbv2").describe_load_balancers()["LoadBalancers"]
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": True}


class Undeletable:
    """elbv2 whose deletes fail as they do while listeners or ENIs still hold a load balancer."""

    def __init__(self, clients: Any) -> None:
        self.clients = clients

    def __call__(self, service: str) -> Any:
        client = self.clients(service)
        if service == "elbv2":
            def refuse(**_: Any) -> None:
                raise handler.ClientError({"Error": {"Code": "ResourceInUse", "Message": "in use"}},
                                          "DeleteLoadBalancer")
            client.delete_load_balancer = refuse
        return client


def test_leftovers_that_never_go_fail_at_the_deadline_with_ids_and_commands(aws: Any) -> None:
    made = operator_resources(aws)
    clients = Undeletable(aws)
    clock = FakeClock()
    event = start(clients, clock, delete_event(DeadlineSeconds=1200))
    clock.sleep(900)
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": False}
    clock.sleep(300)
    with pytest.raises(RuntimeError) as failure:
        handler.is_complete(event, clock=clock, clients=clients)
    message = str(failure.value)
    assert made["balancer"] in message
    assert f"aws elbv2 delete-load-balancer --load-balancer-arn {made['balancer']}" in message
    assert "cdk destroy again" in message


def sagemaker_endpoint(clients: Any, name: str, *, tags: list[dict[str, str]]) -> None:
    sm = clients("sagemaker")
    sm.create_model(ModelName=f"{name}-model", ExecutionRoleArn="arn:aws:iam::123456789012:role/sm",
                    PrimaryContainer={"Image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/x:1"}, Tags=tags)
    sm.create_endpoint_config(EndpointConfigName=f"{name}-config", Tags=tags, ProductionVariants=[{
        "VariantName": "v", "ModelName": f"{name}-model", "InitialInstanceCount": 1,
        "InstanceType": "ml.m5.large"}])
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config", Tags=tags)


def test_the_operators_sagemaker_endpoint_config_and_model_are_deleted(aws: Any) -> None:
    sagemaker_endpoint(aws, "dpd-test", tags=[{"Key": "CreatedBy", "Value": "HyperPodInference"}])
    clock = FakeClock()
    event = start(aws, clock, delete_event(EndpointNames=["dpd-test"]))
    assert event["Data"]["EndpointConfigs"] == ["dpd-test-config"]
    assert event["Data"]["Models"] == ["dpd-test-model"]
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": False}  # no cluster: deletes
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": True}
    assert not aws("sagemaker").list_endpoints()["Endpoints"]
    assert not aws("sagemaker").list_models()["Models"]


def test_a_sagemaker_endpoint_the_operator_did_not_create_is_never_deleted(aws: Any) -> None:
    sagemaker_endpoint(aws, "dpd-test", tags=[{"Key": "owner", "Value": "someone-else"}])
    clock = FakeClock()
    event = start(aws, clock, delete_event(EndpointNames=["dpd-test"], DeadlineSeconds=0))
    with pytest.raises(RuntimeError, match="aws sagemaker delete-endpoint --endpoint-name dpd-test"):
        handler.is_complete(event, clock=clock, clients=aws)
    assert aws("sagemaker").list_endpoints()["Endpoints"]


def test_guardduty_endpoint_and_group_in_the_vpc_are_removed(aws: Any) -> None:
    ec2 = aws("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    other = ec2.create_vpc(CidrBlock="10.2.0.0/16")["Vpc"]["VpcId"]
    groups = {v: ec2.create_security_group(GroupName=f"GuardDutyManagedSecurityGroup-{v}", Description="gd",
                                           VpcId=v)["GroupId"] for v in (vpc, other)}
    # GuardDuty's service-linked role may create an endpoint only with the GuardDutyManaged tag key
    # (AmazonGuardDutyServiceRolePolicy, GuardDutyCreateVpcEndpointPolicy).
    managed = [{"ResourceType": "vpc-endpoint", "Tags": [{"Key": "GuardDutyManaged", "Value": "true"}]}]
    for v in (vpc, other):
        ec2.create_vpc_endpoint(VpcId=v, ServiceName=f"com.amazonaws.{REGION}.guardduty-data",
                                VpcEndpointType="Interface", SecurityGroupIds=[groups[v]],
                                TagSpecifications=managed)
    event = {"RequestType": "Delete", "PhysicalResourceId": "teardown-guardduty",
             "ResourceProperties": {"Kind": "guardduty", "VpcId": vpc, "GraceSeconds": 0, "DeadlineSeconds": 3000}}
    clock = FakeClock()
    event = start(aws, clock, event)
    for _ in range(3):
        if handler.is_complete(event, clock=clock, clients=aws)["IsComplete"]:
            break
        clock.sleep(30)
    assert handler.guardduty_leftovers(ec2, vpc).summary() == "nothing"
    assert handler.guardduty_leftovers(ec2, other).vpc_endpoints, "another VPC's endpoint was touched"


def test_log_sweep_deletes_only_the_clusters_groups(aws: Any) -> None:
    logs = aws("logs")
    for name in ("/aws/sagemaker/Clusters/dpd-hp/abc123", "/aws/sagemaker/Clusters/other-hp/def456"):
        logs.create_log_group(logGroupName=name)
    event = {"RequestType": "Delete", "PhysicalResourceId": "teardown-logs",
             "ResourceProperties": {"Kind": "logs", "LogGroupPrefixes": ["/aws/sagemaker/Clusters/dpd-hp/"],
                                    "GraceSeconds": 0, "DeadlineSeconds": 3000}}
    clock = FakeClock()
    event = start(aws, clock, event)
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": False}
    assert handler.is_complete(event, clock=clock, clients=aws) == {"IsComplete": True}
    assert [g["logGroupName"] for g in logs.describe_log_groups()["logGroups"]] == [
        "/aws/sagemaker/Clusters/other-hp/def456"]


OTHER_STACK = "payments/checkout"  # another team's Ingress on the same cluster


class Recorded:
    """Clients from ``clients`` (moto) whose chosen calls get AWS's recorded error answer instead."""

    def __init__(self, clients: Callable[[str], Any]) -> None:
        self.clients = clients
        self.rules: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], bool], list[int]]] = []
        self.calls: list[str] = []

    def fail(self, operation: str, code: str, message: str, *, status: int = 400, times: int = 1,
             when: Callable[[dict[str, Any]], bool] = lambda _: True) -> None:
        error = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
        self.rules.append((operation, error, when, [times]))

    def __call__(self, service: str) -> Any:
        client = self.clients(service)
        service_id = client.meta.service_model.service_id.hyphenize()

        def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["api_params"] = dict(params)

        def answer(model: Any, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            self.calls.append(model.name)
            params = context.get("api_params", {})
            for operation, error, when, left in self.rules:
                if operation == model.name and left[0] > 0 and when(params):
                    left[0] -= 1
                    return AWSResponse("https://aws", error["ResponseMetadata"]["HTTPStatusCode"], {}, None), error
            return None

        client.meta.events.register(f"before-parameter-build.{service_id}", remember)
        client.meta.events.register(f"before-call.{service_id}", answer)
        return client


def names(clients: Any) -> tuple[list[str], list[str], list[str]]:
    elbv2, ec2 = clients("elbv2"), clients("ec2")
    return (sorted(b["LoadBalancerArn"] for b in elbv2.describe_load_balancers()["LoadBalancers"]),
            sorted(t["TargetGroupArn"] for t in elbv2.describe_target_groups()["TargetGroups"]),
            sorted(g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]
                   if g["GroupName"] != "default"))


def live_cluster(clients: Any) -> None:
    clients("eks").create_cluster(name=CLUSTER, roleArn="arn:aws:iam::123456789012:role/eks",
                                  resourcesVpcConfig={"subnetIds": []})


def shared_cluster(clients: Any) -> tuple[dict[str, str], dict[str, str], str]:
    """Ours and another team's Ingress resources on one cluster, in one VPC, with the shared backend group."""
    ours = operator_resources(clients)
    theirs = operator_resources(clients, stack=OTHER_STACK, name="checkout", vpc=ours["vpc"])
    return ours, theirs, backend_group(clients, ours["vpc"])


def run(clients: Any, event: dict[str, Any], clock: FakeClock, *, polls: int = 5) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for _ in range(polls):
        result = handler.is_complete(event, clock=clock, clients=clients)
        if result["IsComplete"]:
            break
        clock.sleep(30)
    return result


def test_controller_finished_first_the_barrier_completes_at_once_and_ignores_other_teams(aws: Any) -> None:
    live_cluster(aws)
    theirs = operator_resources(aws, stack=OTHER_STACK, name="checkout")
    clients = Recorded(aws)
    clock = FakeClock()
    event = start(clients, clock, delete_event(DeleteBackendSecurityGroup="false"))
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": True}
    assert not [c for c in clients.calls if c.startswith(("Delete", "Revoke"))]
    assert names(aws) == ([theirs["balancer"]], [theirs["target"]], [theirs["group"]])


def test_controller_dead_on_a_shared_cluster_only_our_stacks_resources_are_deleted(aws: Any) -> None:
    _, theirs, backend = shared_cluster(aws)  # no EKS cluster: nothing else will clean up
    clock = FakeClock()
    event = start(aws, clock, delete_event(DeleteBackendSecurityGroup="false"))
    assert run(aws, event, clock) == {"IsComplete": True}
    assert names(aws) == ([theirs["balancer"]], [theirs["target"]], sorted([theirs["group"], backend]))


def test_a_cluster_the_stack_created_loses_the_backend_group_too(aws: Any) -> None:
    _, theirs, backend = shared_cluster(aws)
    clock = FakeClock()
    event = start(aws, clock, delete_event(DeleteBackendSecurityGroup="true"))
    assert run(aws, event, clock) == {"IsComplete": True}
    assert backend not in names(aws)[2]
    assert theirs["balancer"] in names(aws)[0], "another stack's load balancer is never deleted"


def test_no_ingress_stacks_means_no_load_balancer_is_looked_at(aws: Any) -> None:
    operator_resources(aws)
    clients = Recorded(aws)
    clock = FakeClock()
    event = start(clients, clock, delete_event(IngressStacks=[], DeleteBackendSecurityGroup="false"))
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": True}
    assert "DescribeLoadBalancers" not in clients.calls


def test_throttled_describes_are_tried_again_on_the_next_poll(aws: Any) -> None:
    made = operator_resources(aws)
    clients = Recorded(aws)
    clients.fail("DescribeLoadBalancers", "Throttling", "Rate exceeded", times=2)
    clients.fail("DescribeSecurityGroups", "RequestLimitExceeded", "Request limit exceeded.", status=503)
    clock = FakeClock()
    event = start(clients, clock, delete_event())
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": False}  # no raise
    assert run(clients, event, clock) == {"IsComplete": True}
    assert made["balancer"] not in names(aws)[0]


def test_throttling_until_the_deadline_fails_naming_the_error(aws: Any) -> None:
    operator_resources(aws)
    clients = Recorded(aws)
    clients.fail("DescribeLoadBalancers", "Throttling", "Rate exceeded", times=100)
    clock = FakeClock()
    event = start(clients, clock, delete_event(DeadlineSeconds=60))
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": False}
    clock.sleep(61)
    with pytest.raises(RuntimeError, match=r"still failing after 61s .*Throttling"):
        handler.is_complete(event, clock=clock, clients=clients)


def test_an_error_waiting_cannot_fix_fails_at_once(aws: Any) -> None:
    operator_resources(aws)
    clients = Recorded(aws)
    clients.fail("DescribeLoadBalancers", "AccessDenied", "User is not authorized to perform: "
                 "elasticloadbalancing:DescribeLoadBalancers", status=403)
    clock = FakeClock()
    event = start(clients, clock, delete_event())
    with pytest.raises(RuntimeError, match=r"cannot go on .*AccessDenied"):
        handler.is_complete(event, clock=clock, clients=clients)


def test_a_load_balancer_deleted_between_listing_and_describe_tags(aws: Any) -> None:
    ours, theirs, _ = shared_cluster(aws)
    live_cluster(aws)
    clients = Recorded(aws)

    def controller_deletes_it(params: dict[str, Any]) -> bool:  # the controller wins the race
        if ours["balancer"] in params["ResourceArns"] and len(params["ResourceArns"]) > 1:
            aws("elbv2").delete_load_balancer(LoadBalancerArn=ours["balancer"])
            return True
        return False

    clients.fail("DescribeTags", "LoadBalancerNotFound", f"Load balancers '[{ours['balancer']}]' not found",
                 when=controller_deletes_it)
    clock = FakeClock()
    event = start(clients, clock, delete_event(DeleteBackendSecurityGroup="false"))
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": False}  # TG and SG remain
    assert theirs["balancer"] in names(aws)[0]


def test_resources_that_vanish_between_describe_and_delete(aws: Any) -> None:
    made = operator_resources(aws)
    clients = Recorded(aws)

    def gone(params: dict[str, Any]) -> bool:  # the controller deleted it first
        aws("ec2").delete_security_group(GroupId=params["GroupId"])
        return True

    clients.fail("DeleteLoadBalancer", "LoadBalancerNotFound", "One or more load balancers not found",
                 when=lambda p: aws("elbv2").delete_load_balancer(LoadBalancerArn=p["LoadBalancerArn"]) is not None)
    clients.fail("DeleteSecurityGroup", "InvalidGroup.NotFound", f"The security group '{made['group']}' does "
                 "not exist", when=gone)
    clock = FakeClock()
    event = start(clients, clock, delete_event())
    assert run(clients, event, clock) == {"IsComplete": True}
    assert names(aws) == ([], [], [])


def test_a_group_held_by_draining_interfaces_is_deleted_once_they_are_gone(aws: Any) -> None:
    operator_resources(aws)
    clients = Recorded(aws)
    clients.fail("DeleteSecurityGroup", "DependencyViolation", "resource sg-0 has a dependent object", times=2)
    clock = FakeClock()
    event = start(clients, clock, delete_event())
    assert run(clients, event, clock, polls=6) == {"IsComplete": True}
    assert clients.calls.count("DeleteSecurityGroup") == 3


def referenced_by(aws: Any, group: str) -> Callable[[dict[str, Any]], bool]:
    """EC2's rule, which moto does not apply: a group that another group's rule names cannot be deleted."""
    def check(params: dict[str, Any]) -> bool:
        holders = aws("ec2").describe_security_groups(
            Filters=[{"Name": "ip-permission.group-id", "Values": [params["GroupId"]]}])["SecurityGroups"]
        return params["GroupId"] == group and any(h["GroupId"] != group for h in holders)
    return check


def node_groups_naming(aws: Any, vpc: str, backend: str) -> tuple[str, str, str]:
    """The EFA and cluster groups with the rules the controller adds for its backend group, and one rule of
    the EFA group that names another group (it must stay)."""
    ec2 = aws("ec2")
    efa = ec2.create_security_group(GroupName="efa", Description="efa", VpcId=vpc)["GroupId"]
    cluster_sg = ec2.create_security_group(GroupName="eks-cluster-sg", Description="eks", VpcId=vpc)["GroupId"]
    for holder in (efa, cluster_sg):
        ec2.authorize_security_group_ingress(GroupId=holder, IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 8081, "ToPort": 8081, "UserIdGroupPairs": [{"GroupId": backend}]}])
    ec2.authorize_security_group_ingress(GroupId=efa, IpPermissions=[
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": cluster_sg}]}])
    return efa, cluster_sg, backend


def rules_naming(aws: Any, holder: str) -> set[str | None]:
    rules = aws("ec2").describe_security_group_rules(
        Filters=[{"Name": "group-id", "Values": [holder]}])["SecurityGroupRules"]
    return {r.get("ReferencedGroupInfo", {}).get("GroupId") for r in rules if not r["IsEgress"]}


def test_rules_naming_the_backend_group_are_revoked_before_it_is_deleted(aws: Any) -> None:
    made = operator_resources(aws)
    efa, cluster_sg, backend = node_groups_naming(aws, made["vpc"], backend_group(aws, made["vpc"]))
    clients = Recorded(aws)
    clients.fail("DeleteSecurityGroup", "DependencyViolation", f"resource {backend} has a dependent object",
                 times=100, when=referenced_by(aws, backend))
    clock = FakeClock()
    event = start(clients, clock, delete_event())
    assert run(clients, event, clock) == {"IsComplete": True}
    assert backend not in names(aws)[2]
    assert rules_naming(aws, efa) == {cluster_sg}, "only the rules naming the deleted group go"
    assert rules_naming(aws, cluster_sg) == set()


def test_a_denied_delete_fails_at_once(aws: Any) -> None:
    made = operator_resources(aws)  # no EKS cluster: the barrier deletes on its first poll
    clients = Recorded(aws)
    clients.fail("DeleteLoadBalancer", "AccessDenied", "User is not authorized to perform: "
                 "elasticloadbalancing:DeleteLoadBalancer", status=403)
    clock = FakeClock()
    event = start(clients, clock, delete_event())
    with pytest.raises(RuntimeError, match=r"cannot go on .*AccessDenied"):
        handler.is_complete(event, clock=clock, clients=clients)
    assert clock.slept == []
    assert made["balancer"] in names(aws)[0]


def test_a_denied_sagemaker_delete_fails_at_once_but_a_gone_one_passes(aws: Any) -> None:
    sagemaker_endpoint(aws, "dpd-test", tags=[{"Key": "CreatedBy", "Value": "HyperPodInference"}])
    clients = Recorded(aws)
    clients.fail("DeleteEndpoint", "ValidationException", "Could not find endpoint", times=1)
    clients.fail("DeleteModel", "AccessDeniedException", "not authorized to perform: sagemaker:DeleteModel",
                 status=400)
    clock = FakeClock()
    event = start(clients, clock, delete_event(EndpointNames=["dpd-test"]))
    with pytest.raises(RuntimeError, match=r"cannot go on .*AccessDeniedException"):
        handler.is_complete(event, clock=clock, clients=clients)
    assert clients.calls.count("DeleteEndpoint") == 1, "the not-found answer passed on to the next delete"


def test_revokes_that_are_denied_are_in_the_printed_commands(aws: Any) -> None:
    """Revokes are granted only on the node groups the barrier was given, so a denied revoke is someone
    else's group: it is logged and printed, and does not fail the barrier at once (deletes do)."""
    made = operator_resources(aws)
    efa, cluster_sg, backend = node_groups_naming(aws, made["vpc"], backend_group(aws, made["vpc"]))
    clients = Recorded(aws)
    clients.fail("RevokeSecurityGroupIngress", "UnauthorizedOperation", "You are not authorized to perform this "
                 "operation.", status=403, times=100)
    clients.fail("DeleteSecurityGroup", "DependencyViolation", f"resource {backend} has a dependent object",
                 times=100, when=referenced_by(aws, backend))
    clock = FakeClock()
    event = start(clients, clock, delete_event(DeadlineSeconds=60))
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": False}
    clock.sleep(60)
    with pytest.raises(RuntimeError) as failure:
        handler.is_complete(event, clock=clock, clients=clients)
    message = str(failure.value)
    revoke = "aws ec2 revoke-security-group-ingress --group-id {} --security-group-rule-ids "
    for holder in (efa, cluster_sg):
        assert revoke.format(holder) in message
    assert message.index(revoke.format(efa)) < message.index(f"aws ec2 delete-security-group --group-id {backend}")
    assert rules_naming(aws, efa) == {backend, cluster_sg}, "nothing was revoked"


def test_guardduty_deletes_only_its_own_endpoint_in_this_vpc(aws: Any) -> None:
    ec2 = aws("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    service = "com.amazonaws.us-west-2.guardduty-data"
    managed = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=service, VpcEndpointType="Interface",
                                      TagSpecifications=[{"ResourceType": "vpc-endpoint", "Tags": [
                                          {"Key": "GuardDutyManaged", "Value": "true"}]}])["VpcEndpoint"]
    by_hand = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=service, VpcEndpointType="Interface")["VpcEndpoint"]
    s3 = ec2.create_vpc_endpoint(VpcId=vpc, ServiceName="com.amazonaws.us-west-2.s3",
                                 TagSpecifications=[{"ResourceType": "vpc-endpoint", "Tags": [
                                     {"Key": "GuardDutyManaged", "Value": "true"}]}])["VpcEndpoint"]
    assert handler.guardduty_leftovers(ec2, vpc).vpc_endpoints == [managed["VpcEndpointId"]]
    event = {"RequestType": "Delete", "PhysicalResourceId": "teardown-guardduty",
             "ResourceProperties": {"Kind": "guardduty", "VpcId": vpc, "GraceSeconds": 0, "DeadlineSeconds": 3000}}
    clock = FakeClock()
    assert run(aws, start(aws, clock, event), clock) == {"IsComplete": True}
    left = {e["VpcEndpointId"]: e["State"].lower() for e in ec2.describe_vpc_endpoints()["VpcEndpoints"]}
    assert left.get(managed["VpcEndpointId"], "deleted") == "deleted"
    assert left[by_hand["VpcEndpointId"]] != "deleted", "an endpoint GuardDuty did not make is not deleted"
    assert left[s3["VpcEndpointId"]] != "deleted"


def test_our_stack_tag_is_the_operator_ingress_of_the_default_endpoint() -> None:
    from hyperpod_dpd.contracts.operator import OPERATOR_NAMESPACE, load_balancer_ingress
    from hyperpod_dpd.spec.defaults import default_spec

    assert f"{OPERATOR_NAMESPACE}/{load_balancer_ingress(default_spec())}" == STACK


def test_start_retries_throttled_sagemaker_describes_with_back_off(aws: Any) -> None:
    sagemaker_endpoint(aws, "dpd-test", tags=[{"Key": "CreatedBy", "Value": "HyperPodInference"}])
    clients = Recorded(aws)
    clients.fail("DescribeEndpoint", "ThrottlingException", "Rate exceeded", times=2)
    clock = FakeClock()
    started = handler.on_event(delete_event(EndpointNames=["dpd-test"]), clock=clock, clients=clients,
                               sleep=clock.sleep)
    assert started["Data"]["EndpointConfigs"] == ["dpd-test-config"]
    assert clock.slept == [2.0, 4.0]


def test_start_fails_at_once_on_an_error_waiting_cannot_fix_and_after_its_last_try(aws: Any) -> None:
    sagemaker_endpoint(aws, "dpd-test", tags=[])
    for code, times, slept in (("AccessDeniedException", 1, []), ("ThrottlingException", 100, [2.0, 4.0, 8.0, 16.0])):
        clients = Recorded(aws)
        clients.fail("DescribeEndpoint", code, "no", times=times)
        clock = FakeClock()
        with pytest.raises(ClientError, match=code):
            handler.on_event(delete_event(EndpointNames=["dpd-test"]), clock=clock, clients=clients,
                             sleep=clock.sleep)
        assert clock.slept == slept


@pytest.mark.parametrize(("error", "passes"), [
    (EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com"), True),
    (ConnectTimeoutError(endpoint_url="https://ec2.us-west-2.amazonaws.com"), True),
    (ReadTimeoutError(endpoint_url="https://ec2.us-west-2.amazonaws.com"), True),
    (ConnectionClosedError(endpoint_url="https://ec2.us-west-2.amazonaws.com"), True),
    (ParamValidationError(report="Missing required parameter"), False),
    (NoRegionError(), False),
    (NoCredentialsError(), False),
])
def test_only_network_errors_of_botocore_are_transient(error: Exception, passes: bool) -> None:
    assert handler.transient(error) is passes


def test_a_programming_error_in_a_poll_fails_at_once(aws: Any) -> None:
    operator_resources(aws)
    clock = FakeClock()
    event = start(aws, clock, delete_event())

    def broken(service: str) -> Any:
        client = aws(service)
        if service == "elbv2":
            def invalid(**_: Any) -> None:
                raise ParamValidationError(report="Unknown parameter in input")
            client.delete_load_balancer = invalid
        return client

    with pytest.raises(RuntimeError, match=r"(?s)cannot go on .*Unknown parameter"):
        handler.is_complete(event, clock=clock, clients=broken)


def test_a_backend_group_held_by_a_load_balancer_of_an_unknown_stack_names_it_at_the_deadline(aws: Any) -> None:
    """T8: were the operator's Ingress named otherwise (or in an IngressGroup), its ALB carries a stack tag the
    barrier does not look for; on a cluster the stack created the barrier waits on the backend group the ALB
    holds. The failure names the ALB's interface, not just the group."""
    made = operator_resources(aws, stack="hyperpod-inference-system/some-group")
    backend = backend_group(aws, made["vpc"])
    subnet = aws("ec2").describe_subnets(Filters=[{"Name": "vpc-id", "Values": [made["vpc"]]}])["Subnets"][0]
    eni = aws("ec2").create_network_interface(SubnetId=subnet["SubnetId"], Groups=[backend],
                                              Description="ELB app/k8s-somegroup/0123456789abcdef")
    clients = Recorded(aws)
    clients.fail("DeleteSecurityGroup", "DependencyViolation", f"resource {backend} has a dependent object",
                 times=100)
    clock = FakeClock()
    event = start(clients, clock, delete_event(DeadlineSeconds=60))
    assert handler.is_complete(event, clock=clock, clients=clients) == {"IsComplete": False}
    clock.sleep(60)
    with pytest.raises(RuntimeError) as failure:
        handler.is_complete(event, clock=clock, clients=clients)
    message = str(failure.value)
    interface = eni["NetworkInterface"]["NetworkInterfaceId"]
    assert f"{backend} is still used by {interface} (ELB app/k8s-somegroup/0123456789abcdef)" in message
    assert f"looks for the ingress.k8s.aws/stack tags {STACK}" in message
    assert made["balancer"] in names(aws)[0], "a load balancer of another stack tag is never deleted"
