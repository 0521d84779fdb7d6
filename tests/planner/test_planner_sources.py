"""Where architectures come from: presets, local config.json files, and S3 (moto and botocore's Stubber)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from hyperpod_dpd import SpecError
from hyperpod_dpd.clients.aws import read_model_config
from hyperpod_dpd.planner import load_architecture
from hyperpod_dpd.planner.sources import S3Reader
from hyperpod_dpd.spec.architecture import PRESETS, UnsizableArchitecture, architecture_from_config

# The public Llama-3.3-70B-Instruct config.json, the keys sizing reads (and a few it ignores).
LLAMA_70B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
    "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8, "vocab_size": 128256,
    "torch_dtype": "bfloat16", "tie_word_embeddings": False, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
}
# DeepSeek-V3's config.json (abridged): multi-head latent attention.
DEEPSEEK_V3_CONFIG: dict[str, Any] = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "torch_dtype": "bfloat16", "vocab_size": 129280,
}


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield


def _reader(s3: Any) -> S3Reader:
    """The reader the commands pass, on the test's client."""
    return partial(read_model_config, s3_client=s3)


def only_problem(err: pytest.ExceptionInfo[SpecError]) -> Any:
    assert len(err.value.problems) == 1
    problem = err.value.problems[0]
    assert problem.field == "model.architecture"
    return problem


def test_config_json_gives_the_preset_numbers() -> None:
    arch = architecture_from_config(LLAMA_70B_CONFIG, name="Llama-3.3-70B-Instruct")
    preset = PRESETS["llama-3.3-70b"]
    shape = ("num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim", "num_parameters",
             "dtype", "vocab_size", "intermediate_size")
    assert {k: getattr(arch, k) for k in shape} == {k: getattr(preset, k) for k in shape}


def test_preset_name() -> None:
    assert load_architecture("llama-3.1-8b") is PRESETS["llama-3.1-8b"]


def test_local_file_and_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_70B_CONFIG))
    by_file = load_architecture(str(tmp_path / "config.json"))
    by_folder = load_architecture(str(tmp_path))
    assert by_file.num_parameters == by_folder.num_parameters == 70_553_706_496
    assert by_file.num_kv_heads == 8


def test_local_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(SpecError) as err:
        load_architecture(str(path))
    assert "is not valid JSON" in only_problem(err).message


def test_local_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_architecture(str(tmp_path / "nope.json"))
    problem = only_problem(err)
    assert "does not exist" in problem.message
    assert "llama-3.3-70b" in problem.fix


def test_mla_is_reported_as_unsizable(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3_CONFIG))
    with pytest.raises(SpecError) as err:
        load_architecture(str(path))
    message = only_problem(err).message
    assert "cannot be sized" in message
    assert "multi-head latent attention" in message


@pytest.mark.parametrize(("config", "reason"), [
    ({**LLAMA_70B_CONFIG, "model_type": "mistral", "sliding_window": 4096}, "sliding-window"),
    ({**LLAMA_70B_CONFIG, "model_type": "gemma2"}, "interleaves sliding-window"),
    ({**LLAMA_70B_CONFIG, "model_type": "jamba"}, "state-space"),
    ({**LLAMA_70B_CONFIG, "layer_types": ["full_attention", "linear_attention"]}, "linear_attention"),
    ({k: v for k, v in LLAMA_70B_CONFIG.items() if k != "num_hidden_layers"}, "num_hidden_layers is missing"),
    ({**LLAMA_70B_CONFIG, "num_key_value_heads": 7}, "not a multiple"),
])
def test_other_unsizable_configs(config: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsizableArchitecture, match=reason):
        architecture_from_config(config)


def test_disabled_sliding_window_is_sizable() -> None:
    # Qwen2.5 configs carry sliding_window 131072 with use_sliding_window false
    arch = architecture_from_config({**LLAMA_70B_CONFIG, "model_type": "qwen2", "sliding_window": 131072,
                                     "use_sliding_window": False})
    assert arch.num_kv_heads == 8


def test_fp8_checkpoint_weighs_one_byte_per_parameter() -> None:
    arch = architecture_from_config({**LLAMA_70B_CONFIG, "quantization_config": {"quant_method": "fp8"}})
    assert arch.weight_bytes == arch.num_parameters
    assert arch.dtype_bytes == 2  # the KV cache stays bf16


def test_nested_text_config_is_read() -> None:
    arch = architecture_from_config({"model_type": "llava", "torch_dtype": "bfloat16",
                                     "text_config": {k: v for k, v in LLAMA_70B_CONFIG.items()
                                                     if k != "torch_dtype"}})
    assert (arch.num_layers, arch.dtype) == (80, "bfloat16")


@mock_aws
def test_s3_found(aws_env: None) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="models", Key="Llama-3.3-70B-Instruct/config.json", Body=json.dumps(LLAMA_70B_CONFIG))
    arch = load_architecture("s3://models/Llama-3.3-70B-Instruct/", read_s3=_reader(s3))
    assert arch.num_layers == 80
    assert arch.num_parameters == PRESETS["llama-3.3-70b"].num_parameters
    # without a client, the default boto3 client is used
    assert load_architecture("s3://models/Llama-3.3-70B-Instruct", read_s3=read_model_config).num_kv_heads == 8


@mock_aws
def test_s3_missing_object(aws_env: None) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    with pytest.raises(SpecError) as err:
        load_architecture("s3://models/absent", read_s3=_reader(s3))
    problem = only_problem(err)
    assert problem.value == "s3://models/absent/config.json"
    assert "does not exist" in problem.message


@mock_aws
def test_s3_missing_bucket(aws_env: None) -> None:
    with pytest.raises(SpecError) as err:
        load_architecture("s3://no-such-bucket/prefix", read_s3=read_model_config)
    assert "bucket does not exist" in only_problem(err).message


@mock_aws
def test_s3_malformed_json(aws_env: None) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="models", Key="m/config.json", Body=b"\x00garbage")
    with pytest.raises(SpecError) as err:
        load_architecture("s3://models/m", read_s3=_reader(s3))
    assert "is not valid JSON" in only_problem(err).message


@mock_aws
def test_s3_mla_config_is_unsizable(aws_env: None) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    s3.create_bucket(Bucket="models", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    s3.put_object(Bucket="models", Key="DeepSeek-V3/config.json", Body=json.dumps(DEEPSEEK_V3_CONFIG))
    with pytest.raises(SpecError) as err:
        load_architecture("s3://models/DeepSeek-V3", read_s3=_reader(s3))
    assert "multi-head latent attention" in only_problem(err).message


def test_s3_access_denied_with_stubber() -> None:
    s3 = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(s3) as stub:
        stub.add_client_error("get_object", service_error_code="AccessDenied", service_message="Access Denied",
                              http_status_code=403,
                              expected_params={"Bucket": "locked", "Key": "Llama/config.json"})
        with pytest.raises(SpecError) as err:
            load_architecture("s3://locked/Llama", read_s3=_reader(s3))
        stub.assert_no_pending_responses()
    problem = only_problem(err)
    assert "access denied" in problem.message
    assert "s3:GetObject" in problem.fix


def test_s3_no_such_key_with_stubber() -> None:
    s3 = boto3.client("s3", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="y")
    with Stubber(s3) as stub:
        stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404)
        with pytest.raises(SpecError) as err:
            load_architecture("s3://bucket/explicit.json", read_s3=_reader(s3))
    problem = only_problem(err)
    assert problem.value == "s3://bucket/explicit.json"
    assert "does not exist" in problem.message


def test_s3_without_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3 = boto3.client("s3", region_name="us-west-2")
    with pytest.raises(SpecError) as err:
        load_architecture("s3://bucket/prefix", read_s3=_reader(s3))
    assert "no AWS credentials" in only_problem(err).message


@pytest.mark.parametrize(("changes", "length"), [
    ({}, 131072),  # Llama 3.3: rope type llama3 is already counted in max_position_embeddings
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}, 131072),
    ({"max_position_embeddings": 32768,  # Qwen2.5-Instruct with the model card's YaRN addition
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, 131072),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, 262144),
    ({"max_position_embeddings": None}, None),  # nothing says: unknown, so nothing is refused
])
def test_the_context_window_is_read_as_vllm_derives_it(changes: dict[str, Any], length: int | None) -> None:
    config = {k: v for k, v in {**LLAMA_70B_CONFIG, **changes}.items() if v is not None}
    assert architecture_from_config(config, name="m").max_context_length == length


def test_every_preset_has_a_context_window_and_its_source() -> None:
    for preset in PRESETS.values():
        assert preset.max_context_length and preset.max_context_length >= 32768, preset.name
        assert "max_position_embeddings" in preset.context_source, preset.name
    assert PRESETS["llama-3.3-70b"].max_context_length == architecture_from_config(
        LLAMA_70B_CONFIG, name="Llama-3.3-70B-Instruct").max_context_length


def test_s3_without_a_reader_is_refused_with_the_fix() -> None:
    with pytest.raises(SpecError) as err:
        load_architecture("s3://models/Llama")
    problem = only_problem(err)
    assert problem.value == "s3://models/Llama"
    assert "no S3 reader" in problem.message
    assert "read_model_config" in problem.fix
