"""Reading specs from YAML and JSON: every unknown key and wrong type, named, at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyperpod_dpd import (
    ByteSize,
    DpdSpec,
    InstanceType,
    ModelSpec,
    S3Source,
    SpecError,
    dump_spec,
    dump_spec_yaml,
    load_spec,
    parse_spec,
)
from hyperpod_dpd.spec.defaults import default_spec, default_spec_text
from hyperpod_dpd.spec.loading import parse_spec_text


def _messages(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec_text(text)
    return [p.render() for p in caught.value.problems]


MINIMAL = """
name: small
model:
  name: my-model
  source: {s3: {bucket: models, prefix: my-model, region: us-east-1}}
"""


def test_minimal_spec_takes_documented_defaults() -> None:
    spec = parse_spec_text(MINIMAL)
    assert spec.instance_type is InstanceType.P5_48XLARGE
    assert spec.tensor_parallel_size == 8
    assert spec.routing.threshold == 4096
    assert spec.kv_cache.pd_buffer_size == ByteSize.gibibytes(8)
    assert spec.kv_cache.hash_seed == "0"
    assert dict(spec.env) == {"HF_HOME": "/tmp/hf_home"}


def test_embedded_default_is_the_published_example() -> None:
    spec = default_spec()
    assert spec.model.name == "Llama-3.3-70B-Instruct"
    assert (spec.prefill.replicas, spec.decode.replicas, spec.max_model_len) == (1, 1, 16384)
    assert spec.gpu_memory_utilization == 0.75
    assert "pd_buffer_size: 8Gi" in default_spec_text()


def test_unknown_keys_wrong_types_and_missing_keys_all_reported() -> None:
    messages = _messages("""
name: 7
namespace: default
replica: 2
model:
  source: {s3: {bucket: models, prefix: m}}
prefill: {replicas: "2", resources: {gpus: 8.5}}
kv_cache: {pd_buffer_size: 8589934592, l1_cache: "yes"}
env: {PYTHONHASHSEED: 0}
""")
    expected = [
        "name: must be a string, not an integer (got 7). Fix: quote it: '7'",
        "replica: is not a known key",
        "model.name: is required",
        "prefill.replicas: must be an integer, not a string",
        "prefill.resources.gpus: must be an integer, not a number",
        "kv_cache.pd_buffer_size: must be a size with a unit, not a bare number (got 8589934592)",
        "kv_cache.l1_cache: must be true or false, not a string",
        "env.PYTHONHASHSEED: must be a string, not an integer (got 0). Fix: quote it: '0'",
    ]
    for fragment in expected:
        assert any(m.startswith(fragment) for m in messages), (fragment, messages)


@pytest.mark.parametrize(("typo", "meant"), [
    ("tensorparallel_size: 4", "tensor_parallel_size"),
    ("tensor_paralel_size: 4", "tensor_parallel_size"),  # a dropped letter: removing it would silently give TP 8
    ("prefill: {replica: 2}", "replicas"),
    ("kv_cache: {pd_bufer_size: 16Gi}", "pd_buffer_size"),
])
def test_a_mistyped_key_is_told_its_nearest_known_key(typo: str, meant: str) -> None:
    messages = _messages(MINIMAL + typo + "\n")
    assert any(f"Fix: rename it to '{meant}' (removing it would drop the setting)" in m for m in messages), messages


def test_an_unknown_key_far_from_every_known_one_lists_them() -> None:
    (message,) = _messages(MINIMAL + "colour: blue\n")
    assert "Fix: remove it or correct its spelling (known keys: name, model, namespace" in message


def test_model_source_needs_exactly_one_kind() -> None:
    messages = _messages(MINIMAL.replace("source: {s3:", "source: {gcs:"))
    assert any(m.startswith("model.source.gcs: is not a known kind") and "s3, fsx, huggingface, volume" in m
               for m in messages)
    messages = _messages(MINIMAL.replace("source: {s3: {bucket: models, prefix: my-model, region: us-east-1}}",
                                         "source: models"))
    assert any(m.startswith("model.source: must be a mapping with exactly one of") for m in messages)


def test_enums_list_the_allowed_values() -> None:
    messages = _messages(MINIMAL + "instance_type: ml.g6e.48xlarge\nrouting: {strategy: random}\n")
    assert any(m.startswith("instance_type: is not an instance type that DPD supports") and "ml.p6-b300.48xlarge" in m
               for m in messages)
    assert any(m.startswith("routing.strategy: is not an allowed value") and "prefixaware, kvaware" in m
               for m in messages)


@pytest.mark.parametrize(("text", "bytes_"), [("8Gi", 8 * 2**30), ("8GiB", 8 * 2**30), ("512Mi", 512 * 2**20),
                                              ("16GB", 16 * 10**9), ("1024B", 1024), ("1.5Gi", 3 * 2**29)])
def test_sizes_parse_with_units(text: str, bytes_: int) -> None:
    assert ByteSize.parse(text).bytes == bytes_


@pytest.mark.parametrize("text", ["8", "eight Gi", "8Xi", "0.3B"])
def test_sizes_without_a_unit_or_whole_bytes_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"size|whole number"):
        ByteSize.parse(text)


@pytest.mark.parametrize("case", [
    ("bad.yaml", "name: x\nrouting:\n  threshold: [4096\n  strategy: prefixaware\n", "4:11", "  strategy: prefixaware",
     "malformed YAML: expected ',' or ']', but got ':' (while parsing a flow sequence at line 3)"),
    ("bad.json", '{\n  "name": "x",\n  "port": 80,\n}\n', "4:1", "}",
     "malformed JSON: Expecting property name enclosed in double quotes"),
])
def test_a_syntax_error_names_file_line_column_and_the_offending_line(tmp_path: Path,
                                                                      case: tuple[str, str, str, str, str]) -> None:
    name, text, position, line, message = case
    bad = tmp_path / name
    bad.write_text(text)
    with pytest.raises(SpecError) as caught:
        load_spec(bad)
    (problem,) = caught.value.problems
    assert problem.field == f"{bad}:{position}"  # FILE:LINE:COLUMN, where editors jump to
    assert problem.value == line
    assert problem.message == message
    assert "<unicode string>" not in str(caught.value) and "^" not in str(caught.value)


def test_json_files_and_malformed_json(tmp_path: Path) -> None:
    good = tmp_path / "spec.json"
    good.write_text(json.dumps(dump_spec(default_spec())))
    assert load_spec(good) == default_spec()
    bad = tmp_path / "bad.json"
    bad.write_text("{'name': 1}")
    with pytest.raises(SpecError, match="malformed JSON"):
        load_spec(bad)


def test_unreadable_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"cannot read the spec file: No such file or directory"):
        load_spec(tmp_path / "missing.yaml")
    with pytest.raises(SpecError, match=r"cannot read the spec file"):
        load_spec(tmp_path)


def test_top_level_must_be_a_mapping() -> None:
    (message,) = _messages("- a\n- b\n")
    assert message.startswith("<root>: must be a mapping, not a list")


def test_yaml_round_trip_is_exact() -> None:
    spec = default_spec()
    assert parse_spec_text(dump_spec_yaml(spec)) == spec


def test_specs_are_immutable() -> None:
    spec = DpdSpec(name="x", model=ModelSpec(name="m", source=S3Source(bucket="b", prefix="p")),
                   env={"A": "1"}, args=["--enforce-eager"])  # type: ignore[arg-type]
    assert spec.args == ("--enforce-eager",)
    with pytest.raises(TypeError):
        spec.env["A"] = "2"  # type: ignore[index]
    with pytest.raises(AttributeError):
        spec.name = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        DpdSpec("x")  # type: ignore[call-arg]


def test_python_values_pass_through_the_loader() -> None:
    spec = parse_spec({"name": "x", "model": ModelSpec(name="m", source=S3Source(bucket="b", prefix="p")),
                       "instance_type": InstanceType.P5EN_48XLARGE,
                       "kv_cache": {"pd_buffer_size": ByteSize.gibibytes(16)}})
    assert spec.instance_type is InstanceType.P5EN_48XLARGE
    assert spec.kv_cache.pd_buffer_size.gib == 16


def test_role_nodes_count_pods_times_gpus_in_whole_nodes() -> None:
    from hyperpod_dpd import AutoscalingSpec, CloudWatchTrigger, Resources, RoleSpec

    spec = default_spec()
    trigger = CloudWatchTrigger(name="q", namespace="n", metric_name="m", target_value=1)
    four_gpu = RoleSpec(replicas=3, resources=Resources(gpus=4), autoscaling=AutoscalingSpec(max_replicas=5,
                                                                                          triggers=(trigger,)))
    # 8 GPUs per ml.p5.48xlarge: 3 pods x 4 GPUs = 12 GPUs -> 2 nodes now; 5 x 4 = 20 -> 3 nodes at the limit.
    assert spec.role_nodes(four_gpu, at_scale_limit=False) == 2
    assert spec.role_nodes(four_gpu) == 3
    assert spec.role_nodes(spec.prefill) == 1
