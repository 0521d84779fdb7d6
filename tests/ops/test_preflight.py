"""preflight checks one by one: each passes, fails and errors with its message asserted."""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any

import boto3
import pytest
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber

from hyperpod_dpd.clients.aws import AwsClients
from hyperpod_dpd.clients.checks import Status
from hyperpod_dpd.contracts.zones import ZoneSetting
from hyperpod_dpd.errors import Problem, SpecError
from hyperpod_dpd.ops import preflight
from hyperpod_dpd.ops.preflight import (
    check_availability_zone,
    check_model_source,
    check_quota,
    check_spec,
    instances_needed,
)
from hyperpod_dpd.spec import AutoscalingSpec, DpdSpec, HuggingFaceSource, ModelSpec, Resources, S3Source

# --- instance counts -------------------------------------------------------------------------------


def test_instances_needed_counts_one_node_per_pod_and_the_autoscaling_maximum(spec: DpdSpec) -> None:
    assert instances_needed(spec) == 2
    scaled = dataclasses.replace(spec, prefill=dataclasses.replace(
        spec.prefill, replicas=2, autoscaling=AutoscalingSpec(min_replicas=1, max_replicas=3)))
    assert instances_needed(scaled) == 4


def test_instances_needed_packs_smaller_pods_onto_nodes(spec: DpdSpec) -> None:
    half = dataclasses.replace(spec, prefill=dataclasses.replace(spec.prefill, replicas=3,
                                                                 resources=Resources(gpus=4)))
    assert instances_needed(half) == 2 + 1  # three 4-GPU prefill pods need two 8-GPU nodes


# --- service quota ---------------------------------------------------------------------------------


def test_quota_passes_when_it_covers_the_spec_and_what_is_in_use(clients: AwsClients, stubs: Any,
                                                                 spec: DpdSpec, fakes: Any) -> None:
    stubs.quota(4.0)
    stubs.clusters({"ClusterName": "training"})
    stubs.describe("training", groups=[fakes.group("gpu", "ml.p5.48xlarge", 2)])
    check = check_quota(clients, spec)
    assert check.status is Status.PASS
    assert check.detail == ("'ml.p5.48xlarge for cluster usage' (L-6A2BEAB4) = 4; the spec needs 2 + 2 in use = 4 "
                            "(2 already in use by HyperPod clusters in the region)")


def test_quota_fails_when_too_low_and_names_the_increase(clients: AwsClients, stubs: Any, spec: DpdSpec) -> None:
    stubs.quota(1.0)
    stubs.clusters()
    check = check_quota(clients, spec)
    assert check.status is Status.FAIL
    assert check.detail.startswith("'ml.p5.48xlarge for cluster usage' (L-6A2BEAB4) = 1; the spec needs 2 ")
    assert check.detail.endswith("request an increase to at least 2 in the Service Quotas console "
                                 "(service SageMaker, quota L-6A2BEAB4)")


def test_quota_counts_instances_of_other_clusters_but_not_the_one_being_updated(
        clients: AwsClients, stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    stubs.quota(3.0)
    stubs.clusters({"ClusterName": "mine"}, {"ClusterName": "other"})
    stubs.describe("other", groups=[fakes.group("gpu", "ml.p5.48xlarge", 2), fakes.group("cpu", "ml.m5.xlarge", 9)])
    check = check_quota(clients, spec, existing_cluster="mine")
    assert check.status is Status.FAIL
    assert check.detail.startswith("'ml.p5.48xlarge for cluster usage' (L-6A2BEAB4) = 3; the spec needs 2 + 2 in "
                                   "use = 4 (2 already in use by HyperPod clusters in the region; mine, which this "
                                   "deploy updates, not counted)")
    stubs.sagemaker_stub.assert_no_pending_responses()


def test_quota_honours_cluster_instances_and_survives_unknown_use(clients: AwsClients, stubs: Any,
                                                                  spec: DpdSpec) -> None:
    stubs.quota(6.0)
    stubs.sagemaker_stub.add_client_error("list_clusters", "AccessDeniedException", "no", 400)
    check = check_quota(clients, spec, instances=6)
    assert check.status is Status.PASS
    assert "the spec needs 6 (instances already in use unknown (access denied on ListClusters))" in check.detail


def test_quota_falls_back_to_the_aws_default(clients: AwsClients, stubs: Any, spec: DpdSpec) -> None:
    stubs.quotas_stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
    stubs.quotas_stub.add_response("list_aws_default_service_quotas", {"Quotas": [
        {"ServiceCode": "sagemaker", "QuotaName": "ML.P5.48XLARGE for cluster usage", "QuotaCode": "L-D",
         "Value": 0.0}]},
        {"ServiceCode": "sagemaker"})
    check = check_quota(clients, spec, count_in_use=False)
    assert check.status is Status.FAIL
    assert "(L-D) = 0; the spec needs 2 (instances in use not counted)" in check.detail


def test_quota_missing_in_the_region_fails(clients: AwsClients, stubs: Any, spec: DpdSpec) -> None:
    for operation in ("list_service_quotas", "list_aws_default_service_quotas"):
        stubs.quotas_stub.add_response(operation, {"Quotas": []}, {"ServiceCode": "sagemaker"})
    check = check_quota(clients, spec)
    assert check.status is Status.FAIL
    assert check.detail == ("no SageMaker quota named 'ml.p5.48xlarge for cluster usage' in us-west-2: HyperPod may "
                            "not offer ml.p5.48xlarge in this region; pick another region or instance type")


def test_quota_access_denied_is_an_error_naming_the_permission(clients: AwsClients, stubs: Any,
                                                               spec: DpdSpec) -> None:
    stubs.quotas_stub.add_client_error("list_service_quotas", "AccessDeniedException", "User is not authorized",
                                       400)
    check = check_quota(clients, spec)
    assert check.status is Status.ERROR
    assert check.detail == ("access denied on ListServiceQuotas; the caller needs "
                            "servicequotas:ListServiceQuotas")


def test_quota_expired_credentials_say_so(clients: AwsClients, stubs: Any, spec: DpdSpec) -> None:
    stubs.quotas_stub.add_client_error("list_service_quotas", "ExpiredTokenException", "expired", 400)
    check = check_quota(clients, spec)
    assert (check.status, check.detail) == (
        Status.ERROR, "the AWS credentials have expired: refresh them (for example `aws sso login`) and retry")


# --- availability zone ----------------------------------------------------------------------------


def test_availability_zone_found(clients: AwsClients) -> None:
    zone_id = boto3.client("ec2", region_name="us-west-2").describe_availability_zones()[
        "AvailabilityZones"][1]["ZoneId"]
    check = check_availability_zone(clients.ec2(), "us-west-2", zone_id)
    assert check.status is Status.PASS
    assert check.detail == f"{zone_id} is us-west-2b in us-west-2 (available)"


def test_a_pinned_zone_must_be_the_hyperpod_zone() -> None:
    """first-hour audit F4: a spec's zone name is compared with the AZ ID's name in this account."""
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="a", aws_secret_access_key="b")
    zones = {"AvailabilityZones": [{"ZoneId": "usw2-az2", "ZoneName": "us-west-2b", "State": "available"},
                                   {"ZoneId": "usw2-az1", "ZoneName": "us-west-2a", "State": "available"}]}
    elsewhere = [ZoneSetting(field="topology.availability_zone", value="us-west-2a", is_id=False),
                 ZoneSetting(field="decode.node_selector['topology.k8s.aws/zone-id']", value="usw2-az1", is_id=True)]
    here = [ZoneSetting(field="topology.availability_zone", value="us-west-2b", is_id=False)]
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", zones, {"AllAvailabilityZones": True})
        stub.add_response("describe_availability_zones", zones, {"AllAvailabilityZones": True})
        refused = check_availability_zone(ec2, "us-west-2", "usw2-az2", pinned=elsewhere)
        fine = check_availability_zone(ec2, "us-west-2", "usw2-az2", pinned=here)
    assert refused.status is Status.FAIL
    assert refused.detail == (
        "usw2-az2 is us-west-2b in us-west-2, but topology.availability_zone is 'us-west-2a'; "
        "decode.node_selector['topology.k8s.aws/zone-id'] is 'usw2-az1': those pods would never schedule on the "
        "HyperPod nodes. Fix: use us-west-2b (or usw2-az2 for topology.k8s.aws/zone-id), or leave it out")
    assert fine.status is Status.PASS


def test_availability_zone_missing_lists_the_region_ids(clients: AwsClients) -> None:
    check = check_availability_zone(clients.ec2(), "us-west-2", "use1-az4")
    assert check.status is Status.FAIL
    assert check.detail.startswith("use1-az4 is not an Availability Zone ID in us-west-2 (IDs there: usw2-az1, ")


def test_availability_zone_not_given_is_skipped(clients: AwsClients) -> None:
    check = check_availability_zone(clients.ec2(), "us-west-2", None)
    assert check.status is Status.SKIP
    assert "pass --availability-zone-id" in check.detail


def test_availability_zone_notes_the_ec2_offering(clients: AwsClients) -> None:
    check = check_availability_zone(clients.ec2(), "us-west-2", "usw2-az2", instance_type="ml.p5.48xlarge")
    assert check.status is Status.PASS
    assert check.detail.endswith("(available); EC2 offers p5.48xlarge there")


def test_availability_zone_without_an_ec2_offering_still_passes_with_a_note() -> None:
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="a", aws_secret_access_key="b")
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneId": "usw2-az4", "ZoneName": "us-west-2d", "State": "available"}]}, {"AllAvailabilityZones": True})
        stub.add_response("describe_instance_type_offerings", {"InstanceTypeOfferings": []})
        check = check_availability_zone(ec2, "us-west-2", "usw2-az4", instance_type="ml.p5.48xlarge",
                                        origin=" (the CDK app's default availability_zone_id)")
    assert check.status is Status.PASS
    assert check.detail.splitlines() == [
        "usw2-az4 (the CDK app's default availability_zone_id) is us-west-2d in us-west-2 (available)",
        "note: EC2 lists no p5.48xlarge offering in usw2-az4; HyperPod capacity may still exist (training plans), "
        "but check before deploying"]


def test_availability_zone_unavailable_fails() -> None:
    ec2 = boto3.client("ec2", region_name="us-west-2", aws_access_key_id="a", aws_secret_access_key="b")
    with Stubber(ec2) as stub:
        stub.add_response("describe_availability_zones", {"AvailabilityZones": [
            {"ZoneId": "usw2-az2", "ZoneName": "us-west-2b", "State": "impaired", "ZoneType": "availability-zone"}]},
            {"AllAvailabilityZones": True})
        check = check_availability_zone(ec2, "us-west-2", "usw2-az2")
    assert (check.status, check.detail) == (Status.FAIL, "usw2-az2 is us-west-2b in us-west-2 but its state is "
                                                         "'impaired'")


def test_availability_zone_without_credentials_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    ec2 = boto3.Session(region_name="us-west-2").client("ec2")
    check = check_availability_zone(ec2, "us-west-2", "usw2-az2")
    assert check.status is Status.ERROR
    assert check.detail.startswith("no AWS credentials found: set AWS_PROFILE or pass --profile")


# --- model weights in S3 --------------------------------------------------------------------------


def test_model_prefix_complete(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    fakes.upload_model(fakes.sharded_model(3))
    check = check_model_source(clients, spec)
    assert check.status is Status.PASS
    first, second = check.detail.splitlines()
    assert first == ("config.json, tokenizer.json, 3 safetensors file(s) (3.0 KiB), "
                     "model.safetensors.index.json")
    assert re.fullmatch(r"5\.\d KiB in 8 objects under s3://dpd-models-example/Llama-3.3-70B-Instruct/", second)


def test_model_prefix_single_file_needs_no_index(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    fakes.upload_model({"config.json": 10, "tokenizer.model": 10, "model.safetensors": 4096})
    check = check_model_source(clients, spec)
    assert check.status is Status.PASS
    assert check.detail.startswith("config.json, tokenizer.model, 1 safetensors file(s) (4.0 KiB); "
                                   "no tokenizer_config.json (no chat template)")


def test_model_prefix_missing_config(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    files = fakes.sharded_model(2)
    del files["config.json"]
    fakes.upload_model(files)
    check = check_model_source(clients, spec)
    assert check.status is Status.FAIL
    assert check.detail.splitlines()[0] == "missing config.json"


def test_model_prefix_missing_a_shard_listed_in_the_index(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    files = fakes.sharded_model(4)
    del files["model-00003-of-00004.safetensors"]
    fakes.upload_model(files)
    check = check_model_source(clients, spec)
    assert check.status is Status.FAIL
    assert check.detail.splitlines()[0] == ("1 shard(s) listed in model.safetensors.index.json are missing: "
                                            "model-00003-of-00004.safetensors")


def test_model_prefix_sharded_without_index_and_tokenizer(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    fakes.upload_model({"config.json": 1, "a.safetensors": 1, "b.safetensors": 1})
    check = check_model_source(clients, spec)
    assert check.status is Status.FAIL
    assert check.detail.splitlines()[0] == (
        "missing a tokenizer (tokenizer.json, tokenizer.model, tiktoken.model, tekken.json or vocab.json with "
        "merges.txt), model.safetensors.index.json (the weights are sharded into 2 files)")


@pytest.mark.parametrize(("files", "found"), [
    ({"vocab.json": 1, "merges.txt": 1}, "vocab.json, merges.txt"),  # GPT-2-style BPE, e.g. some Qwen checkpoints
    ({"tekken.json": 1}, "tekken.json"),
    ({"vocab.json": 1}, None),  # byte-level BPE needs its merges
])
def test_model_prefix_tokenizer_without_tokenizer_json(clients: AwsClients, spec: DpdSpec, fakes: Any,
                                                       files: dict[str, int], found: str | None) -> None:
    """Any vocabulary the benchmark pod copies is a tokenizer here too: one list (hyperpod_dpd.contracts.tokenizer)."""
    fakes.upload_model({"config.json": 1, "model.safetensors": 1, **files})
    check = check_model_source(clients, spec)
    if found is None:
        assert check.status is Status.FAIL and check.detail.startswith("missing a tokenizer (")
    else:
        assert check.status is Status.PASS and check.detail.startswith(f"config.json, {found}, 1 safetensors")


def test_model_prefix_with_only_pytorch_weights(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    fakes.upload_model({"config.json": 1, "tokenizer.json": 1, "pytorch_model.bin": 1})
    check = check_model_source(clients, spec)
    assert "missing *.safetensors weights (found pytorch_model.bin: vLLM here needs safetensors)" in check.detail


def test_model_prefix_empty(clients: AwsClients, spec: DpdSpec, fakes: Any) -> None:
    fakes.upload_model({"other.txt": 1}, prefix="elsewhere")
    check = check_model_source(clients, spec)
    assert (check.status, check.detail) == (Status.FAIL, "nothing under s3://dpd-models-example/"
                                            "Llama-3.3-70B-Instruct/: check model.source.s3.bucket and prefix")


def test_model_bucket_missing(clients: AwsClients, spec: DpdSpec) -> None:
    check = check_model_source(clients, spec)
    assert (check.status, check.detail) == (Status.FAIL, "bucket 'dpd-models-example' does not exist "
                                                         "(or not in this partition)")


def test_model_prefix_access_denied(aws: None, stubs: Any, spec: DpdSpec, fakes: Any) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    with Stubber(s3) as stub:
        stub.add_client_error("list_objects_v2", "AccessDenied", "Access Denied", 403)
        check = check_model_source(fakes.clients_with(stubs, s3=s3), spec)
    assert check.status is Status.ERROR
    assert check.detail == ("s3://dpd-models-example/Llama-3.3-70B-Instruct/: access denied on ListObjectsV2; "
                            "the caller needs s3:ListBucket and s3:GetObject")


def test_model_from_hugging_face_is_skipped(clients: AwsClients, spec: DpdSpec) -> None:
    hub = dataclasses.replace(spec, model=ModelSpec(name="m", source=HuggingFaceSource(model_id="meta/x")))
    check = check_model_source(clients, hub)
    assert (check.status, check.detail) == (Status.SKIP, "the model comes from huggingface, not S3; only S3 "
                                                         "prefixes are checked")


def test_model_bucket_unknown_before_deploy_is_skipped(clients: AwsClients, spec: DpdSpec) -> None:
    tokenized = dataclasses.replace(spec, model=dataclasses.replace(
        spec.model, source=S3Source(bucket="${Token[TOKEN.123]}", prefix="m")))
    check = check_model_source(clients, tokenized)
    assert check.status is Status.SKIP
    assert check.detail.startswith("the bucket is not known before deploy")


# --- spec and planner ------------------------------------------------------------------------------


@dataclasses.dataclass
class FakePlan:
    warnings: list[str]


def test_spec_and_planner_pass(spec: DpdSpec) -> None:
    seen: list[Any] = []

    def plan(spec: DpdSpec, architecture: Any = None, prompt_tokens: int | None = None) -> FakePlan:
        seen.append(architecture)
        return FakePlan(warnings=["decode KV cache is 70% full at 64 concurrent requests"])

    spec_row, planner_row = check_spec(spec, planner=plan)
    assert spec_row.status is Status.PASS and spec_row.detail.startswith("valid (")
    assert planner_row.status is Status.PASS
    assert planner_row.detail == "plan computed (1 warning)\ndecode KV cache is 70% full at 64 concurrent requests"
    assert seen and seen[0] is not None  # the validated architecture is handed to the planner


def test_spec_error_fails_and_skips_the_planner(spec: DpdSpec) -> None:
    broken = dataclasses.replace(spec, prefill=dataclasses.replace(spec.prefill, replicas=0))
    spec_row, planner_row = check_spec(broken, planner=lambda *a, **k: pytest.fail("planner ran"))
    assert spec_row.status is Status.FAIL
    assert spec_row.detail.startswith("prefill.replicas: must be at least 1")
    assert (planner_row.status, planner_row.detail) == (Status.SKIP, "the spec is invalid; fix the problems "
                                                                     "above first")


def _unsizable(*args: Any, **kwargs: Any) -> Any:
    raise SpecError([Problem(field="model.architecture", value=None, message="unknown architecture",
                             fix="name a preset or give the architecture")])


def test_planner_fails_when_the_architecture_is_unknown(spec: DpdSpec) -> None:
    unknown = dataclasses.replace(spec, model=dataclasses.replace(spec.model, name="my-finetune"))
    spec_row, planner_row = check_spec(unknown, planner=_unsizable)
    assert "[ArchitectureUnknown] model.architecture: no preset matches model name 'my-finetune'" in spec_row.detail
    assert planner_row.status is Status.FAIL
    assert planner_row.detail == (
        "the model architecture is unknown, so tensor parallelism, memory and KV sizing were not checked: "
        "model.architecture: unknown architecture (got None). Fix: name a preset or give the architecture. "
        "To check them, set model.architecture to a preset, to explicit fields or to {config_json: PATH}, or put the "
        "model's config.json beside the weights in S3")


def test_a_model_refused_by_name_skips_the_planner_row_with_the_reason(spec: DpdSpec) -> None:
    refused = dataclasses.replace(spec, model=dataclasses.replace(spec.model, name="gpt-oss-120b",
                                                                  architecture=None))
    spec_row, planner_row = check_spec(refused, planner=_unsizable,
                                       architecture_loader=lambda: pytest.fail("config.json read"))
    assert spec_row.status is Status.PASS
    assert "[ArchitectureUnknown] model.architecture: model 'gpt-oss-120b' cannot be sized" in spec_row.detail
    assert (planner_row.status, planner_row.detail) == (
        Status.SKIP, "the checks cannot run for this architecture, so tensor parallelism, memory and KV sizing stay "
        "unchecked: it cannot be sized with the dense-attention formula: it interleaves sliding-window (local) and "
        "global attention layers, so the KV cache per layer differs")


def test_planner_error_with_a_known_architecture_fails(spec: DpdSpec) -> None:
    _, planner_row = check_spec(spec, planner=_unsizable)
    assert planner_row.status is Status.FAIL
    assert planner_row.detail.startswith("model.architecture: unknown architecture")


def test_planner_not_installed_is_skipped(spec: DpdSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "hyperpod_dpd.planner", None)  # as if not installed
    _, planner_row = check_spec(spec)
    assert (planner_row.status, planner_row.detail) == (Status.SKIP, "the planner (hyperpod_dpd.planner) is not "
                                                                     "installed")


# --- the credentials themselves --------------------------------------------------------------------


def test_account_without_credentials_is_aws_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.clients.aws import AwsUnavailable

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    clients = AwsClients(region="us-west-2", factory=boto3.Session().client)
    with pytest.raises(AwsUnavailable, match=r"^no AWS credentials found: set AWS_PROFILE or pass --profile"):
        clients.account()


def test_describe_error_of_a_missing_credential_chain() -> None:
    from hyperpod_dpd.clients.aws import describe_error, is_credentials_problem

    assert is_credentials_problem(NoCredentialsError())
    assert describe_error(NoCredentialsError()).startswith("no AWS credentials found")


LLAMA_70B_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
    "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}


def test_planner_problems_fail_the_planner_row(spec: DpdSpec) -> None:
    @dataclasses.dataclass
    class Finding:
        text: str

        def render(self) -> str:
            return self.text

    def plan(spec: DpdSpec, architecture: Any = None) -> Any:
        return dataclasses.make_dataclass("P", ["problems", "warnings"])(
            [Finding("decode: the weights and PD buffer do not fit in 80 GiB")], [Finding("raise tp")])

    _, planner_row = check_spec(spec, planner=plan)
    assert (planner_row.status, planner_row.detail) == (
        Status.FAIL, "decode: the weights and PD buffer do not fit in 80 GiB\nraise tp")


def test_unknown_architecture_is_read_from_the_weights_config(spec: DpdSpec) -> None:
    unknown = dataclasses.replace(spec, model=dataclasses.replace(spec.model, name="my-finetune"))
    seen: list[Any] = []
    marker = object()

    def plan(spec: DpdSpec, architecture: Any = None) -> Any:
        seen.append(architecture)
        return FakePlan(warnings=[])

    _, row = check_spec(unknown, planner=plan, architecture_loader=lambda: marker)  # type: ignore[arg-type,return-value]
    assert (row.status, row.detail) == (Status.PASS, "plan computed (architecture read from the weights' "
                                                     "config.json) (0 warnings)")
    assert seen == [marker]
    _, skipped_row = check_spec(unknown, planner=plan, architecture_loader=_unsizable)
    assert skipped_row.status is Status.FAIL
    assert skipped_row.detail.startswith("the model architecture is unknown, so tensor parallelism, memory and KV "
                                         "sizing were not checked: model.architecture")


def test_the_real_planner_sizes_the_default_spec(spec: DpdSpec) -> None:
    pytest.importorskip("hyperpod_dpd.planner")
    spec_row, planner_row = check_spec(spec)
    assert spec_row.status is Status.PASS
    assert planner_row.status is Status.PASS, planner_row.detail
    assert re.match(r"plan computed \(\d+ warnings?\): a 4096-token prompt moves 1\.2 GiB of KV \([\d.]+ ms at line "
                    r"rate\); the PD buffer holds \d+ such transfers", planner_row.detail), planner_row.detail


def test_the_real_planner_reads_an_unknown_model_from_s3(clients: AwsClients, stubs: Any, spec: DpdSpec,
                                                         fakes: Any) -> None:
    import json

    pytest.importorskip("hyperpod_dpd.planner")
    files = fakes.sharded_model(2)
    files["config.json"] = json.dumps(LLAMA_70B_CONFIG).encode()
    fakes.upload_model(files)
    unknown = dataclasses.replace(spec, model=dataclasses.replace(spec.model, name="acme-70b-finetune"))
    stubs.quota(2.0)
    stubs.clusters()
    stubs.addons_offered()
    rows = preflight.preflight_checks(unknown, clients, preflight.PreflightOptions())
    planner_row = rows[1]
    assert planner_row.status is Status.PASS, planner_row.detail
    assert planner_row.detail.startswith("plan computed (architecture read from the weights' config.json)")
    assert [row.status for row in rows] == [Status.PASS] * 6 + [Status.SKIP]  # no --eks-cluster: a new cluster
