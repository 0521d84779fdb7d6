"""The command line: manifests, validation and clean errors with exit status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hyperpod_dpd.cli import main
from hyperpod_dpd.errors import warning_count
from hyperpod_dpd.spec.defaults import default_spec_text


def test_synth_writes_the_default_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["synth", "--output-dir", str(tmp_path / "out")]) == 0
    written = tmp_path / "out" / "default-dpd-test.k8s.yaml"
    assert capsys.readouterr().out.strip() == str(written)
    (document,) = yaml.safe_load_all(written.read_text())
    assert document["spec"]["pdSpec"]["routingThreshold"] == 4096


def test_synth_of_a_spec_file_with_region_option(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text().replace("      region: us-west-2\n", ""))
    assert main(["synth", str(spec), "--output-dir", str(tmp_path), "--region", "eu-north-1"]) == 0
    (document,) = yaml.safe_load_all((tmp_path / "default-dpd-test.k8s.yaml").read_text())
    assert document["spec"]["modelSourceConfig"]["s3Storage"]["region"] == "eu-north-1"


def test_synth_refuses_an_invalid_spec_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text().replace("replicas: 1", "replicas: 0", 1))
    out = tmp_path / "out"
    assert main(["synth", str(spec), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "prefill.replicas: must be at least 1" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_validate_prints_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text().replace('hash_seed: "0"', 'hash_seed: random').replace("threshold: 4096",
                                                                                               "threshold: -1"))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hyperpod-dpd: invalid DPD spec in {spec} (2 problems):")
    assert "kv_cache.hash_seed" in err and "routing.threshold" in err


def test_validate_expands_abbreviations_and_names_the_real_flag(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text() + "args: [--gpu-memory-util, '0.95', --max-num-batch-tokens, '8192']\n")
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "args: contradicts a spec field that sets this flag (got '--gpu-memory-util 0.95'). Fix: remove it and " \
           "set gpu_memory_utilization" in err
    assert "args: is not a flag of vLLM 0.19.0" in err and "Fix: did you mean --max-num-batched-tokens?" in err
    assert "Traceback" not in err


@pytest.fixture
def stricter_crd(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CRD that refuses model names longer than 5 characters: a violation no spec rule knows about."""
    import copy

    import jsonschema

    from hyperpod_dpd.contracts import crd

    schema = copy.deepcopy(crd.v1_schema())
    schema["properties"]["spec"]["properties"]["modelName"]["maxLength"] = 5
    monkeypatch.setattr(crd, "_validator", lambda: jsonschema.Draft202012Validator(schema))


@pytest.mark.usefixtures("stricter_crd")
def test_validate_checks_the_rendered_manifest_against_the_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hyperpod-dpd: invalid DPD spec in the embedded default spec (1 problem):")
    assert "manifest spec.modelName: breaks the operator's CRD (v3.3): 'Llama-3-3-70B-Instruct' is too long" in err
    assert "Fix: change the spec field" in err


@pytest.mark.usefixtures("stricter_crd")
def test_synth_checks_every_manifest_against_the_crd_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["synth", "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "manifest spec.modelName: breaks the operator's CRD (v3.3)" in err and "Traceback" not in err
    assert not out.exists()


def test_validate_reports_warnings_and_succeeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text().replace("decode:\n  replicas: 1", "decode:\n  replicas: 2"))
    assert main(["validate", str(spec)]) == 0
    captured = capsys.readouterr()
    assert "warning: [SingleDecoder] decode.replicas" in captured.err
    assert captured.out.splitlines()[0] == "nodes: prefill 1 x ml.p5.48xlarge, decode 2 x ml.p5.48xlarge = 3 nodes"
    assert captured.out.splitlines()[-1] == f"{spec}: valid (1 warning)"


def test_validate_counts_no_warnings_in_the_plural(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text())
    assert main(["validate", str(spec)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{spec}: valid (0 warnings)"
    assert [warning_count(n) for n in (0, 1, 2)] == ["0 warnings", "1 warning", "2 warnings"]


@pytest.mark.parametrize(("content", "message"), [
    ("name: [oops\n", "malformed YAML"),
    ("name: x\nmodel: {name: m, source: {s3: {bucket: b1b, prefix: p}}}\nreplicas: 3\n",
     "replicas: is not a known key"),
    ("name: x\nmodel: {name: m, source: {s3: {bucket: b1b, prefix: p}}}\nport: eighty\n",
     "port: must be an integer, not a string"),
])
def test_file_errors_exit_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                           message: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(content)
    assert main(["validate", str(spec)]) == 2
    assert message in capsys.readouterr().err


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read the spec file" in capsys.readouterr().err


def test_example_prints_a_spec_that_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example"]) == 0
    spec = tmp_path / "example.yaml"
    spec.write_text(capsys.readouterr().out)
    assert "chunk_tokens: 256" in spec.read_text()
    assert main(["validate", str(spec)]) == 0


def test_console_script_runs_without_node_or_jsii_noise(tmp_path: Path) -> None:
    """The installed entry point, in a fresh process: clean stderr on error, no Node banner on success."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: 1\n")
    failed = subprocess.run([sys.executable, "-m", "hyperpod_dpd.cli", "validate", str(bad)],
                            capture_output=True, text=True, check=False)
    assert failed.returncode == 2
    assert failed.stderr.startswith("hyperpod-dpd: invalid DPD spec")
    ok = subprocess.run([sys.executable, "-m", "hyperpod_dpd.cli", "synth", "--output-dir", str(tmp_path)],
                        capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""


def test_type_errors_and_rule_problems_are_reported_together(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(default_spec_text().replace("pd_buffer_size: 8Gi", "pd_buffer_size: 8589934592")
                    .replace("tensor_parallel_size: 8", "tensor_parallel_size: 6"))
    assert main(["validate", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "(2 problems)" in err
    assert "kv_cache.pd_buffer_size: must be a size with a unit" in err
    assert "tensor_parallel_size: does not divide the 64 attention heads of llama-3.3-70b (got 6)" in err
