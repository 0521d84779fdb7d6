"""vLLM 0.19.0's flag values, not only names: choices, types and the keys of JSON config flags."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hyperpod_dpd import SpecError, check, dump_spec, parse_spec
from hyperpod_dpd.contracts.vllm import ValueRule, human_readable_int, vllm_flags
from hyperpod_dpd.spec.defaults import default_spec


def _with_args(args: list[str], role: str | None = None) -> dict[str, Any]:
    data = copy.deepcopy(dump_spec(default_spec()))
    if role is None:
        data["args"] = list(data.get("args") or []) + args
    else:
        data.setdefault(role, {})["args"] = args
    return data


def _problems(data: dict[str, Any]) -> list[str]:
    try:
        check(parse_spec(data))
    except SpecError as err:
        return [p.render() for p in err.problems]
    return []


def test_choices_are_the_literal_of_the_config_field() -> None:
    values = vllm_flags().values
    # vllm/config/cache.py: CacheDType = Literal["auto", "float16", "bfloat16", "fp8", ...]
    assert values["--kv-cache-dtype"].choices == ("auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3",
                                                  "fp8_e5m2", "fp8_inc")
    # vllm/config/model.py: ModelDType | torch.dtype -> choices (torch.dtype is not str)
    assert values["--dtype"].choices == ("auto", "bfloat16", "float", "float16", "float32", "half")
    assert values["--max-lora-rank"].type == "int" and 64 in (values["--max-lora-rank"].choices or ())
    # Literal with str beside it is a metavar, not choices (literal_to_kwargs)
    assert "--quantization" not in values
    # choices= in the add_argument call itself
    assert values["--gdn-prefill-backend"].choices == ("flashinfer", "triton")


def test_types_follow_compute_kwargs() -> None:
    values = vllm_flags().values
    assert values["--block-size"] == ValueRule(type="int")  # SkipValidation[int]
    assert values["--max-num-batched-tokens"].type == "human_readable_int"
    assert values["--gpu-memory-utilization"].type == "float"
    assert values["--compilation-config"].type == "json"
    assert "--enforce-eager" not in values  # a switch
    assert "--collect-detailed-traces" not in values  # its choices are rewritten in add_cli_args
    assert "--moe-backend" not in values  # its type is replaced by a lambda
    assert "--pt-load-map-location" not in values  # str | dict: union_dict_and_str takes any text
    assert values["--limit-mm-per-prompt"].type == "json"  # a bare dict: json.loads


def test_human_readable_int_is_vllms() -> None:
    assert human_readable_int("2k") == 2000 and human_readable_int("2K") == 2048
    assert human_readable_int("25.6k") == 25600 and human_readable_int(" 8192 ") == 8192
    with pytest.raises(ValueError):
        human_readable_int("2.5K")


def test_config_keys_are_the_dataclass_fields() -> None:
    keys = vllm_flags().config_keys
    assert keys["--compilation-config"].cls == "CompilationConfig"
    assert "cudagraph_mode" in keys["--compilation-config"].keys and "level" not in keys["--compilation-config"].keys
    assert keys["--speculative-config"].cls == "SpeculativeConfig"
    assert {"method", "num_speculative_tokens", "model"} <= set(keys["--speculative-config"].keys)
    assert {"kv_connector", "kv_role"} <= set(keys["--kv-transfer-config"].keys)
    nested = keys["--compilation-config"].nested
    assert nested["pass_config"].cls == "PassConfig" and "fuse_norm_quant" in nested["pass_config"].keys
    assert set(nested) == {"pass_config", "dynamic_shapes_config"}
    # Free dicts and fields pydantic never validates take any key: no nested entry for them.
    assert keys["--kv-transfer-config"].nested == {}  # kv_connector_extra_config: dict[str, Any]
    assert set(keys["--speculative-config"].nested) == {"draft_load_config"}  # not SkipValidation[ModelConfig]


@pytest.mark.parametrize(("args", "fragment"), [
    (["--kv-cache-dtype", "float8_e4m3fn"], "'float8_e4m3fn' is not one of vLLM 0.19.0's choices (auto, bfloat16"),
    (["--dtype", "fp16"], "--dtype 'fp16' is not one of"),
    (["--block-size", "sixteen"], "--block-size 'sixteen' is not an integer"),
    (["--max-num-batched-tokens", "2.5K"], "is not an integer (optionally with k"),
    (["--max-num-partial-prefills=two"], "is not an integer"),
    (["--max-num-batched-tokens", "0"], "--max-num-batched-tokens must be at least 1"),
    (["--stream-interval", "0"], "--stream-interval must be at least 1"),
    (["--compilation-config", '{"cudagraph_mode": "FULL_AND_PIECEWIS"}'], "cudagraph_mode"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 0}'], "num_speculative_tokens"),
    (["--reasoning-parser", "deepseek-r1"], "did you mean 'deepseek_r1'?"),
    (["--attention-backend", "FLASH_ATTNX"], "is not a name vLLM 0.19.0 has registered"),
    (["--quantization", "fp9"], "is not a name vLLM 0.19.0 has registered for --quantization"),
    (["--cudagraph-capture-sizes", "1", "2", "x"], "'x' is not an integer"),
    (["--compilation-config", '{"mode": 3, "cudagraph_mod": "FULL"}'],
     "'cudagraph_mod' is not a field of vLLM 0.19.0's CompilationConfig"),
    (["-cc.levle", "3"], "'levle' is not a field"),
    (["--compilation-config", "{mode: 3}"], "--compilation-config '{mode: 3}' is not a JSON value"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_token": 3}'],
     "'num_speculative_token' is not a field of vLLM 0.19.0's SpeculativeConfig"),
    (["--speculative-config", "{bad"], "--speculative-config takes a JSON object"),
    # Nested config classes forbid extra keys too (PassConfig is @config, vllm/config/compilation.py:104).
    (["--compilation-config", '{"pass_config": {"enable_fusion": true}}'],
     "'pass_config.enable_fusion' is not a field of vLLM 0.19.0's PassConfig"),
    (["-cc.pass_config.fuse_norm_qaunt", "true"], "'pass_config.fuse_norm_qaunt' is not a field of vLLM 0.19.0's "
     "PassConfig, which forbids extra keys: vLLM exits with a validation error ('Extra inputs are not permitted')"
     " (got '-cc.pass_config.fuse_norm_qaunt true'). Fix: did you mean 'fuse_norm_quant'?"),
    (["--speculative-config", '{"method": "ngram", "draft_load_config": {"load_fmt": "auto"}}'],
     "'draft_load_config.load_fmt' is not a field of vLLM 0.19.0's LoadConfig"),
])
def test_values_vllm_refuses_are_refused(args: list[str], fragment: str) -> None:
    problems = _problems(_with_args(args))
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("args", [
    ["--kv-cache-dtype", "fp8"],
    ["--dtype", "bfloat16"],
    ["--block-size", "16"],
    ["--max-num-batched-tokens", "16k"],
    ["--compilation-config", '{"mode": 3, "cudagraph_mode": "FULL"}'],
    ["-cc.mode", "3"],
    ["--compilation-config.splitting_ops+", "a,b"],
    ["--max-lora-rank", "64"],
    ["--cudagraph-capture-sizes", "1", "2", "4"],
    ["--max-log-len", "None"],
    ["--seed", "7"],
    ["--compilation-config", '{"pass_config": {"fuse_norm_quant": true}, "dynamic_shapes_config": {"type": "backed"}}'],
    ["-cc.pass_config.fuse_norm_quant", "true"],
    ["--compilation-config", '{"inductor_compile_config": {"any_key": 1}}'],  # a free dict stays free
])
def test_values_vllm_takes_pass(args: list[str]) -> None:
    problems = [p for p in _problems(_with_args(args)) if p.startswith("args")]
    assert problems == []


@pytest.mark.parametrize(("args", "fragment"), [
    (["--uds", "/tmp/vllm.sock"], "listen on a Unix socket"),
    (["--ssl-keyfile", "/k.pem", "--ssl-certfile", "/c.pem"], "switches vLLM to HTTPS"),
    (["--ssl-key", "/k.pem"], "switches vLLM to HTTPS"),  # an abbreviation of --ssl-keyfile
    (["--grpc"], "gRPC API instead of the HTTP one"),
    (["--headless"], "starts no API server"),
])
def test_flags_that_move_the_listener_are_refused(args: list[str], fragment: str) -> None:
    problems = _problems(_with_args(args))
    assert any(p.startswith("args:") and fragment in p for p in problems), problems


def test_routes_are_derived_from_the_api_server() -> None:
    from hyperpod_dpd.contracts.vllm import vllm_routes
    from hyperpod_dpd.validation.routing import VLLM_GENERATION_ROUTES

    routes = vllm_routes()
    assert {"/health", "/ping", "/load", "/version", "/v1/models"} <= set(routes.by_method["GET"])
    assert "/health" not in routes.by_method["POST"]
    # every text-generation route the routing rule accepts is a POST route vLLM declares
    assert sorted(f"/{r}" for r in VLLM_GENERATION_ROUTES if f"/{r}" not in routes.by_method["POST"]) == []
    assert routes.metrics("/metrics") and routes.metrics("/metrics/") and not routes.metrics("/prometheus")
    assert not routes.get("/healthz") and routes.get("/health")


@pytest.mark.parametrize(("path", "value", "fragment"), [
    ("health_check_path", "/healthz", "health_check_path: is not a path vLLM 0.19.0 serves (GET /docs"),
    ("health_check_path", "/v1/health", "every probe or scrape gets 404"),
    ("metrics.model_metrics_path", "/prometheus", "(GET /metrics and the paths under it)"),
])
def test_paths_vllm_serves_no_route_for_are_refused(path: str, value: str, fragment: str) -> None:
    data = copy.deepcopy(dump_spec(default_spec()))
    parent, _, last = path.rpartition(".")
    (data.setdefault(parent, {}) if parent else data)[last] = value
    problems = _problems(data)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize(("path", "value"), [
    ("health_check_path", "/health"), ("health_check_path", "/ping"), ("metrics.model_metrics_path", "/metrics"),
])
def test_paths_vllm_serves_pass(path: str, value: str) -> None:
    data = copy.deepcopy(dump_spec(default_spec()))
    parent, _, last = path.rpartition(".")
    (data.setdefault(parent, {}) if parent else data)[last] = value
    assert [p for p in _problems(data) if p.startswith(path)] == []


@pytest.mark.parametrize(("args", "role", "fragment"), [
    (["--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096"], None,
     "args: is below max_model_len 16384 with chunked prefill off"),
    (["--max-num-batched-tokens", "8"], "decode", "decode.args: is below decode.max_num_seqs 32"),
    # vLLM 0.19.0 refuses any concurrent partial prefill (vllm/engine/arg_utils.py, _check_feature_supported)
    (["--max-num-partial-prefills", "2", "--no-enable-chunked-prefill"], None, "asks for concurrent partial prefill"),
    (["--max-num-partial-prefills", "4", "--max-long-partial-prefills", "2"], None,
     "asks for concurrent partial prefill"),
    (["--max-long-partial-prefills", "3"], None, "asks for concurrent partial prefill"),
    (["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"], None, "is below --max-loras 4"),
    (["--enable-eplb"], None, "needs --enable-expert-parallel"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, '
      '"prompt_lookup_max": 4}'], None, "is above prompt_lookup_max 4"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}',
      "--async-scheduling"], None, "does not work with the speculative method 'ngram'"),
    (["--enable-auto-tool-choice", "--tool-call-parser", "llama3-json"], None, "did you mean 'llama3_json'?"),
    (["--decode-context-parallel-size", "0"], None, "integer modulo by zero"),
    (["--enable-auto-tool-choice"], None, "requires --tool-call-parser"),
    (["--enable-log-outputs"], "prefill", "prefill.args: requires --enable-log-requests"),
])
def test_vllms_own_cross_flag_checks(args: list[str], role: str | None, fragment: str) -> None:
    data = _with_args(args, role)
    data["max_model_len"] = 16384
    data.setdefault("decode", {})["max_num_seqs"] = 32
    problems = _problems(data)
    assert any(fragment in p for p in problems), problems


@pytest.mark.parametrize("args", [
    ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "16k"],  # 16000 < 16384: see the refusal test
    ["--enable-chunked-prefill", "--max-num-batched-tokens", "2048"],
    ["--long-prefill-token-threshold", "512"],
    ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'],
    ["--enable-auto-tool-choice", "--tool-call-parser", "llama3_json"],
    ["--enable-log-outputs", "--enable-log-requests"],
])
def test_flag_combinations_vllm_takes_pass(args: list[str]) -> None:
    data = _with_args(args)
    data["max_model_len"] = 16000
    assert [p for p in _problems(data) if "args" in p.split(":")[0]] == []


def test_decode_context_parallelism_must_divide_tp_and_agree_across_roles() -> None:
    data = _with_args(["-dcp", "3"])
    data["tensor_parallel_size"] = 8
    assert any("does not divide tensor_parallel_size 8" in p for p in _problems(data))
    data = _with_args(["--dcp-comm-backend", "a2a"])
    assert any("requires --decode-context-parallel-size above 1" in p for p in _problems(data))
    one_role = _problems(_with_args(["--decode-context-parallel-size", "2"], "decode"))
    assert any(p.startswith("decode.args: sets how each sequence's KV is split") for p in one_role), one_role
    shared = _with_args(["--decode-context-parallel-size", "2", "--dcp-comm-backend", "a2a"])
    shared["tensor_parallel_size"] = 8
    assert [p for p in _problems(shared) if p.startswith("args")] == []


@pytest.mark.parametrize(("value", "visible"), [
    ("0,1", 2), ("", 0), ("-1", 0), ("0,1,x,3", 2), ("0,1,2,9", 3), ("GPU-abc,GPU-def", 2), ("0,1,2,3,4,5,6,7", 8),
])
def test_visible_gpus_counts_like_torch(value: str, visible: int) -> None:
    from hyperpod_dpd.validation.engine import visible_gpus

    assert visible_gpus(value, 8) == visible


def test_cuda_visible_devices_hiding_gpus_from_tp_is_refused() -> None:
    data = copy.deepcopy(dump_spec(default_spec()))
    data["tensor_parallel_size"] = 8
    data["env"] = {**data.get("env", {}), "CUDA_VISIBLE_DEVICES": "0,1"}
    assert any(p.startswith("env.CUDA_VISIBLE_DEVICES: leaves 2 of the pod's 8 GPUs visible") for p in _problems(data))
    data["env"]["CUDA_VISIBLE_DEVICES"] = "0,1,2,3,4,5,6,7"
    assert [p for p in _problems(data) if p.startswith("env.")] == []


def test_quantization_dtypes_are_derived_from_the_quantization_configs() -> None:
    from hyperpod_dpd.contracts.vllm import quantization_dtypes

    dtypes = quantization_dtypes()
    assert dtypes["fp8"] == ("bfloat16", "float16")  # Fp8Config.get_supported_act_dtypes, quantization/fp8.py
    assert "float32" in dtypes["bitsandbytes"] and dtypes["awq"] == ("float16",)


def test_fp8_with_float32_is_refused_and_bfloat16_passes() -> None:
    problems = _problems(_with_args(["--quantization", "fp8", "--dtype", "float32"]))
    assert any("fp8 supports the model dtypes bfloat16, float16 only" in p for p in problems), problems
    assert [p for p in _problems(_with_args(["--quantization", "fp8", "--dtype", "bfloat16"]))
            if p.startswith("args")] == []
    assert [p for p in _problems(_with_args(["--quantization", "bitsandbytes", "--dtype", "float"]))
            if p.startswith("args")] == []
