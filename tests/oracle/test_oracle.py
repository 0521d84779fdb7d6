"""vLLM 0.19.0's own checks through the oracle: the audit's classes refused with vLLM's message, valid command
lines accepted, and a check that cannot run never reported as valid."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hyperpod_dpd.oracle import EngineOracle, EngineUnavailable, fake_gpu
from hyperpod_dpd.oracle.engine import ENGINE_PYTHON_ENV, INSTALL_COMMAND, WARM_UP_CONFIG
from hyperpod_dpd.spec.instances import InstanceType

# A Llama 3.3 70B shape: 64 heads, 8 KV heads, 131072 positions.
LLAMA_70B = {**WARM_UP_CONFIG, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
             "intermediate_size": 28672, "num_hidden_layers": 80, "vocab_size": 128256,
             "max_position_embeddings": 131072}
NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'


@pytest.fixture(scope="module")
def model(engine_oracle: EngineOracle) -> str:
    return str(engine_oracle.model_dir(LLAMA_70B, "llama-70b"))


@pytest.mark.parametrize("args", [
    ["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_producer"}'],
    ["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_consumer"}'],
    ["--kv-cache-dtype", "fp8"],
    ["--speculative-config", NGRAM],
    ["--max-num-batched-tokens", "2048", "--long-prefill-token-threshold", "512"],
    ["--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"],
    ["-cc", '{"cudagraph_mode": "FULL_AND_PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4, 8]}'],
    ["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "8"],
    ["--tool-call-parser", "llama3-json"],  # vLLM ignores the name without --enable-auto-tool-choice
    ["--max-num-seq", "8"],  # argparse takes a unique prefix
])
def test_valid_command_lines_are_accepted(engine_oracle: EngineOracle, model: str, args: list[str]) -> None:
    verdict = engine_oracle.check([model, "--tensor-parallel-size", "8", "--max-model-len", "16384", *args])
    assert verdict.ok is True, verdict.describe()
    assert verdict.summary["world_size"] == 8


@pytest.mark.parametrize(("args", "stage", "said"), [
    (["--max-num-batched-tokens", "0"], "engine_config", "greater than or equal to 1"),
    (["--max-loras", "0", "--enable-lora"], "engine_config", "greater than or equal to 1"),
    (["--stream-interval", "0"], "engine_config", "greater than or equal to 1"),
    (["--max-num-seqs", "0"], "engine_config", "greater than or equal to 1"),
    (["-cc", '{"cudagraph_mode": "FULL_AND_PIECEWIS"}'], "parse", "FULL_AND_PIECEWIS"),
    (["-cc", '{"cudagraph_mod": "FULL"}'], "parse", "Unexpected keyword argument"),
    (["-cc", '{"mode": 5}'], "parse", "Input should be 0, 1, 2 or 3"),
    (["--speculative-config", NGRAM.replace('"num_speculative_tokens": 3', '"num_speculative_tokens": 0')],
     "engine_config", "num_speculative_tokens"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, '
      '"prompt_lookup_max": 4}'], "engine_config", "prompt_lookup_min=5 must be <= prompt_lookup_max=4"),
    (["--speculative-config", '{"method": "ngramx", "num_speculative_tokens": 3}'], "engine_config", "method"),
    (["--enable-auto-tool-choice", "--tool-call-parser", "llama3-json"], "api_server", "invalid tool call parser"),
    (["--reasoning-parser", "deepseek-r1"], "parsers", "has not been registered"),
    (["--attention-backend", "FLASHMLA"], "attention_backend", "non-MLA not supported"),
    (["--kv-cache-dtype", "fp8", "--attention-backend", "TREE_ATTN"], "attention_backend",
     "kv_cache_dtype not supported"),
    (["--speculative-config", NGRAM, "--async-scheduling"], "engine_config", "async scheduling is only supported"),
    (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"], "engine_config", "must be >= max_loras"),
    (["--enable-eplb"], "engine_config", "enable_expert_parallel must be True to use EPLB"),
    (["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_produce"}'], "parse",
     "kv_role"),
    (["--kv-transfer-config", '{"kv_connector": "LMCacheConnectorV2", "kv_role": "kv_producer"}'],
     "engine_config", "Unsupported connector type"),
    (["--max-model-len", "262144"], "engine_config", "greater than the derived max_model_len"),
    (["--tensor-parallel-size", "3"], "engine_config", "must be divisible by tensor parallel size (3)"),
    (["--tensor-parallel-size", "16"], "engine_config", "larger than the number of available GPUs (8)"),
    (["--kv-cache-dtype", "fp9"], "parse", "invalid choice"),
    (["--max-num-partial-prefills", "2"], "engine_config", "Concurrent Partial Prefill is not supported"),
    (["--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096", "--max-model-len", "32768"],
     "engine_config", "max_num_batched_tokens"),
    (["--max-num-sequences", "8"], "parse", "unrecognized arguments"),
])
def test_the_audit_classes_are_refused_with_vllms_message(engine_oracle: EngineOracle, model: str,
                                                           args: list[str], stage: str, said: str) -> None:
    verdict = engine_oracle.check([model, "--tensor-parallel-size", "8", *args])
    assert verdict.ok is False, verdict.describe()
    assert verdict.stage == stage
    assert said in (verdict.error or ""), verdict.error


def test_the_fake_node_sets_vllms_device_defaults(engine_oracle: EngineOracle, model: str) -> None:
    """max_num_seqs and max_num_batched_tokens follow the device; an H100 with 80 GiB gets 1024 and 8192."""
    verdict = engine_oracle.check([model, "--tensor-parallel-size", "8"])
    assert verdict.summary["max_num_seqs"] == 1024
    assert verdict.summary["max_num_batched_tokens"] == 8192
    assert verdict.summary["attention_backend"] == "FLASH_ATTN"


def test_a_pod_with_fewer_gpus_refuses_a_larger_world(engine_oracle: EngineOracle, model: str) -> None:
    verdict = engine_oracle.check([model, "--tensor-parallel-size", "8"], gpus=4)
    assert verdict.ok is False
    assert "World size (8) is larger than the number of available GPUs (4)" in (verdict.error or "")


def test_a_check_that_times_out_could_not_run_and_is_never_valid(engine_oracle: EngineOracle, model: str) -> None:
    verdict = engine_oracle.check([model], timeout=0.001)
    assert verdict.ok is None
    assert verdict.could_not_run and not verdict.refused
    assert verdict.describe().startswith("the engine check could not run: ")
    # The process survives a killed child: the next check runs.
    assert engine_oracle.check([model, "--tensor-parallel-size", "8"]).ok is True


def test_without_the_engine_venv_the_error_names_the_install(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.setenv(ENGINE_PYTHON_ENV, str(tmp_path / "none" / "bin" / "python"))
    with pytest.raises(EngineUnavailable, match=INSTALL_COMMAND):
        EngineOracle(fake_gpu(InstanceType.P5_48XLARGE))


def test_an_engine_process_that_cannot_start_could_not_run(tmp_path: Path) -> None:
    """A Python without vLLM (this one) fails at the import: an error with the reason, no hang."""
    fake = tmp_path / "venv" / "bin"
    fake.mkdir(parents=True)
    (tmp_path / "venv" / "stub").mkdir()
    (tmp_path / "venv" / "stub" / "libcuda.so.1").write_bytes(b"")
    (fake / "python").symlink_to(os.path.realpath(sys.executable))
    with pytest.raises(EngineUnavailable, match="the engine check could not run"):
        EngineOracle(fake_gpu(InstanceType.P5_48XLARGE), python=fake / "python", start_timeout=120).start()
