"""``validate --engine``: each role's rendered command line through vLLM's own checks, its refusal at the spec
field that wrote the argument; the example spec and the audit's valid large-model specs accepted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperpod_dpd.cli import main
from hyperpod_dpd.oracle import EngineOracle, check_spec_with_engine
from hyperpod_dpd.oracle.engine import ENGINE_PYTHON_ENV, INSTALL_COMMAND
from hyperpod_dpd.oracle.spec_check import config_for
from hyperpod_dpd.spec.loading import parse_spec
from hyperpod_dpd.validation.run import check_data, known_architecture

EXAMPLE = Path(__file__).resolve().parents[2] / "k8s" / "hyperpod_dpd" / "data" / "llama-3.3-70b-p5.yaml"
LLAMA_405B_FP8 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 16384,
                  "intermediate_size": 53248, "num_attention_heads": 128, "num_key_value_heads": 8,
                  "num_hidden_layers": 126, "vocab_size": 128256, "max_position_embeddings": 131072,
                  "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5,
                  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                  "quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                          "modules_to_not_convert": []}}
QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 4096,
             "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_attention_heads": 64,
             "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 94, "num_experts": 128,
             "num_experts_per_tok": 8, "vocab_size": 151936, "max_position_embeddings": 40960,
             "torch_dtype": "bfloat16", "rms_norm_eps": 1e-6, "norm_topk_prob": True, "decoder_sparse_step": 1,
             "mlp_only_layers": []}


def _verdicts(oracle: EngineOracle, data: dict[str, Any], config: dict[str, Any] | None = None) -> list[Any]:
    spec = parse_spec(data)
    if config is None:
        architecture = known_architecture(spec)
        assert architecture is not None
        config = config_for(architecture, max_model_len=spec.max_model_len)
    return check_spec_with_engine(spec, oracle, config=config)


def test_the_published_example_is_accepted_on_both_roles(engine_oracle: EngineOracle,
                                                         example_data: dict[str, Any]) -> None:
    verdicts = _verdicts(engine_oracle, example_data)
    assert [(v.role, v.verdict.ok) for v in verdicts] == [("prefill", True), ("decode", True)]
    assert all(v.problem() is None for v in verdicts)
    assert verdicts[0].argv[:4] == ("vllm", "serve", "--model", "/opt/ml/model")


@pytest.mark.parametrize(("change", "field", "said"), [
    ({"decode": {"replicas": 1, "args": ["--max-num-batched-tokens", "0"]}}, "decode.args",
     "greater than or equal to 1"),
    ({"args": ["--reasoning-parser", "deepseek-r1"]}, "args", "has not been registered"),
    ({"max_model_len": 262144}, "max_model_len", "derived max_model_len"),
    ({"prefill": {"replicas": 1, "max_num_seqs": 0}}, "prefill.max_num_seqs", "greater than or equal to 1"),
    ({"args": ["--attention-backend", "FLASHMLA"]}, "args", "non-MLA not supported"),
])
def test_a_refusal_is_reported_at_the_field_that_wrote_the_argument(
        engine_oracle: EngineOracle, example_data: dict[str, Any], change: dict[str, Any], field: str,
        said: str) -> None:
    verdicts = _verdicts(engine_oracle, {**example_data, **change})
    problems = [p for v in verdicts if (p := v.problem()) is not None]
    assert problems
    assert problems[0].field == field
    assert said in problems[0].message
    assert "vLLM 0.19.0 refuses the" in problems[0].message
    assert "\n" not in problems[0].message  # pydantic's multi-line errors are joined


def test_an_fp8_70b_on_four_gpus_is_accepted(engine_oracle: EngineOracle, example_data: dict[str, Any]) -> None:
    data = {**example_data, "tensor_parallel_size": 4}
    spec = parse_spec(data)
    architecture = known_architecture(spec)
    assert architecture is not None
    config = config_for(architecture, max_model_len=spec.max_model_len)
    config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    verdicts = check_spec_with_engine(spec, engine_oracle, config=config)
    assert [v.verdict.ok for v in verdicts] == [True, True], [v.verdict.describe() for v in verdicts]
    assert verdicts[0].verdict.summary["quantization"] == "fp8"
    check_data(data)  # validate agrees


def test_a_qwen3_moe_with_expert_parallelism_is_accepted(engine_oracle: EngineOracle,
                                                         example_data: dict[str, Any]) -> None:
    data = {**example_data, "model": {**example_data["model"], "name": "Qwen3-235B-A22B"},
            "args": ["--enable-expert-parallel"]}
    verdicts = _verdicts(engine_oracle, data, QWEN3_MOE)
    assert [v.verdict.ok for v in verdicts] == [True, True], [v.verdict.describe() for v in verdicts]


def test_a_405b_fp8_on_p5en_needs_vllms_deprecated_quantization_switch(h200_oracle: EngineOracle,
                                                                        example_data: dict[str, Any]) -> None:
    """Meta's FP8 checkpoint is quantized with fbgemm_fp8, which vLLM 0.19.0 calls deprecated and refuses unless
    --allow-deprecated-quantization is given: found only by running vLLM's own checks."""
    data = {**example_data, "instance_type": "ml.p5en.48xlarge",
            "model": {**example_data["model"], "name": "Llama-3.1-405B-Instruct-FP8"}}
    refused = _verdicts(h200_oracle, data, LLAMA_405B_FP8)
    assert [v.verdict.ok for v in refused] == [False, False]
    assert "--allow-deprecated-quantization" in (refused[0].verdict.error or "")
    verdicts = _verdicts(h200_oracle, {**data, "args": ["--allow-deprecated-quantization"]}, LLAMA_405B_FP8)
    assert [v.verdict.ok for v in verdicts] == [True, True], [v.verdict.describe() for v in verdicts]
    assert verdicts[0].verdict.summary["quantization"] == "fbgemm_fp8"


def test_the_cli_without_the_engine_venv_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(ENGINE_PYTHON_ENV, str(tmp_path / "missing" / "python"))
    assert main(["validate", str(EXAMPLE), "--engine"]) == 2
    assert INSTALL_COMMAND in capsys.readouterr().err


@pytest.mark.slow  # starts vLLM's own process (30-60 s); make test-fast leaves it out
def test_the_cli_reports_vllms_refusal_beside_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An MLA-only attention backend on a dense model: only vLLM's support matrix knows, in the worker."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["decode"]["args"] = ["--attention-backend", "FLASHMLA"]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["validate", str(path)]) == 0  # the synth-time rules cannot know
    assert main(["validate", str(path), "--engine"]) == 2
    err = capsys.readouterr().err
    assert ("decode.args: vLLM 0.19.0 refuses the decode role's command line in the worker, after loading the "
            "weights (attention_backend)") in err
    assert "got '--attention-backend FLASHMLA'" in err


def test_the_cdk_app_with_engine_check_names_the_install_without_the_engine_venv(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hyperpod_dpd.errors import SpecError
    from hyperpod_dpd_cdk.app import stack_options

    monkeypatch.setenv(ENGINE_PYTHON_ENV, str(tmp_path / "missing" / "python"))
    with pytest.raises(SpecError) as err:
        stack_options({"spec": str(EXAMPLE), "engine_check": "true"})
    (problem,) = err.value.problems
    assert problem.field.endswith(": engine_check")
    assert INSTALL_COMMAND in problem.fix


@pytest.mark.slow  # starts vLLM's own process (30-60 s); make test-fast leaves it out
def test_the_cdk_app_with_engine_check_reports_vllms_refusal(tmp_path: Path) -> None:
    from hyperpod_dpd.errors import SpecError
    from hyperpod_dpd_cdk.app import stack_options

    data = yaml.safe_load(EXAMPLE.read_text())
    data["args"] = ["--attention-backend", "FLASHMLA"]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    stack_options({"spec": str(path)})  # the synth-time rules cannot know
    with pytest.raises(SpecError) as err:
        stack_options({"spec": str(path), "engine_check": "true"})
    assert {p.field for p in err.value.problems} == {f"{path}: args"}
    assert all("non-MLA not supported" in p.message for p in err.value.problems)
