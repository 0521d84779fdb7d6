"""Reading what a stack deployed: the outputs file of `cdk deploy --outputs-file`, and DescribeStacks."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from hyperpod_dpd import SpecError, UsageError
from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.aws import AwsClients, AwsUnavailable, describe_stack, read_stack
from hyperpod_dpd.contracts.stack_outputs import (
    DeployedSource,
    DeployedStack,
    endpoint_output,
    endpoint_output_key,
    from_outputs,
    read_outputs_file,
)

ENDPOINT = endpoint_output(
    name="dpd-test", namespace="team", router_service="dpd-test-team-routing-service",
    router_namespace="hyperpod-inference-system", instance_groups={"prefill": "g-p", "decode": "g-d"},
    model={"bucket": "team-weights", "prefix": "llama", "region": "us-east-2"},
    benchmark={"serviceAccount": "bench-sa", "roleArn": "arn:aws:iam::111122223333:role/bench"}, aggregated=None)
OUTPUTS = {"Region": "us-east-2", "EksClusterName": "eks-1", "HyperPodClusterName": "hp-1",
           "HyperPodClusterArn": "arn:aws:sagemaker:us-east-2:111122223333:cluster/abc",
           "ModelBucketName": "team-weights",
           "SystemNodeSelector": "none", endpoint_output_key("dpd-test"): json.dumps(ENDPOINT)}


def _file(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(data))
    return path


def test_outputs_are_read_into_one_value() -> None:
    deployed = from_outputs("Team", OUTPUTS, source="test")
    endpoint = deployed.endpoint("dpd-test")
    assert (deployed.region, deployed.hyperpod_cluster_name, deployed.system_node_selector) == ("us-east-2", "hp-1", {})
    assert endpoint.model is not None and (endpoint.model.bucket, endpoint.model.prefix) == ("team-weights", "llama")
    assert (endpoint.benchmark_service_account, endpoint.aggregated) == ("bench-sa", None)


def test_the_only_stack_of_a_file_needs_no_name(tmp_path: Path) -> None:
    assert read_outputs_file(_file(tmp_path, {"Team": OUTPUTS})).stack_name == "Team"


@pytest.mark.parametrize(("data", "stack", "field", "fragment"), [
    ({"A": OUTPUTS, "B": OUTPUTS}, None, "--stack", "holds 2 stacks (A, B)"),
    ({"A": OUTPUTS}, "B", "--stack", "is not in"),
    ({"A": {**OUTPUTS, "Region": ""}}, None, "--outputs-file", "has no output Region"),
    ({"A": {k: v for k, v in OUTPUTS.items() if not k.startswith("DpdEndpoint")}}, None, "--outputs-file",
     "has no endpoint outputs"),
    ({"A": {**OUTPUTS, endpoint_output_key("dpd-test"): "{\"schema\": 9}"}}, None, "--outputs-file",
     "cannot read"),
    ([1, 2], None, "--outputs-file", "is not {stack name"),
    ({}, None, "--outputs-file", "holds no stack outputs ({})"),  # was "--stack: is needed", whose fix misled
])
def test_a_wrong_outputs_file_names_the_option(tmp_path: Path, data: object, stack: str | None, field: str,
                                               fragment: str) -> None:
    with pytest.raises(SpecError) as error:
        read_outputs_file(_file(tmp_path, data), stack=stack)
    (problem,) = error.value.problems
    assert problem.field == field
    assert fragment in problem.message


def test_describe_stack_reads_the_outputs() -> None:
    client = boto3.client("cloudformation", region_name="us-east-2", aws_access_key_id="a", aws_secret_access_key="b")
    clients = AwsClients(region="us-east-2", factory=lambda service, region_name: client)
    stack = {"StackName": "Team", "CreationTime": "2026-01-01T00:00:00Z", "StackStatus": "CREATE_COMPLETE",
             "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()]}
    with Stubber(client) as stub:
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "Team"})
        stub.add_client_error("describe_stacks", "ValidationError", "Stack with id Gone does not exist", 400,
                              expected_params={"StackName": "Gone"})
        deployed: DeployedStack = describe_stack(clients, "Team")
        with pytest.raises(SpecError) as error:
            describe_stack(clients, "Gone")
    assert deployed.source == "stack Team in us-east-2"
    assert deployed.endpoint("dpd-test").namespace == "team"
    assert error.value.problems[0].message == "does not exist in us-east-2"


def test_a_source_is_read_as_the_commands_read_it(tmp_path: Path) -> None:
    """No source, no AWS call; a file before the stack it names; a problem said as ``--outputs-file``/``--stack``."""
    def no_aws(region: str | None, profile: str | None) -> AwsClients:
        raise AwsUnavailable(f"no AWS here ({region}, {profile})")

    assert read_stack(DeployedSource(), no_aws) is None
    path = _file(tmp_path, {"Team": OUTPUTS})
    found = read_stack(DeployedSource(outputs_file=str(path), stack="Team"), no_aws)
    assert found is not None and found.stack_name == "Team"
    with pytest.raises(UsageError) as missing:
        read_stack(DeployedSource(outputs_file=str(tmp_path / "none.json")), no_aws)
    assert str(missing.value).startswith("cannot read the deployed stack:\n  - --outputs-file: cannot be read")
    with pytest.raises(UsageError, match=r"^--stack Team: no AWS here \(eu-west-1, ops\)$"):
        read_stack(DeployedSource(stack="Team", region="eu-west-1", profile="ops"), no_aws)


def test_bench_with_the_stack_uses_its_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """bench audit D1/D2: the deployed bucket, and no system-pool selector on a cluster without that pool."""
    from hyperpod_dpd.clients.seams import Seams

    client = boto3.client("cloudformation", region_name="us-east-2", aws_access_key_id="a", aws_secret_access_key="b")
    stub = Stubber(client)
    stub.add_response("describe_stacks", {"Stacks": [{
        "StackName": "Team", "CreationTime": "2026-01-01T00:00:00Z", "StackStatus": "CREATE_COMPLETE",
        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()]}]}, {"StackName": "Team"})
    seams = Seams(aws_clients=lambda region, profile: AwsClients(
        region=region or "us-east-2", factory=lambda service, region_name: client))
    with stub:
        assert main(["bench", "--stack", "Team", "--render", str(tmp_path), "--run-id", "r"], seams=seams) == 0
    text = next(tmp_path.glob("*.yaml")).read_text()
    assert "s3://team-weights/llama/" in text and "dpd-models-example" not in text
    assert "hyperpod-dpd/pool" not in text  # SystemNodeSelector none: an existing cluster's CPU nodes
    assert "namespace: team" in text and "name: bench-sa" in text
    assert "(from the stack)" in capsys.readouterr().err


def test_aggregated_without_a_twin_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, {"Team": OUTPUTS})
    assert main(["bench", "--outputs-file", str(path), "--aggregated", "--render", str(tmp_path / "out")]) == 2
    assert "deploy with -c aggregated_baseline=true" in capsys.readouterr().err
