"""``hyperpod-dpd preflight`` and ``verify`` in-process, with the AWS and Kubernetes seams replaced."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from hyperpod_dpd.cli import main
from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.kube import KubeError
from hyperpod_dpd.clients.seams import AwsSession, Seams
from hyperpod_dpd.ops import verify


class _Plan:
    warnings: list[str] = []


def _plan(spec: Any, architecture: Any = None) -> _Plan:
    return _Plan()


def _given(made: AwsClients) -> AwsSession:
    """The AWS seam that hands out ``made`` whatever the region and profile."""

    def clients(region: str | None, profile: str | None, *, fallback_region: str | None = None) -> AwsClients:
        return made

    return clients


@pytest.fixture
def use_clients(stubs: Any, fakes: Any, aws: None) -> Any:
    return fakes.clients_with(stubs)


@pytest.fixture
def preflight_seams(use_clients: Any) -> Seams:
    """The stubbed AWS clients and a planner that finds nothing."""
    return Seams(aws_clients=_given(use_clients), planner=_plan)


def _zone_id() -> str:
    import boto3

    zones = boto3.client("ec2", region_name="us-west-2").describe_availability_zones()["AvailabilityZones"]
    return str(zones[0]["ZoneId"])


# --- preflight -------------------------------------------------------------------------------------


def test_preflight_all_pass(preflight_seams: Seams, stubs: Any, fakes: Any,
                            capsys: pytest.CaptureFixture[str]) -> None:
    fakes.upload_model(fakes.sharded_model(2))
    stubs.quota(4.0)
    stubs.clusters({"ClusterName": "HyperPodDpd-hp"})  # the stack's own cluster: not described, not counted
    stubs.addons_offered()
    assert main(["preflight", "--availability-zone-id", _zone_id()], seams=preflight_seams) == 0
    text = capsys.readouterr().out
    assert ("the spec needs 2 (0 already in use by HyperPod clusters in the region; HyperPodDpd-hp, which this "
            "deploy updates, not counted)") in text
    out = text.splitlines()
    assert out[0] == "preflight for default/dpd-test: account 123456789012, region us-west-2, 2 x ml.p5.48xlarge"
    assert out[1].split() == ["CHECK", "STATUS", "DETAIL"]
    rows = {line[:17].strip(): line[19:25].strip() for line in out[2:] if line[:1] != " "}
    assert rows == {"spec": "PASS", "planner": "PASS", "service quota": "PASS", "availability zone": "PASS",
                    "model weights": "PASS", "add-on versions": "PASS", "existing add-ons": "SKIP"}


def test_preflight_exits_1_when_a_check_fails(preflight_seams: Seams, stubs: Any, fakes: Any,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    fakes.upload_model(fakes.sharded_model(2))
    stubs.quota(1.0)
    stubs.clusters()
    stubs.addons_offered(missing="metrics-server")
    assert main(["preflight", "--availability-zone-id", "usw2-az9", "--json"], seams=preflight_seams) == 1
    report = json.loads(capsys.readouterr().out)
    statuses = {row["check"]: row["status"] for row in report["checks"]}
    assert statuses == {"spec": "PASS", "planner": "PASS", "service quota": "FAIL", "availability zone": "FAIL",
                        "model weights": "PASS", "add-on versions": "FAIL", "existing add-ons": "SKIP"}
    versions = next(row["detail"] for row in report["checks"] if row["check"] == "add-on versions")
    assert "metrics-server (none for 1.34)" in versions
    assert (report["account"], report["region"], report["instances"]) == ("123456789012", "us-west-2", 2)


def test_preflight_add_on_rows_skip_without_eks_permission_and_opt_out(
        preflight_seams: Seams, stubs: Any, fakes: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fakes.upload_model(fakes.sharded_model(2))
    stubs.quota(4.0)
    stubs.clusters()
    stubs.eks_stub.add_client_error("describe_addon_versions", "AccessDeniedException", "not authorized")
    stubs.eks_stub.add_client_error("list_addons", "AccessDeniedException", "not authorized")
    assert main(["preflight", "--availability-zone-id", _zone_id(), "--eks-cluster", "platform", "--json"],
                seams=preflight_seams) == 0
    rows = {row["check"]: row for row in json.loads(capsys.readouterr().out)["checks"]}
    assert rows["add-on versions"]["status"] == rows["existing add-ons"]["status"] == "SKIP"
    assert "the caller needs eks:DescribeAddonVersions (or pass --no-addon-check)" in rows["add-on versions"]["detail"]
    assert "the caller needs eks:ListAddons" in rows["existing add-ons"]["detail"]
    assert {rows[name]["status"] for name in ("service quota", "availability zone", "model weights")} == {"PASS"}

    stubs.quota(4.0)
    stubs.clusters()
    assert main(["preflight", "--availability-zone-id", _zone_id(), "--no-addon-check", "--json"],
                seams=preflight_seams) == 0
    names = [row["check"] for row in json.loads(capsys.readouterr().out)["checks"]]
    assert names == ["spec", "planner", "service quota", "availability zone", "model weights"]

    stubs.quota(4.0)
    stubs.clusters()
    stubs.addons_offered()
    assert main(["preflight", "--availability-zone-id", _zone_id(), "--check-addons", "--json"],  # no-op
                seams=preflight_seams) == 0
    assert "add-on versions" in [row["check"] for row in json.loads(capsys.readouterr().out)["checks"]]


def test_preflight_cluster_instances_option(preflight_seams: Seams, stubs: Any,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    stubs.quota(4.0)
    stubs.clusters()
    stubs.addons_offered()
    assert main(["preflight", "--cluster-instances", "5"],
                seams=preflight_seams) == 1  # 5 > 4, and the bucket is missing
    out = capsys.readouterr().out
    assert "'ml.p5.48xlarge for cluster usage' (L-6A2BEAB4) = 4; the spec needs 5 " in out
    assert "availability zone  PASS    usw2-az2 (the CDK app's default availability_zone_id) is us-west-2" in out


def test_preflight_without_credentials_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["preflight", "--region", "us-west-2"]) == 2
    captured = capsys.readouterr()
    assert captured.err == ("hyperpod-dpd: no AWS credentials found: set AWS_PROFILE or pass --profile, run "
                            "`aws configure` or `aws sso login`\n")
    assert captured.out == ""


def test_preflight_with_an_unknown_profile_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "--profile", "nope"]) == 2
    assert capsys.readouterr().err.startswith("hyperpod-dpd: The config profile (nope) could not be found: check")


def test_preflight_rejects_a_zero_instance_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["preflight", "--cluster-instances", "0"])
    assert exited.value.code == 2
    assert "must be at least 1, got 0" in capsys.readouterr().err


def test_session_clients_need_a_region(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.clients.aws import AwsUnavailable, session_clients

    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    with pytest.raises(AwsUnavailable, match=r"^no AWS region: pass --region"):
        session_clients(None, None)
    assert session_clients(None, None, fallback_region="eu-north-1").region == "eu-north-1"


# --- verify ----------------------------------------------------------------------------------------


@pytest.fixture
def seams(use_clients: Any, make_kube: Any, fake_clock: Any) -> Any:
    """A recorded cluster for ``main(argv, seams=...)``: ``seams(answers, transport=..., logs=...)``."""

    def recorded(answers: Any = None, **kwargs: Any) -> Seams:
        kube, _ = make_kube(answers, **kwargs)
        return Seams(aws_clients=_given(use_clients), kube_api=lambda context, kubeconfig: kube, clock=fake_clock,
                     sleep=fake_clock.sleep)

    return recorded


def _cluster_ok(stubs: Any, fakes: Any) -> None:
    stubs.describe("dpd")
    stubs.nodes("dpd", [fakes.node("workers", "ml.p5.48xlarge", 1), fakes.node("workers", "ml.p5.48xlarge", 2)])


def test_verify_restart_drill_through_the_seams(seams: Any, stubs: Any, fakes: Any,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The drill's delete goes through the kube seam like every read: the recorded cluster replaces the pod."""
    stubs.clusters({"ClusterName": "dpd"})
    _cluster_ok(stubs, fakes)
    stubs.load_balancer()
    stubs.endpoint("dpd-test")
    log: list[str] = []
    transport = fakes.FakeTransport(respond=lambda body: fakes.sse("Blue"), log=log)
    live = seams(transport=transport, logs={"dpd-test-default-router-6f8d-klmno": log})
    code = main(["verify", "--restart-drill"], seams=live)
    captured = capsys.readouterr()
    assert "restarting one prefill pod, then proving the KV transfer again..." in captured.err
    (row,) = [line for line in captured.out.splitlines() if line.startswith("restart drill")]
    assert "PASS" in row and "deleted prefill-dpd-test-7d9f-abcde; replaced by prefill-dpd-test-7d9f-rplcd" in row
    assert code == 0, captured.out


@pytest.mark.parametrize("flag", ["--smoke", "--correctness"])
def test_verify_everything_ready_with_smoke(seams: Any, stubs: Any, fakes: Any, flag: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    stubs.clusters({"ClusterName": "dpd"})
    _cluster_ok(stubs, fakes)
    ec2 = fakes.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.192.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="k8s-hyperpod-albdpdte", Description="alb", VpcId=vpc)["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    stubs.load_balancer(security_groups=(group,))
    stubs.endpoint("dpd-test")
    log: list[str] = []
    transport = fakes.FakeTransport(respond=lambda body: fakes.sse("Blue"), log=log)
    live = seams(transport=transport, logs={"dpd-test-default-router-6f8d-klmno": log})
    assert main(["verify", flag], seams=live) == 0
    captured = capsys.readouterr()
    out = captured.out
    correctness = ["sending the correctness prompts through dpd-test-default-routing-service and a decode pod..."]
    assert captured.err.splitlines() == [
        "note: guessed from the spec: hyperpod cluster the only HyperPod cluster in the region, else HyperPodDpd-hp; "
        "endpoint default/dpd-test; router hyperpod-inference-system/dpd-test-default-routing-service. Pass --stack "
        "NAME or --outputs-file FILE to use what the stack deployed",
        "sending the short prompt (~12-14 tokens) through dpd-test-default-routing-service...",
        "sending the long prompt (~4180-4703 tokens) through dpd-test-default-routing-service...",
        *(correctness if flag == "--correctness" else [])]
    rows = [line.split("  ")[0] for line in out.splitlines()[2:] if not line.startswith(" ")]
    assert rows == ["hyperpod cluster", "endpoint config", "prefill", "decode", "router", "operator CRD", "kv roles",
                    "load balancer", "alb", "sagemaker", "network policy", "amp workspace",
                    "smoke: short prompt", "smoke: long prompt", "smoke: alert inputs",
                    *(["smoke: same answers"] if flag == "--correctness" else [])]
    pod_posts = [request for request in transport.requests if request[1].startswith("decode-")]
    assert len(pod_posts) == (3 if flag == "--correctness" else 0)
    assert "FAIL" not in out and "ERROR" not in out
    assert f"{group} tcp/443 from 0.0.0.0/0 (VPC-wide" in out
    assert "path prefill -> decode" in out and "path decode only" in out


def test_verify_times_out_naming_what_is_not_ready(seams: Any, stubs: Any, fakes: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _cluster_ok(stubs, fakes)
    live = seams(fakes.healthy_cluster() | {
        ("deployments", "default", "decode-dpd-test"): fakes.deployment("decode-dpd-test", "default", 0),
        ("pods", "default", fakes.DECODE_SELECTOR): fakes.pod_list(
            fakes.pod("decode-dpd-test-1", "default", "decode", 2))})
    assert main(["verify", "--cluster-name", "dpd", "--timeout", "60", "--poll-interval", "20", "--smoke"],
                seams=live) == 1
    captured = capsys.readouterr()
    note, *progress, final = captured.err.splitlines()
    assert note.startswith("note: guessed from the spec: endpoint default/dpd-test;")
    assert len(progress) == 3 and progress[0].startswith("waiting    0s/60s: decode (deployment decode-dpd-test")
    assert final.startswith("hyperpod-dpd: timed out after 60s; still not ready: decode. Next: a pod stuck at 2/3 "
                            "Ready is vLLM still loading the model")
    assert final.endswith("`kubectl logs <pod> -c decode-dpd-test | grep -i 'engine\\|loading'`")
    assert "decode-dpd-test-1: Running, 2/3 ready (vLLM still loading the model" in captured.out
    assert "smoke: short prompt  SKIP    the endpoint is not ready (decode), so no prompt was sent" in captured.out
    assert "smoke: alert inputs  SKIP    the endpoint is not ready (decode)" in captured.out
    assert "kv roles             SKIP    the prefill and decode pods are not ready" in captured.out


def test_verify_no_wait_reports_once(seams: Any, stubs: Any, fakes: Any, fake_clock: Any,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    _cluster_ok(stubs, fakes)
    live = seams(fakes.healthy_cluster() | {("inferenceendpointconfigs", "default", "dpd-test"):
                                            fakes.endpoint_config("DeploymentInProgress")})
    assert main(["verify", "--cluster-name", "dpd", "--no-wait", "--json"], seams=live) == 1
    report = json.loads(capsys.readouterr().out)
    assert {row["check"]: row["status"] for row in report["checks"]}["endpoint config"] == "FAIL"
    assert fake_clock.slept == []


def _without_routing_threshold() -> dict[str, Any]:
    """The live CRD of an operator that dropped ``spec.pdSpec.routingThreshold``, which the chart renders."""
    import copy

    from hyperpod_dpd.contracts.crd import v1_schema

    schema = copy.deepcopy(v1_schema())
    del schema["properties"]["spec"]["properties"]["pdSpec"]["properties"]["routingThreshold"]
    return schema


@pytest.mark.parametrize("case", [
    (None, [], "PASS", "the live CRD has exactly the fields of the shipped one"),
    (None, ["--crd-diff"], "PASS", "the live CRD has exactly the fields of the shipped one"),
    ("dropped", [], "FAIL", "the live CRD lacks 1 field(s) the manifest sets: spec.pdSpec.routingThreshold; "),
    ("forbidden", [], "SKIP", "it needs RBAC get on customresourcedefinitions.apiextensions.k8s.io (cluster-scoped)"),
    ("dropped", ["--no-crd-diff"], None, ""),
], ids=["matching", "old-flag", "lacks-a-rendered-field", "no-rbac", "opted-out"])
def test_verify_compares_the_live_crd_by_default(seams: Any, stubs: Any, fakes: Any,
                                                 case: tuple[str | None, list[str], str | None, str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.ops.crd_diff import CRD_NAME

    answer, options, status, detail = case
    _cluster_ok(stubs, fakes)
    live = {None: fakes.live_crd(), "dropped": fakes.live_crd(_without_routing_threshold()),
            "forbidden": fakes.api_error(403, "cannot get customresourcedefinitions")}[answer]
    main(["verify", "--cluster-name", "dpd", "--no-wait", "--json", *options],
         seams=seams(fakes.healthy_cluster() | {("customresourcedefinitions", CRD_NAME): live}))
    rows = {row["check"]: row for row in json.loads(capsys.readouterr().out)["checks"]}
    assert {rows[name]["status"] for name in ("endpoint config", "prefill", "decode", "router")} == {"PASS"}
    if status is None:
        assert "operator CRD" not in rows
        return
    assert rows["operator CRD"]["status"] == status
    assert detail in rows["operator CRD"]["detail"]


def test_verify_without_a_kubeconfig_still_reports_the_cluster(seams: Any, stubs: Any, fakes: Any,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _cluster_ok(stubs, fakes)

    def no_kubeconfig(context: str | None, kubeconfig: str | None) -> Any:
        raise KubeError("cannot load the kubeconfig (the current context): Invalid kube-config file")

    assert main(["verify", "--cluster-name", "dpd"], seams=dataclasses.replace(seams(), kube_api=no_kubeconfig)) == 1
    out = capsys.readouterr().out
    assert "kubernetes        ERROR   cannot load the kubeconfig (the current context)" in out
    assert "hyperpod cluster  PASS    dpd: InService" in out


def test_verify_with_expired_aws_credentials_reports_an_error_row(seams: Any, stubs: Any,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    stubs.sagemaker_stub.add_client_error("describe_cluster", "ExpiredTokenException", "expired", 400)
    assert main(["verify", "--cluster-name", "dpd"], seams=seams()) == 1
    assert ("hyperpod cluster  ERROR   the AWS credentials have expired: refresh them (for example `aws sso login`) "
            "and retry") in capsys.readouterr().out


def test_preflight_with_expired_credentials_is_exit_2(stubs: Any, fakes: Any,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import boto3
    from botocore.stub import Stubber

    sts = boto3.client("sts", region_name="us-west-2", aws_access_key_id="a", aws_secret_access_key="b")
    stub = Stubber(sts)
    stub.add_client_error("get_caller_identity", "ExpiredToken", "The security token included in the request is "
                                                                 "expired", 403)
    stub.activate()
    made = fakes.clients_with(stubs, sts=sts)
    assert main(["preflight"], seams=Seams(aws_clients=_given(made))) == 2
    assert capsys.readouterr().err == ("hyperpod-dpd: the AWS credentials have expired: refresh them (for example "
                                       "`aws sso login`) and retry\n")


def test_verify_without_aws_credentials_still_checks_kubernetes(seams: Any,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from hyperpod_dpd.clients.aws import AwsUnavailable

    def unavailable(region: str | None, profile: str | None, fallback_region: str | None = None) -> Any:
        raise AwsUnavailable("no AWS region: pass --region or set AWS_REGION (or a region in the profile)")

    assert main(["verify"], seams=dataclasses.replace(seams(), aws_clients=unavailable)) == 1
    out = capsys.readouterr().out
    assert "hyperpod cluster  ERROR   no AWS region: pass --region" in out
    assert "router            PASS    deployment" in out


def test_verify_fails_on_an_internet_facing_ingress(seams: Any, stubs: Any, fakes: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _cluster_ok(stubs, fakes)
    public = fakes.ingress(scheme="internet-facing", hostname=fakes.PUBLIC_ALB_HOSTNAME)
    live = seams(fakes.healthy_cluster() | {("ingresses", "hyperpod-inference-system", "alb-dpd-test-default"): public})
    stubs.load_balancer(fakes.PUBLIC_ALB_HOSTNAME, scheme="internet-facing")
    stubs.endpoint("dpd-test")
    assert main(["verify", "--cluster-name", "dpd", "--json"], seams=live) == 1
    rows = {row["check"]: row["status"] for row in json.loads(capsys.readouterr().out)["checks"]}
    assert (rows["load balancer"], rows["alb"], rows["router"]) == ("FAIL", "FAIL", "PASS")


def test_correctness_asks_the_aggregated_twin_when_the_stack_hosts_one(make_kube: Any, fakes: Any, spec: Any) -> None:
    from hyperpod_dpd.clients.checks import passed

    transport = fakes.FakeTransport(respond=lambda body: fakes.sse("Blue"), log=[])
    kube, _ = make_kube(transport=transport, logs={"dpd-test-default-router-6f8d-klmno": transport.log})
    ready = [passed(name, "") for name in ("endpoint config", "prefill", "decode", "router")]
    rows = verify._smoke(kube, spec, ready, 60.0, quiet=True, clock=time.monotonic, correctness=True,
                         twin_service="dpd-test-agg-default-routing-service")
    assert (rows[-1].name, rows[-1].status.value) == ("smoke: same answers", "PASS")
    assert [request[1] for request in transport.requests[-6:]] == [
        "dpd-test-default-routing-service", "dpd-test-agg-default-routing-service"] * 3
    skipped = verify._smoke(None, spec, [], 60.0, quiet=True, clock=time.monotonic, correctness=True)
    assert [row.name for row in skipped][-1] == "smoke: same answers" and skipped[-1].status.value == "SKIP"
