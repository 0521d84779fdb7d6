"""``hyperpod-dpd plan``, run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import write_spec

from hyperpod_dpd.cli import main

REQUIRED = {"kv_bytes_per_token": int, "kv_bytes_per_token_per_rank": int, "kv_bytes_per_request_per_rank": int,
            "pd_buffer_transfers": int, "transfer_seconds_at_line_rate": float, "weights_bytes_per_gpu": int,
            "warnings": list}


def test_json_is_one_object_with_the_required_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    for key, kind in REQUIRED.items():
        assert type(data[key]) is kind, key
    assert data["kv_bytes_per_request_per_rank"] == 4096 * 40_960


def test_prompt_tokens_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--json", "--prompt-tokens", "8000"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_request_per_rank"] == 32 * 256 * 40_960
    assert 0.006 < data["transfer_seconds_at_line_rate"] < 0.007


def test_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nodes: ") and "\nDPD sizing plan: Llama-3.3-70B-Instruct" in out
    assert "transfers the PD buffer holds" in out


def test_model_config_overrides_the_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
                                  "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                                  "vocab_size": 128256, "torch_dtype": "bfloat16"}))
    assert main(["plan", "--json", "--model-config", str(config)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert any("SmallModel" in w for w in data["warnings"])


def test_sizing_error_prints_the_plan_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("tensor_parallel_size: 8", "tensor_parallel_size: 1"))
    assert main(["plan", spec, "--json"]) == 2
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # still exactly one JSON object
    assert data["errors"]
    assert "tensor_parallel_size" in captured.err
    assert "Traceback" not in captured.err


def test_unknown_model_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, ("name: Llama-3.3-70B-Instruct", "name: my-private-model"))
    assert main(["plan", spec]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "--model-config" in captured.err


def test_s3_error_exits_2_without_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from moto import mock_aws

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-west-2"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        assert main(["plan", "--model-config", "s3://missing-bucket/Llama"]) == 2
    err = capsys.readouterr().err
    assert "s3://missing-bucket/Llama/config.json" in err
    assert "Traceback" not in err


def test_bad_prompt_tokens_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--prompt-tokens", "0"])
    assert exit_info.value.code == 2
    assert "at least 1 token" in capsys.readouterr().err
