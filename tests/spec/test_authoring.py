"""Writing a spec: the annotated example and the editor schema cover every field, agree with the loader."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from typing import Any

import jsonschema
import pytest
import yaml

from hyperpod_dpd import ByteSize, DpdSpec, check, dump_spec
from hyperpod_dpd.spec.defaults import default_spec
from hyperpod_dpd.spec.example import example_text
from hyperpod_dpd.spec.loading import parse_spec_leniently, parse_spec_text
from hyperpod_dpd.spec.schema import schema_text, spec_json_schema

VALIDATOR = jsonschema.Draft7Validator(spec_json_schema())


def _records(hint: Any, found: list[type]) -> list[type]:
    """Every spec record reachable from ``hint``, walked from the type hints alone (not the code under test)."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint) and hint is not ByteSize:
        if hint not in found:
            found.append(hint)
            for hinted in typing.get_type_hints(hint).values():
                _records(hinted, found)
        return found
    for arg in typing.get_args(hint):
        _records(arg, found)
    return found


RECORDS = _records(DpdSpec, [])
REFUSED = {("RoleSpec", "env")}  # read by the loader only to refuse it with a precise message


def test_the_walk_reaches_the_nested_records() -> None:
    names = {cls.__name__ for cls in RECORDS}
    assert {"DpdSpec", "ModelSpec", "S3Source", "HuggingFaceSource", "RoleSpec", "Resources", "AutoscalingSpec",
            "PrometheusTrigger", "ModelArchitecture", "SloSpec", "AlertThresholds", "TlsSpec"} <= names


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__name__)
def test_every_field_of_every_spec_type_is_in_the_example_and_the_schema(cls: type) -> None:
    example = example_text(default_spec())
    schema = spec_json_schema()
    properties = schema["properties"] if cls is DpdSpec else schema["definitions"][cls.__name__]["properties"]
    for spec_field in dataclasses.fields(cls):
        assert spec_field.name in properties, (cls.__name__, spec_field.name)
        if (cls.__name__, spec_field.name) in REFUSED:
            continue  # left out of the example on purpose (test_example_leaves_out_the_refused_per_role_env)
        assert re.search(rf"^[ #]*(- )?{spec_field.name}:", example, re.MULTILINE), (cls.__name__, spec_field.name)


def test_example_reads_back_to_the_default_spec_and_validates() -> None:
    text = example_text(default_spec())
    assert parse_spec_text(text) == default_spec()
    check(default_spec())
    assert VALIDATOR.is_valid(yaml.safe_load(text))


def test_example_and_schema_show_no_restructuredtext_markup() -> None:
    # The docstrings are Sphinx; a spec author reads the comments in a YAML file and the schema in an editor.
    for text in (example_text(default_spec()), schema_text()):
        assert "``" not in text
        assert not re.search(r":(class|data|func|meth|mod|attr|obj):`", text)
    assert "# `metadata.name`; the operator derives pod" in example_text(default_spec())


def test_example_leaves_out_the_refused_per_role_env() -> None:
    text = example_text(default_spec())
    prefill = text[text.index("\nprefill:"):text.index("\ndecode:")]
    assert not re.search(r"^[ #]*env:", prefill, re.MULTILINE)
    assert "env: {HF_HOME: /tmp/hf_home}" in text  # the endpoint's env, which is allowed


def test_example_shows_unset_optional_fields_commented_with_their_meaning() -> None:
    text = example_text(default_spec())
    assert "  # max_num_seqs: <integer>" in text
    assert "Unset: the operator's default (16 on the prefiller, 32 on the decoder)." in " ".join(
        line.strip().lstrip("# ") for line in text.splitlines())
    assert "# slo:" in text and "#   ttft_ms: <integer>" in text
    assert "  #     - prometheus:" in text  # a trigger of each kind to copy


def test_uncommenting_a_block_gives_the_field() -> None:
    """Removing one ``# `` per line of a commented block yields YAML the loader reads."""
    text = example_text(default_spec())
    lines = text.splitlines()
    start = lines.index("# alerts:")
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.startswith("#   "):
            break
        block.append(line)
    uncommented = "\n".join(line[2:] for line in block)
    spec = parse_spec_text(text + uncommented + "\n")
    assert spec.alerts is not None and spec.alerts.error_ratio == 0.05


def test_schema_is_a_valid_draft_7_schema_and_deterministic() -> None:
    jsonschema.Draft7Validator.check_schema(spec_json_schema())
    assert schema_text() == schema_text()
    assert json.loads(schema_text()) == spec_json_schema()


MINIMAL = {"name": "small", "model": {"name": "m", "source": {"s3": {"bucket": "b1b", "prefix": "p"}}}}


def _with(path: str, value: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(dump_spec(default_spec())))
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return data


# One of each kind of mistake the loader reports (keys, types, sizes, enums, unions, required fields).
MALFORMED = {
    "unknown top-level key": _with("tensor_paralel_size", 1),
    "unknown nested key": _with("prefill.replica", 2),
    "integer as a string": _with("prefill.replicas", "2"),
    "integer as a number": _with("tensor_parallel_size", 1.5),
    "number as a string": _with("gpu_memory_utilization", "75%"),
    "boolean as a string": _with("kv_cache.l1_cache", "yes"),
    "string as an integer": _with("name", 7),
    "env value not a string": _with("env", {"PYTHONHASHSEED": 0}),
    "size without a unit": _with("kv_cache.pd_buffer_size", 8589934592),
    "size string without a unit": _with("kv_cache.pd_buffer_size", "8"),
    "enum value": _with("routing.strategy", "random"),
    "instance type": _with("instance_type", "ml.g5.48xlarge"),
    "source without its kind": _with("model.source", {"bucket": "b1b", "prefix": "p"}),
    "source with two kinds": _with("model.source", {"s3": {"bucket": "b", "prefix": "p"},
                                                    "volume": {"claim_name": "c"}}),
    "source of an unknown kind": _with("model.source", {"gcs": {"bucket": "b"}}),
    "missing required key": {"name": "x"},
    "missing required nested key": _with("model.source", {"s3": {"bucket": "b1b"}}),
    "list instead of a mapping": ["a", "b"],
    "trigger without its kind": _with("prefill.autoscaling", {"triggers": [
        {"name": "q", "server_address": "http://x", "query": "up", "target_value": 5}]}),
    "args not a list": _with("args", "--enforce-eager"),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_schema_refuses_what_the_loader_refuses(data: Any) -> None:
    _, problems = parse_spec_leniently(data)
    assert problems, "not malformed for the loader"
    assert not VALIDATOR.is_valid(data)


def test_schema_refuses_a_per_role_env_the_rules_refuse() -> None:
    assert not VALIDATOR.is_valid(_with("prefill.env", {"FOO": "bar"}))
    assert VALIDATOR.is_valid(_with("prefill.env", {}))


VALID = {
    "minimal": MINIMAL,
    "default": dump_spec(default_spec()),
    "short instance name": {**MINIMAL, "instance_type": "p5.48xlarge"},
    "huggingface": {**MINIMAL, "model": {"name": "m", "source": {"huggingface": {"model_id": "org/m"}}}},
    "architecture preset": {**MINIMAL, "model": {**MINIMAL["model"], "architecture": "llama-3.1-8b"}},
    "triggers": _with("prefill.autoscaling", {"max_replicas": 3, "triggers": [
        {"prometheus": {"name": "q", "server_address": "http://x", "query": "up", "target_value": 5}},
        {"cloudwatch": {"name": "r", "namespace": "AWS/SageMaker", "metric_name": "Invocations",
                        "target_value": 10, "dimensions": {"EndpointName": "e"}}}]}),
    "slo and alerts": {**MINIMAL, "slo": {"ttft_ms": 500}, "alerts": {"prefill_queue": 5}},
    "nulls for optional fields": {**MINIMAL, "endpoint_name": None, "tls": None},
}


@pytest.mark.parametrize("data", VALID.values(), ids=VALID.keys())
def test_schema_accepts_what_the_loader_accepts(data: Any) -> None:
    _, problems = parse_spec_leniently(data)
    assert not problems
    errors = [e.message for e in VALIDATOR.iter_errors(data)]
    assert errors == []


def test_schema_knows_the_config_json_form_the_checked_loader_reads(tmp_path: Any) -> None:
    """``model.architecture: {config_json: PATH}`` is read by ``check_data``; an editor must not flag it."""
    from hyperpod_dpd.validation.run import check_data

    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 32768, "intermediate_size": 14336,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16"}))
    good = {**MINIMAL, "model": {**MINIMAL["model"], "architecture": {"config_json": "config.json"}}}
    assert [e.message for e in VALIDATOR.iter_errors(good)] == []
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(good))
    assert check_data(good, source=str(spec_file)).architecture is not None
    for wrong in ({"config_json": 3}, {"config_json": ""}, {"config_json": "config.json", "num_layers": 3},
                  {"config_jsn": "config.json"}):
        bad = {**MINIMAL, "model": {**MINIMAL["model"], "architecture": wrong}}
        assert not VALIDATOR.is_valid(bad), wrong
