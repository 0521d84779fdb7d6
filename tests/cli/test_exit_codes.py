"""The exit status docs/commands.md states once (``hyperpod_dpd.cli.EXIT_CODES``), against the real commands."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from hyperpod_dpd.cli import EXIT_CODES, main
from hyperpod_dpd.spec.defaults import default_spec_text

REPO = Path(__file__).resolve().parents[2]
HF_SPEC = """name: q
model:
  name: Qwen3-8B
  architecture: qwen3-8b
  source: {huggingface: {model_id: Qwen/Qwen3-8B, revision: 0123456789abcdef0123456789abcdef01234567}}
tensor_parallel_size: 4
"""


@pytest.fixture
def no_aws_no_kube(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with neither AWS credentials nor a kubeconfig (and no instance metadata to fall back on)."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))


def test_the_documented_codes_are_the_ones_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert EXIT_CODES in capsys.readouterr().out
    assert EXIT_CODES in (REPO / "docs" / "commands.md").read_text()


def test_0_valid_and_2_invalid_or_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(default_spec_text().replace("tensor_parallel_size: 8", "tensor_parallel_size: 3"))
    assert main(["validate", str(bad)]) == 2
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert main(["synth", str(bad), "-o", str(tmp_path / "out")]) == 2
    typo = tmp_path / "typo.yaml"
    typo.write_text(default_spec_text().replace("tensor_parallel_size: 8", "tensor_paralel_size: 8"))
    assert main(["plan", str(typo)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_2_for_a_bad_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["validate", "--no-such-option"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


@pytest.mark.usefixtures("no_aws_no_kube")
def test_preflight_without_credentials_is_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "--availability-zone-id", "usw2-az2"]) == 2
    assert "no AWS credentials found" in capsys.readouterr().err


@pytest.mark.usefixtures("no_aws_no_kube")
def test_bench_without_a_kubeconfig_is_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    assert "kubeconfig" in capsys.readouterr().err


@pytest.mark.usefixtures("no_aws_no_kube")
def test_verify_without_credentials_or_kubeconfig_is_1_with_the_checks_that_could_not_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--no-wait", "--json"]) == 1
    assert '"status": "ERROR"' in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator") is None, reason="needs the advisor extra")
def test_advise_missing_an_sla_is_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advise", "--isl", "4096", "--osl", "256", "--concurrency", "8", "--tpot-ms", "1", "--json"]) == 1
    assert '"misses_sla"' in capsys.readouterr().out


@pytest.mark.usefixtures("no_aws_no_kube")
@pytest.mark.parametrize("argv", [["preflight", "--availability-zone-id", "usw2-az2", "--json"], ["bench", "--json"],
                                  ["advise", "--json"]])
def test_a_refusal_with_json_is_a_json_object_on_standard_output(capsys: pytest.CaptureFixture[str],
                                                                 argv: list[str]) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["command"] == argv[0] and document["exit_status"] == 2
    assert document["error"] and captured.err == f"hyperpod-dpd: {document['error']}\n"


def test_verify_dry_run_with_json_prints_the_names_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--dry-run", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["stack_outputs"] is None
    assert [n["what"] for n in document["names"]] == ["hyperpod cluster", "endpoint", "router"]
    assert {n["origin"] for n in document["names"]} == {"guessed from the spec"}


@pytest.mark.usefixtures("no_aws_no_kube")
def test_verify_without_a_cluster_says_not_checked_and_names_the_missing_region(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    spec = tmp_path / "hf.yaml"  # a Hugging Face source: no bucket region to fall back on
    spec.write_text(HF_SPEC)
    assert main(["verify", str(spec), "--no-wait"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("verify default/q (no AWS region: pass --region or set AWS_REGION)\n")
    assert "in ?" not in out and "not ready" not in out
    assert "kv roles          SKIP    not checked: no connection to the cluster (see the kubernetes row)" in out


@pytest.mark.parametrize(("typed", "said"), [
    ("valdate", "unknown command 'valdate'; did you mean 'validate'?"),
    ("prefligt", "unknown command 'prefligt'; did you mean 'preflight'?"),
    ("deploy", "unknown command 'deploy'; the commands: example, schema, validate,"),
])
def test_a_misspelt_command_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str], typed: str, said: str) -> None:
    assert main([typed, "my-spec.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hyperpod-dpd: {said}") and "Fix: run `hyperpod-dpd --help`" in err
