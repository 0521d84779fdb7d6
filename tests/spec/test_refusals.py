"""Specs that the cluster, AWS or KEDA would refuse fail the check with the field, the value and the fix;
specs they accept pass. Each rule is the real system's own (see docs/checks.md for the sources)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hyperpod_dpd import DpdSpec, Problem, SpecError, check
from hyperpod_dpd.spec import (
    AutoscalingSpec,
    CloudWatchTrigger,
    DataCaptureSpec,
    PrometheusTrigger,
    TlsSpec,
    TopologySpec,
)
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.model import FsxSource, ModelSource, S3Source, VolumeSource

AMP = "https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-0a1b"
ACM = "arn:aws:acm:{region}:111122223333:certificate/0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"


def _problems(spec: DpdSpec) -> list[Problem]:
    with pytest.raises(SpecError) as caught:
        check(spec)
    return list(caught.value.problems)


def _one(spec: DpdSpec, field: str) -> Problem:
    found = [p for p in _problems(spec) if p.field == field]
    assert len(found) == 1, [p.render() for p in _problems(spec)]
    assert found[0].fix
    return found[0]


def _source(source: ModelSource) -> DpdSpec:
    spec = default_spec()
    return dataclasses.replace(spec, model=dataclasses.replace(spec.model, source=source))


def _s3(**changes: Any) -> DpdSpec:
    source = default_spec().model.source
    assert isinstance(source, S3Source)
    return _source(dataclasses.replace(source, **changes))


# --- label keys: k8s.io/apimachinery IsQualifiedName --------------------------------------------------------

def _selector(key: str, value: str = "x") -> DpdSpec:
    spec = default_spec()
    return dataclasses.replace(spec, prefill=dataclasses.replace(spec.prefill, node_selector={key: value}))


@pytest.mark.parametrize(("key", "fragment"), [
    (("a" * 250) + ".com/pool", "prefix of 254 characters"),
    ("Example.com/pool", "not a DNS-1123 subdomain"),
    ("/pool", "empty prefix"),
    ("a/b/c", "more than one '/'"),
    ("example.com/" + "n" * 64, "name part of 64 characters"),
])
def test_a_label_key_kubernetes_refuses_is_refused(key: str, fragment: str) -> None:
    problem = _one(_selector(key), f"prefill.node_selector.{key}")
    assert problem.value == key and fragment in problem.message


def test_label_keys_and_values_kubernetes_accepts_pass() -> None:
    check(_selector(("a" * 63 + ".") * 3 + "b" * 61 + "/" + "n" * 63, "v" * 63))  # a 253-character prefix
    check(_selector("pool", ""))
    problem = _one(_selector("pool", "v" * 64), "prefill.node_selector.pool")
    assert "at most 63" in problem.message


# --- paths inside a volume, a file system or a bucket ------------------------------------------------------

@pytest.mark.parametrize(("source", "field"), [
    (FsxSource(file_system_id="fs-0123456789abcdef0", path="models/../../etc"), "model.source.fsx.path"),
    (VolumeSource(claim_name="weights", path="../other"), "model.source.volume.path"),
    (VolumeSource(claim_name="weights", path="/llama"), "model.source.volume.path"),
])
def test_a_sub_path_that_leaves_its_volume_is_refused(source: ModelSource, field: str) -> None:
    problem = _one(_source(source), field)
    assert problem.value == source.path  # type: ignore[union-attr]


def test_an_s3_prefix_with_a_parent_element_is_refused() -> None:
    problem = _one(_s3(prefix="models/../Llama"), "model.source.s3.prefix")
    assert "'..'" in problem.message


def test_relative_paths_with_dots_in_names_pass() -> None:
    check(_source(FsxSource(file_system_id="fs-0123456789abcdef0", path="Llama-3.3-70B..v2/weights")))
    check(_source(VolumeSource(claim_name="weights", path="")))
    check(_s3(prefix="models/Llama-3.3-70B-Instruct"))


def test_an_s3_key_over_1024_bytes_of_utf8_is_refused() -> None:
    at_limit = "é" * ((1024 - 33) // 2) + "x"  # 991 bytes: the prefix, '/', a 32-character shard name
    assert len(at_limit.encode()) == 991
    check(_s3(prefix=at_limit))
    problem = _one(_s3(prefix=at_limit + "x"), "model.source.s3.prefix")
    assert "1025 bytes" in problem.message and "1024" in problem.message


# --- bucket names: S3 general purpose bucket naming rules --------------------------------------------------

@pytest.mark.parametrize(("bucket", "fragment"), [
    ("192.168.5.4", "IP address"),
    ("xn--weights", "'xn--'"),
    ("sthree-weights", "'sthree-'"),
    ("amzn-s3-demo-weights", "'amzn-s3-demo-'"),
    ("weights-s3alias", "'-s3alias'"),
    ("weights--ol-s3", "'--ol-s3'"),
    ("weights.mrap", "'.mrap'"),
    ("weights--x-s3", "'--x-s3'"),
    ("weights--table-s3", "'--table-s3'"),
    ("my..weights", "adjacent periods"),
])
def test_a_bucket_name_s3_reserves_is_refused(bucket: str, fragment: str) -> None:
    problem = _one(_s3(bucket=bucket), "model.source.s3.bucket")
    assert problem.value == bucket and fragment in problem.message


def test_bucket_names_s3_accepts_pass() -> None:
    for bucket in ("192.168.5.x", "my-xn--weights", "weights.s3alias.backup", "my.weights-2026"):
        check(_s3(bucket=bucket))


# --- tags: the aws: prefix is reserved ---------------------------------------------------------------------

@pytest.mark.parametrize("key", ["aws:team", "AWS:team", "Aws:cost-center"])
def test_a_tag_key_with_the_reserved_aws_prefix_is_refused(key: str) -> None:
    problem = _one(dataclasses.replace(default_spec(), tags={key: "ml"}), f"tags.{key}")
    assert "'aws:'" in problem.message


def test_tags_aws_accepts_pass() -> None:
    check(dataclasses.replace(default_spec(), tags={"team": "aws:ml", "awsome": "yes"}))
    too_many = {f"k{i}": "v" for i in range(51)}
    assert _one(dataclasses.replace(default_spec(), tags=too_many), "tags").value == 51


# --- TLS: the certificate's region and the output bucket ---------------------------------------------------

def _tls(**tls: Any) -> DpdSpec:
    return dataclasses.replace(default_spec(), tls=TlsSpec(**tls))


def test_an_acm_certificate_of_another_region_than_the_endpoint_is_refused() -> None:
    spec = dataclasses.replace(_tls(acm_certificate_arn=ACM.format(region="us-east-1"), domain_name="llm.example.com"),
                               topology=TopologySpec(availability_zone="us-west-2b"))
    problem = _one(spec, "tls.acm_certificate_arn")
    assert "us-east-1" in problem.message and "us-west-2" in problem.message
    check(dataclasses.replace(spec, tls=TlsSpec(acm_certificate_arn=ACM.format(region="us-west-2"),
                                                domain_name="llm.example.com")))


@pytest.mark.parametrize("uri", ["s3://My_Bucket/certs", "s3://sthree-certs/", "s3://10.0.0.1/certs"])
def test_a_tls_output_uri_naming_an_invalid_bucket_is_refused(uri: str) -> None:
    problem = _one(_tls(certificate_output_s3_uri=uri), "tls.certificate_output_s3_uri")
    assert "S3 bucket naming rules" in problem.message


def test_a_capture_uri_naming_an_invalid_bucket_is_refused() -> None:
    spec = dataclasses.replace(default_spec(), data_capture=DataCaptureSpec(s3_uri="s3://logs--x-s3/alb"))
    assert "'--x-s3'" in _one(spec, "data_capture.s3_uri").message
    check(_tls(certificate_output_s3_uri="s3://hyperpod-tls-certs/dpd"))


# --- SageMaker's instance count ----------------------------------------------------------------------------

def test_replicas_beyond_sagemakers_instance_count_limit_are_refused() -> None:
    spec = default_spec()
    huge = dataclasses.replace(spec, prefill=dataclasses.replace(spec.prefill, replicas=10_000))
    problem = _one(huge, "prefill.replicas")
    assert problem.value == 10_000 and "6758" in problem.message


# --- KEDA's CloudWatch scaler ------------------------------------------------------------------------------

def _scaled(trigger: CloudWatchTrigger | PrometheusTrigger, *, replicas: int = 1, min_replicas: int = 1,
            max_replicas: int = 3) -> DpdSpec:
    spec = default_spec()
    return dataclasses.replace(spec, prefill=dataclasses.replace(spec.prefill, replicas=replicas, autoscaling=(
        AutoscalingSpec(min_replicas=min_replicas, max_replicas=max_replicas, triggers=(trigger,)))))


def _cloudwatch(**changes: Any) -> CloudWatchTrigger:
    return dataclasses.replace(CloudWatchTrigger(name="requests", namespace="AWS/ApplicationELB",
                                                 metric_name="RequestCount", target_value=100.0), **changes)


CW = "prefill.autoscaling.triggers[0]"


@pytest.mark.parametrize("period", [2, 45, 90, 61])
def test_a_period_keda_refuses_is_refused(period: int) -> None:
    problem = _one(_scaled(_cloudwatch(period_seconds=period)), f"{CW}.period_seconds")
    assert "1, 5, 10, 30, 60 or a multiple of 60" in problem.message


def test_a_period_that_does_not_divide_the_collection_window_is_refused() -> None:
    problem = _one(_scaled(_cloudwatch(period_seconds=120)), f"{CW}.period_seconds")
    assert "300" in problem.message


@pytest.mark.parametrize("period", [1, 5, 10, 30, 60, 300])
def test_periods_keda_accepts_pass(period: int) -> None:
    check(_scaled(_cloudwatch(period_seconds=period)))


def test_a_statistic_keda_and_cloudwatch_refuse_is_refused_with_its_spelling() -> None:
    problem = _one(_scaled(_cloudwatch(statistic="average")), f"{CW}.statistic")
    assert "'Average'" in problem.fix
    assert _one(_scaled(_cloudwatch(statistic="Mean")), f"{CW}.statistic").value == "Mean"
    for statistic in ("SampleCount", "Sum", "Minimum", "Maximum"):
        check(_scaled(_cloudwatch(statistic=statistic)))
    warnings = check(_scaled(_cloudwatch(statistic="p99"))).warnings
    assert "ExtendedStatistic" in {w.code for w in warnings}


def test_dimensions_that_keda_cannot_pair_are_refused() -> None:
    problem = _one(_scaled(_cloudwatch(dimensions={"LoadBalancer": "app/a;b"})), f"{CW}.dimensions.LoadBalancer")
    assert "';'" in problem.message
    assert _one(_scaled(_cloudwatch(dimensions={"LoadBalancer": ""})), f"{CW}.dimensions.LoadBalancer")
    check(_scaled(_cloudwatch(dimensions={"LoadBalancer": "app/my-alb/50dc6c495c0c9188"})))


def test_replicas_above_max_replicas_are_refused() -> None:
    problem = _one(_scaled(_cloudwatch(), replicas=4, max_replicas=3), "prefill.replicas")
    assert problem.value == 4 and "max_replicas 3" in problem.message
    check(_scaled(_cloudwatch(), replicas=3, max_replicas=3))
    bounds = _problems(_scaled(_cloudwatch(), min_replicas=4, max_replicas=3))
    assert [p.field for p in bounds] == ["prefill.autoscaling"]


# --- KEDA's Prometheus scaler ------------------------------------------------------------------------------

def _prometheus(query: str) -> DpdSpec:
    return _scaled(PrometheusTrigger(name="waiting", server_address=AMP, query=query, target_value=4.0))


QUERY = f"{CW}.query"


@pytest.mark.parametrize("query", [
    'sum(rate(vllm:num_requests_waiting{namespace="$namespace"}[1m]))',
    "sum(rate(vllm:num_requests_waiting[$__rate_interval]))",
    "sum(rate(vllm:num_requests_waiting{pod=~\"${pod}\"}[1m]))",
])
def test_a_grafana_dashboard_query_is_refused(query: str) -> None:
    problem = _one(_prometheus(query), QUERY)
    assert "Grafana dashboard variable" in problem.message and problem.value == query


def test_a_query_that_is_not_promql_is_refused() -> None:
    pytest.importorskip("promql_parser")
    problem = _one(_prometheus("sum(rate(vllm:num_requests_waiting[1m])"), QUERY)
    assert problem.message.startswith("is not PromQL")


@pytest.mark.parametrize("query", [
    "avg_over_time(sum(rate(vllm:num_requests_waiting[1m]))[5m:])",
    "sum(vllm:num_requests_waiting) / sum(vllm:num_requests_running)",
    "max(vllm:num_requests_waiting) * 2",
    "sum(rate(vllm:num_requests_waiting[1m])) or vector(0)",
    "histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
    'sum(vllm:num_requests_waiting{model_name=~"Llama.*$"})',
])
def test_single_series_queries_pass(query: str) -> None:
    pytest.importorskip("promql_parser")
    check(_prometheus(query))


@pytest.mark.parametrize("query", [
    "avg_over_time(rate(vllm:num_requests_waiting[1m])[5m:])",
    "avg_over_time(sum by (pod) (rate(vllm:num_requests_waiting[1m]))[5m:])",
    "sum by (pod) (vllm:num_requests_waiting)",
    "scalar(sum(vllm:num_requests_waiting))",
])
def test_multi_series_or_scalar_queries_are_still_refused(query: str) -> None:
    problem = _one(_prometheus(query), QUERY)
    assert "at most one series" in problem.message


def test_without_the_parser_the_patterns_still_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperpod_dpd.validation import autoscaling

    monkeypatch.setattr(autoscaling, "_promql", lambda: None)
    check(_prometheus("sum(vllm:num_requests_waiting)"))
    assert "at most one series" in _one(_prometheus("sum by (pod) (vllm:num_requests_waiting)"), QUERY).message
    assert "Grafana" in _one(_prometheus("sum(rate(x[$__rate_interval]))"), QUERY).message
