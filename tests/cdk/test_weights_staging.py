"""A ``huggingface`` source synthesizes to stage -> wait -> apply an S3-sourced endpoint, with the token
referenced only by its Secrets Manager ARN."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml
from cdk import cdk_support
from cdk.cdk_support import Synthesized, logical_id, policy_statements
from cdk.cdk_template_queries import by_type, depends_on

from hyperpod_dpd import HuggingFaceSource, SpecError
from hyperpod_dpd.contracts import stack_outputs
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd_cdk import HyperPodDpdStack
from hyperpod_dpd_cdk.weights_staging import MAX_WAIT, REQUIREMENTS, staged_prefix, staging_digest

REVISION = cdk_support.HF_REVISION
SECRET_ARN = cdk_support.HF_SECRET_ARN
TOKEN_SENTINEL = cdk_support.HF_TOKEN_SENTINEL


def hf(spec: Any, model_id: str = "meta-llama/Llama-3.3-70B-Instruct", **source: Any) -> Any:
    return cdk_support.hf_source(spec, model_id, **source)


def test_stage_then_wait_then_apply(hf_app: Synthesized) -> None:
    t = hf_app.template
    for endpoint in hf_app.stack.endpoints:
        staging = hf_app.stack.weights_staging[endpoint.spec.name]
        job, wait = logical_id(staging.manifest), logical_id(staging.wait)
        assert depends_on(t, wait, job), "the wait's timer must start only once the Job is applied"
        assert depends_on(t, logical_id(endpoint.manifest), wait), "the endpoint must wait for the weights"
        assert int(t["Resources"][wait]["Properties"]["Timeout"]) <= MAX_WAIT.to_seconds()
        assert t["Resources"][wait]["Properties"]["Handle"] == {"Ref": logical_id(staging.handle)}


def test_the_endpoint_reads_the_staged_copy_from_s3(hf_app: Synthesized) -> None:
    for spec, endpoint in zip(hf_app.stack.endpoint_specs, hf_app.stack.endpoints, strict=True):
        iec = next(o for o in endpoint.manifests() if o["kind"] == "InferenceEndpointConfig")
        source = hf_app.stack.resolve(iec["spec"]["modelSourceConfig"])
        assert source["modelSourceType"] == "s3"
        assert source["modelLocation"] == f"huggingface/{spec.model.source.model_id}/{REVISION}"
        assert source["s3Storage"]["bucketName"] == {"Ref": logical_id(hf_app.stack.model_bucket.bucket)}


def test_one_job_per_revision_however_many_endpoints_serve_it(hf_app: Synthesized) -> None:
    staging = hf_app.stack.weights_staging
    assert staging["dpd-test"] is staging["dpd-again"]
    assert staging["qwen-dpd"] is not staging["dpd-test"]
    assert len(by_type(hf_app.template, "AWS::CloudFormation::WaitCondition")) == 2


def rendered(s: Synthesized, name: str = "dpd-test") -> dict[str, Any]:
    """The staging chart's objects by kind, tokens resolved."""
    return {o["kind"]: o for o in s.stack.resolve(s.stack.weights_staging[name].chart.to_json())}


def test_the_token_is_referenced_only_by_arn(hf_app: Synthesized) -> None:
    text = json.dumps(hf_app.template)
    assert TOKEN_SENTINEL not in text
    staging = hf_app.stack.weights_staging["dpd-test"]
    env = {e["name"]: e for c in staging.chart.to_json()[-1]["spec"]["template"]["spec"]["containers"]
           for e in c["env"]}
    assert env["TOKEN_SECRET_ARN"]["value"] == SECRET_ARN
    assert not any("TOKEN" in name and name != "TOKEN_SECRET_ARN" for name in env)
    assert all("valueFrom" not in e for e in env.values()), "no Kubernetes Secret is read into the env"
    # The only Kubernetes Secret is the wait handle's URL; the token never is one.
    secret = rendered(hf_app)["Secret"]
    assert secret["stringData"] == {"url": {"Ref": logical_id(staging.handle)}}


def test_the_wait_handle_url_is_a_mounted_secret_not_in_the_job_spec(hf_app: Synthesized) -> None:
    staging = hf_app.stack.weights_staging["dpd-test"]
    objects = rendered(hf_app)
    handle = json.dumps({"Ref": logical_id(staging.handle)})
    assert handle not in json.dumps(objects["Job"]), "whoever reads Jobs or Pods could signal the wait"
    pod = objects["Job"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert "WAIT_HANDLE_URL" not in env
    path = env["WAIT_HANDLE_URL_FILE"]
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == objects["Secret"]["metadata"]["name"]
    assert path.rsplit("/", 1)[-1] in objects["Secret"]["stringData"]


def test_the_staging_image_is_pinned_by_digest(hf_app: Synthesized) -> None:
    (container,) = rendered(hf_app)["Job"]["spec"]["template"]["spec"]["containers"]
    assert re.fullmatch(r"public\.ecr\.aws/docker/library/python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}",
                        container["image"]), container["image"]


def test_boto3_is_installed_from_hash_pinned_requirements(hf_app: Synthesized) -> None:
    objects = rendered(hf_app)
    requirements = objects["ConfigMap"]["data"][REQUIREMENTS.name]
    pins = [line for line in requirements.splitlines() if line and not line.startswith("#")]
    names = {line.split("==")[0] for line in pins}
    assert {"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"} <= names
    assert all(re.fullmatch(r"[a-z0-9.-]+==[A-Za-z0-9.]+ --hash=sha256:[0-9a-f]{64}", line) for line in pins), pins
    env = {e["name"]: e.get("value") for e in objects["Job"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REQUIREMENTS"].endswith(f"/{REQUIREMENTS.name}")
    assert "BOTO3_VERSION" not in env


def test_only_the_staging_role_reads_the_secret_and_writes_only_its_prefix(hf_app: Synthesized) -> None:
    staging = hf_app.stack.weights_staging["dpd-test"]
    readers = [p for p in by_type(hf_app.template, "AWS::IAM::Policy").values()
               if SECRET_ARN in json.dumps(p["Properties"]["PolicyDocument"])]
    assert len(readers) == 1
    statements = policy_statements(hf_app, staging.role)
    writes = [s for s in statements if "s3:PutObject" in s["Action"]]
    assert len(writes) == 1
    resource = json.dumps(writes[0]["Resource"])
    assert f"/{staged_prefix(staging_source(hf_app))}/*" in resource
    assert staging.service_account_name.startswith(staging.service_account_prefix)
    conditions = [v["Properties"]["Value"] for v in hf_app.template["Resources"].values()
                  if v["Type"] == "Custom::AWSCDKCfnJson"
                  and f":{staging.service_account_prefix}" in json.dumps(v["Properties"]["Value"])]
    subject = f"system:serviceaccount:default:{staging.service_account_name}"
    assert len(conditions) == 1 and subject in json.dumps(conditions[0]), "the role trusts the current Job's name only"
    assert "*" not in json.dumps(conditions[0])
    trust = json.dumps(hf_app.template["Resources"][hf_app.stack.resolve(staging.role.node.default_child.logical_id)]
                       ["Properties"]["AssumeRolePolicyDocument"])
    assert "StringEquals" in trust and "StringLike" not in trust
    others = [s for name, s in hf_app.stack.weights_staging.items() if s is not staging]
    assert all(not o.service_account_name.startswith(staging.service_account_prefix) for o in others)


def staging_source(s: Synthesized) -> HuggingFaceSource:
    source = s.stack.endpoint_specs[0].model.source
    assert isinstance(source, HuggingFaceSource)
    return source


def test_without_an_arn_the_stack_creates_an_empty_secret_and_prints_the_fill_command(hf_app: Synthesized) -> None:
    secrets = by_type(hf_app.template, "AWS::SecretsManager::Secret")
    assert len(secrets) == 1
    (secret,) = secrets.values()
    assert "SecretString" not in secret["Properties"]
    assert json.loads(secret["Properties"]["GenerateSecretString"]["SecretStringTemplate"]) == {"token": ""}
    outputs = [o for o in hf_app.template["Outputs"].values() if "put-secret-value" in json.dumps(o["Value"])]
    assert len(outputs) == 1


def test_job_name_and_wait_ids_follow_the_revision(hf_app: Synthesized) -> None:
    source = staging_source(hf_app)
    other = dataclasses.replace(source, revision="0" * 40)
    assert staging_digest(source, staged_prefix(source)) == staging_digest(source, staged_prefix(source))
    assert staging_digest(source, staged_prefix(source)) != staging_digest(other, staged_prefix(other))
    staging = hf_app.stack.weights_staging["dpd-test"]
    assert staging_digest(source, staged_prefix(source)) in staging.service_account_prefix
    assert staging.digest in staging.job_name and staging.digest in logical_id(staging.wait)


def test_the_job_manifest_is_what_the_cluster_accepts(hf_app: Synthesized, tmp_path: Path) -> None:
    staging = hf_app.stack.weights_staging["dpd-test"]
    objects = hf_app.stack.resolve(staging.chart.to_json())
    kinds = [o["kind"] for o in objects]
    assert sorted(kinds) == ["ConfigMap", "Job", "Secret", "ServiceAccount"]
    job = next(o for o in objects if o["kind"] == "Job")
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == staging.service_account_name
    yaml.safe_dump_all(objects)  # plain data, no CDK objects left


def test_an_unpinned_revision_or_a_bad_arn_is_refused_naming_the_field(cdk_context: dict[str, Any]) -> None:
    app = cdk.App(context=cdk_context)
    with pytest.raises(SpecError) as error:
        HyperPodDpdStack(app, "Bad", env=cdk.Environment(region=cdk_support.REGION),
                         endpoints=[hf(default_spec(), token_secret_arn="hf-read-token")])
    fields = [p.field for p in error.value.problems]
    assert "endpoints[0].model.source.huggingface.revision" in fields
    assert "endpoints[0].model.source.huggingface.token_secret_arn" in fields


def test_the_app_writes_the_staging_job_beside_the_endpoints(app_module: Any, hf_app: Synthesized,
                                                              tmp_path: Path) -> None:
    written = app_module.write_manifests(hf_app.stack, tmp_path)
    staging = [p for p in written if "stage-weights-" in p.name]
    assert len(staging) == 2  # one per staged revision, not per endpoint
    documents = list(yaml.safe_load_all(staging[0].read_text()))
    assert [d["kind"] for d in documents] == ["ServiceAccount", "ConfigMap", "Secret", "Job"]
    assert cdk_support.HF_TOKEN_SENTINEL not in staging[0].read_text()


def test_the_bucket_output_says_what_to_upload_for_the_sources_the_stack_hosts(hf_app: Synthesized,
                                                                               default_app: Synthesized) -> None:
    # An all-Hugging-Face stack stages its weights: "Upload weights ... before the endpoints start" misled.
    staged = hf_app.template["Outputs"][stack_outputs.MODEL_BUCKET]["Description"]
    assert staged.startswith("The model bucket: the stack stages each huggingface source's revision here itself")
    assert staged.endswith("; nothing to upload")
    uploaded = default_app.template["Outputs"][stack_outputs.MODEL_BUCKET]["Description"]
    assert uploaded == "Upload weights to s3://<this>/<model prefix>/ before the endpoints start"
    fill = next(v for k, v in hf_app.template["Outputs"].items() if k.startswith("HuggingFaceToken"))
    assert "gated or private models only (public ones stage without it)" in fill["Description"]
