"""The delete-time barrier's handler (assets/teardown/index.py) against moto: leftovers that go away,
leftovers that never do (a clear failure with ids and commands), and a cluster that is already gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
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


def operator_resources(clients: Any, *, tag_value: str = CLUSTER) -> dict[str, str]:
    """What the ALB controller makes for an Ingress (tags per its docs), in a fresh VPC."""
    ec2, elbv2 = clients("ec2"), clients("elbv2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"{REGION}{z}")["Subnet"]
               ["SubnetId"] for i, z in enumerate("ab")]
    tags = [{"Key": handler.ALB_CLUSTER_TAG, "Value": tag_value}]
    group = ec2.create_security_group(GroupName="k8s-traffic-dpd", Description="backend", VpcId=vpc,
                                      TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}])["GroupId"]
    balancer = elbv2.create_load_balancer(Name="k8s-dpd", Subnets=subnets, Tags=tags)["LoadBalancers"][0]
    target = elbv2.create_target_group(Name="k8s-dpd-tg", Protocol="HTTP", Port=8080, VpcId=vpc, Tags=tags,
                                       TargetType="ip")["TargetGroups"][0]
    return {"vpc": vpc, "group": group, "balancer": balancer["LoadBalancerArn"], "target": target["TargetGroupArn"]}


def delete_event(**props: Any) -> dict[str, Any]:
    return {"RequestType": "Delete", "PhysicalResourceId": "teardown-operator",
            "ResourceProperties": {"Kind": "operator", "ClusterName": CLUSTER, "EndpointNames": [],
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
    for v in (vpc, other):
        ec2.create_vpc_endpoint(VpcId=v, ServiceName=f"com.amazonaws.{REGION}.guardduty-data",
                                VpcEndpointType="Interface", SecurityGroupIds=[groups[v]])
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
